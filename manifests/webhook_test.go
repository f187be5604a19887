package manifests

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/memifnet/memifnet/internal/names"
)

// webhookName names the webhook's Deployment, Service, ServiceAccount, roles, Lease and both
// webhook configurations.
const (
	webhookName   = "memifnet-webhook"
	webhookSecret = "memifnet-webhook-tls"
)

func find[T any](t *testing.T, objs []any, name string, get func(T) string) T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.(T); ok && get(v) == name {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T %s", zero, name)
	return zero
}

// The webhook as docs/webhook.md describes it, in every overlay: two replicas, a PDB, hardened
// like the node agent, its flags naming the objects it writes, the Service and the
// configurations pointing at each other, only annotated pods sent, failurePolicy Fail.
func TestWebhook(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			objs := build(t, dir)
			external := dir == "overlays/cert-manager" // the webhook serves cert-manager's certificate
			dep := find(t, objs, webhookName, func(d *appsv1.Deployment) string { return d.Name })
			spec := dep.Spec.Template.Spec
			if dep.Namespace != namespace || dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
				t.Errorf("Deployment %s/%s replicas %v, want 2 in %s", dep.Namespace, dep.Name, dep.Spec.Replicas, namespace)
			}
			if ru := dep.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
				t.Error("a rollout must keep every replica until its replacement is ready (maxUnavailable 0)")
			}
			if spec.HostNetwork || spec.ServiceAccountName != webhookName {
				t.Errorf("hostNetwork %v, serviceAccountName %q", spec.HostNetwork, spec.ServiceAccountName)
			}
			if spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot {
				t.Error("the webhook must run as non-root")
			}
			sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
				t.Fatalf("selector %v does not match the template's labels", dep.Spec.Selector)
			}
			c := container(t, spec.Containers, "webhook")
			if c.Image != image+":"+imageTag || !slices.Equal(c.Command, []string{"/usr/local/bin/memif-webhook"}) {
				t.Errorf("image %s command %q", c.Image, c.Command)
			}
			if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Error("memory requests and limits must be set")
			}
			for flag, want := range map[string]string{"service": webhookName, "secret": webhookSecret, "configuration": webhookName, "lease": webhookName} {
				if v, _ := flagValue(c.Args, flag); v != want {
					t.Errorf("--%s=%q, want %s", flag, v, want)
				}
			}
			if v, set := flagValue(c.Args, "certificates"); external && v != "external" || !external && set {
				t.Errorf("--certificates=%q (set %v): want external with cert-manager, unset (self) otherwise", v, set)
			}
			// Only flags memif-webhook has: an unknown one stops it at start. --pool went when
			// zero-copy ports stopped taking pool units (their pool is the pod's own memory).
			for _, arg := range c.Args {
				name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
				if !slices.Contains(webhookFlags(t), name) {
					t.Errorf("argument %q: memif-webhook has no flag --%s", arg, name)
				}
			}
			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			listen, _ := flagValue(c.Args, "listen")
			health, _ := flagValue(c.Args, "health-listen")
			if listen != ":8443" || ports["https"] != 8443 || health != ":9103" || ports["health"] != 9103 {
				t.Errorf("--listen=%s --health-listen=%s, ports %v", listen, health, ports)
			}
			if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.IntValue() != 9103 {
				t.Errorf("readiness probe %+v", p)
			}
			if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.IntValue() != 9103 {
				t.Errorf("liveness probe %+v", p)
			}
			// The token reaches the webhook read-only at the in-cluster path, by projection.
			var tokenVol string
			for _, m := range c.VolumeMounts {
				if m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount" && m.ReadOnly {
					tokenVol = m.Name
				}
			}
			if len(c.VolumeMounts) != 1 || tokenVol == "" {
				t.Errorf("mounts %+v: want only the projected token, read-only", c.VolumeMounts)
			}
			for _, v := range spec.Volumes {
				if v.Name == tokenVol && (v.Projected == nil || len(v.Projected.Sources) != 3 || v.Projected.Sources[0].ServiceAccountToken == nil) {
					t.Errorf("volume %s: want a projected token, CA and namespace", v.Name)
				}
			}
			pdb := find(t, objs, webhookName, func(p *policyv1.PodDisruptionBudget) string { return p.Name })
			psel, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || !psel.Matches(labels.Set(dep.Spec.Template.Labels)) {
				t.Errorf("PDB %+v: want minAvailable 1 of the webhook's pods", pdb.Spec)
			}
			svc := find(t, objs, webhookName, func(s *corev1.Service) string { return s.Name })
			if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) || len(svc.Spec.Ports) != 1 ||
				svc.Spec.Ports[0].TargetPort.String() != "https" || svc.Namespace != namespace {
				t.Errorf("Service %+v does not reach the webhook's https port", svc.Spec)
			}
			checkConfigurations(t, objs, svc, external)
			checkWebhookRBAC(t, objs, external)
		})
	}
}

// certManagerInject is the cainjector's annotation, naming the serving Certificate (ns/name).
// webhookFlags are the flags cmd/memif-webhook defines, read from its main.go.
func webhookFlags(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("../cmd/memif-webhook/main.go")
	if err != nil {
		t.Fatal(err)
	}
	var fs []string
	for _, m := range regexp.MustCompile(`flag\.\w+\((?:&[\w.]+, )?"([a-z-]+)"`).FindAllSubmatch(src, -1) {
		fs = append(fs, string(m[1]))
	}
	if !slices.Contains(fs, "listen") || !slices.Contains(fs, "certificates") {
		t.Fatalf("flags %q read from cmd/memif-webhook/main.go: the pattern no longer finds them", fs)
	}
	return fs
}

const certManagerInject = "cert-manager.io/inject-ca-from"

func checkConfigurations(t *testing.T, objs []any, svc *corev1.Service, external bool) {
	t.Helper()
	m := find(t, objs, webhookName, func(c *admissionregv1.MutatingWebhookConfiguration) string { return c.Name })
	v := find(t, objs, webhookName, func(c *admissionregv1.ValidatingWebhookConfiguration) string { return c.Name })
	// With cert-manager its cainjector fills caBundle from the webhook's Certificate; otherwise
	// nothing but the webhook may (two injectors would fight over it).
	want := map[string]string(nil)
	if external {
		want = map[string]string{certManagerInject: namespace + "/" + webhookName}
	}
	for kind, a := range map[string]map[string]string{"Mutating": m.Annotations, "Validating": v.Annotations} {
		if !maps.Equal(a, want) {
			t.Errorf("%sWebhookConfiguration annotations %v, want %v", kind, a, want)
		}
	}
	type hook struct {
		name  string
		cc    admissionregv1.WebhookClientConfig
		fail  *admissionregv1.FailurePolicyType
		side  *admissionregv1.SideEffectClass
		ns    *metav1.LabelSelector
		conds []admissionregv1.MatchCondition
		rules []admissionregv1.RuleWithOperations
		path  string
	}
	var hooks []hook
	for _, w := range m.Webhooks {
		hooks = append(hooks, hook{w.Name, w.ClientConfig, w.FailurePolicy, w.SideEffects, w.NamespaceSelector, w.MatchConditions, w.Rules, "/mutate"})
	}
	for _, w := range v.Webhooks {
		hooks = append(hooks, hook{w.Name, w.ClientConfig, w.FailurePolicy, w.SideEffects, w.NamespaceSelector, w.MatchConditions, w.Rules, "/validate"})
	}
	if len(hooks) != 3 || hooks[2].name != bindingHook {
		t.Fatalf("%d webhooks, want one mutating and two validating (pods, then %s)", len(hooks), bindingHook)
	}
	for _, h := range hooks {
		s := h.cc.Service
		if s == nil || s.Name != svc.Name || s.Namespace != svc.Namespace || s.Port == nil || *s.Port != svc.Spec.Ports[0].Port ||
			s.Path == nil || *s.Path != h.path || len(h.cc.CABundle) != 0 || h.cc.URL != nil {
			t.Errorf("%s: clientConfig %+v: want the Service, path %s, no caBundle (the webhook injects it)", h.path, h.cc, h.path)
		}
		if h.fail == nil || *h.fail != admissionregv1.Fail || h.side == nil || *h.side != admissionregv1.SideEffectClassNone {
			t.Errorf("%s: failurePolicy %v sideEffects %v, want Fail and None", h.path, h.fail, h.side)
		}
		// The webhook's own pods (and kube-system's) are never sent to it.
		nsSel, err := metav1.LabelSelectorAsSelector(h.ns)
		if err != nil || h.ns == nil {
			t.Fatalf("%s: namespaceSelector %v", h.path, err)
		}
		for ns, sent := range map[string]bool{namespace: false, "kube-system": false, "default": true} {
			if nsSel.Matches(labels.Set{"kubernetes.io/metadata.name": ns}) != sent {
				t.Errorf("%s: namespace %s sent=%v, want %v", h.path, ns, !sent, sent)
			}
		}
		if h.name == bindingHook {
			checkBindingHook(t, h.conds, h.rules)
			continue
		}
		// Only pods carrying the annotation: failurePolicy Fail must not reach other pods.
		wantConds, wantResources := 1, []string{"pods"}
		if h.path == "/validate" {
			// Updates through pods/status too (issue 18 part 6), but only those that change
			// metadata: the kubelet's status updates must never wait for the webhook.
			wantConds, wantResources = 2, []string{"pods", "pods/status"}
		}
		if len(h.conds) != wantConds || !strings.Contains(h.conds[0].Expression, "'"+names.PortsAnnotation+"' in ") {
			t.Errorf("%s: matchConditions %+v must select pods with %s", h.path, h.conds, names.PortsAnnotation)
		}
		if h.path == "/validate" {
			if !strings.Contains(h.conds[0].Expression, "o.metadata.labels.exists(k, k.startsWith('"+names.LinkLabelPrefix+"'))") {
				t.Errorf("validating matchConditions must also select pods with a %s label (forgery)", names.LinkLabelPrefix)
			}
			if !strings.Contains(h.conds[0].Expression, "podAntiAffinity.?requiredDuringSchedulingIgnoredDuringExecution") ||
				!strings.Contains(h.conds[0].Expression, "n != request.?namespace.orValue('')") {
				t.Error("validating matchConditions must also select pods whose affinity terms reach link labels of other namespaces")
			}
			if c := h.conds[1].Expression; !strings.HasPrefix(c, "request.?subResource.orValue('') != 'status' ||") {
				t.Errorf("validating matchConditions: the second must send status updates only when they change metadata: %s", c)
			}
		}
		if len(h.rules) != 1 || !slices.Equal(h.rules[0].Resources, wantResources) || !slices.Equal(h.rules[0].APIGroups, []string{""}) {
			t.Errorf("%s: rules %+v, want %q only", h.path, h.rules, wantResources)
		}
	}
}

// bindingHook is the validating webhook of Bindings (security row 38).
const bindingHook = "bindings.validate.memifnet.io"

// checkBindingHook: Bindings, both spellings, are sent only when they carry a memifnet.io/
// annotation or a link label, read from the Binding's metadata only: the scheduler's bindings
// (none of them) never reach the webhook nor wait for it.
func checkBindingHook(t *testing.T, conds []admissionregv1.MatchCondition, rules []admissionregv1.RuleWithOperations) {
	t.Helper()
	if len(rules) != 1 || !slices.Equal(rules[0].Resources, []string{"bindings", "pods/binding"}) ||
		!slices.Equal(rules[0].Operations, []admissionregv1.OperationType{admissionregv1.Create}) || !slices.Equal(rules[0].APIGroups, []string{""}) {
		t.Errorf("%s: rules %+v, want CREATE of bindings and pods/binding", bindingHook, rules)
	}
	want := "object.?metadata.?annotations.orValue({}).exists(k, k.startsWith('memifnet.io/')) || " +
		"object.?metadata.?labels.orValue({}).exists(k, k.startsWith('" + names.LinkLabelPrefix + "'))"
	if len(conds) != 1 || conds[0].Expression != want {
		t.Errorf("%s: matchConditions %+v, want only\n%s", bindingHook, conds, want)
	}
}

// checkWebhookRBAC: least privilege. Reads: list and watch pods, get nodes. Writes: Events, and only its own
// Secret, Lease and configurations by name (create cannot be limited by name). With cert-manager
// (external): no Secret or configuration writes, only reads of them by name.
func checkWebhookRBAC(t *testing.T, objs []any, external bool) {
	t.Helper()
	type rule struct{ group, resource, verbs, names string }
	flatten := func(rs []rbacv1.PolicyRule) []rule {
		var out []rule
		for _, r := range rs {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					out = append(out, rule{g, res, strings.Join(r.Verbs, ","), strings.Join(r.ResourceNames, ",")})
				}
			}
		}
		return out
	}
	cr := find(t, objs, webhookName, func(r *rbacv1.ClusterRole) string { return r.Name })
	wantCluster := []rule{
		{"", "pods", "list,watch", ""}, {"", "nodes", "get", ""}, {"", "events", "create,patch", ""},
		{"admissionregistration.k8s.io", "mutatingwebhookconfigurations", "get,update", webhookName},
		{"admissionregistration.k8s.io", "validatingwebhookconfigurations", "get,update", webhookName},
	}
	if external {
		wantCluster[3].verbs, wantCluster[4].verbs = "get", "get"
	}
	if got := flatten(cr.Rules); !slices.Equal(got, wantCluster) {
		t.Errorf("ClusterRole %s: %+v\nwant %+v", cr.Name, got, wantCluster)
	}
	role := find(t, objs, webhookName, func(r *rbacv1.Role) string { return r.Name })
	wantNS := []rule{
		{"", "secrets", "create", ""}, {"", "secrets", "get,update", webhookSecret},
		{"coordination.k8s.io", "leases", "create", ""}, {"coordination.k8s.io", "leases", "get,update", webhookName},
	}
	if external {
		wantNS = append([]rule{{"", "secrets", "get", webhookSecret}}, wantNS[2:]...)
	}
	if got := flatten(role.Rules); role.Namespace != namespace || !slices.Equal(got, wantNS) {
		t.Errorf("Role %s/%s: %+v\nwant %+v", role.Namespace, role.Name, got, wantNS)
	}
	crb := find(t, objs, webhookName, func(r *rbacv1.ClusterRoleBinding) string { return r.Name })
	rb := find(t, objs, webhookName, func(r *rbacv1.RoleBinding) string { return r.Name })
	for _, b := range []struct {
		ref  rbacv1.RoleRef
		subj []rbacv1.Subject
	}{{crb.RoleRef, crb.Subjects}, {rb.RoleRef, rb.Subjects}} {
		if b.ref.Name != webhookName || len(b.subj) != 1 || b.subj[0].Kind != "ServiceAccount" || b.subj[0].Name != webhookName || b.subj[0].Namespace != namespace {
			t.Errorf("binding %+v %+v: want the webhook's role to its service account only", b.ref, b.subj)
		}
	}
	sa := find(t, objs, webhookName, func(s *corev1.ServiceAccount) string { return s.Name })
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Error("ServiceAccount memifnet-webhook: automountServiceAccountToken must be false")
	}
}
