package manifests

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// Where the agent runs: only on the nodes labelled memifnet.io/node=true, exactly one agent
// DaemonSet per such node (the default profile's, or the one its memifnet.io/profile names), none
// elsewhere; each DaemonSet reads its own profile's configuration, requests the hugepages that
// configuration's pools take, and watches itself for an uninstall.
func TestProfiles(t *testing.T) {
	nodes := []struct {
		labels map[string]string
		want   string // the DaemonSet that runs there, "" none
	}{
		{map[string]string{"kubernetes.io/os": "linux"}, ""},
		{map[string]string{"kubernetes.io/os": "linux", "memifnet.io/node": "false"}, ""},
		{map[string]string{"kubernetes.io/os": "linux", "memifnet.io/node": "true"}, "memifnet-node"},
		{map[string]string{"kubernetes.io/os": "linux", "memifnet.io/node": "true", "memifnet.io/profile": "small"}, "memifnet-node-small"},
		{map[string]string{"kubernetes.io/os": "linux", "memifnet.io/profile": "small"}, ""},
		{map[string]string{"kubernetes.io/os": "linux", "memifnet.io/node": "true", "memifnet.io/profile": "nosuch"}, ""},
	}
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			objs := build(t, dir)
			var agents []*appsv1.DaemonSet
			var cm *corev1.ConfigMap
			for _, o := range objs {
				switch v := o.(type) {
				case *appsv1.DaemonSet:
					agents = append(agents, v)
				case *corev1.ConfigMap:
					if v.Name == "memifnet-deviceplugin" {
						cm = v
					}
				}
			}
			if len(agents) != 2 || cm == nil {
				t.Fatalf("%d agent DaemonSets, ConfigMap %v; want the default and the small profile's", len(agents), cm != nil)
			}
			for _, n := range nodes {
				var runs []string
				for _, ds := range agents {
					if schedules(ds.Spec.Template.Spec, n.labels) {
						runs = append(runs, ds.Name)
					}
				}
				if want := n.want; (want == "" && len(runs) != 0) || (want != "" && (len(runs) != 1 || runs[0] != want)) {
					t.Errorf("node labelled %v runs %q, want %q", n.labels, runs, want)
				}
			}
			for _, ds := range agents {
				checkAgentProfile(t, dir, ds, cm)
			}
			nodeReader := false
			for _, o := range objs {
				if r, ok := o.(*rbacv1.ClusterRole); ok && r.Name == "memifnet-node" {
					want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}}
					nodeReader = reflect.DeepEqual(r.Rules, want)
				}
			}
			if !nodeReader {
				t.Error("no ClusterRole memifnet-node granting get nodes and nothing else (the agent tells an unlabelled node by it)")
			}
		})
	}
}

// schedules reports whether a pod of spec may go to a node with these labels (nodeSelector and
// required node affinity).
func schedules(spec corev1.PodSpec, node map[string]string) bool {
	if !labels.SelectorFromSet(spec.NodeSelector).Matches(labels.Set(node)) {
		return false
	}
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		ok := true
		for _, e := range term.MatchExpressions {
			v, has := node[e.Key]
			switch e.Operator {
			case corev1.NodeSelectorOpDoesNotExist:
				ok = ok && !has
			case corev1.NodeSelectorOpExists:
				ok = ok && has
			case corev1.NodeSelectorOpIn:
				ok = ok && has && slices.Contains(e.Values, v)
			default:
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func checkAgentProfile(t *testing.T, dir string, ds *appsv1.DaemonSet, cm *corev1.ConfigMap) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	for _, tol := range spec.Tolerations {
		if tol.Effect != corev1.TaintEffectNoSchedule {
			t.Errorf("%s tolerates %+v: only NoSchedule taints (a labelled control-plane or dedicated node); NoExecute means leave", ds.Name, tol)
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("%s: selector %v does not select its own pods (%v)", ds.Name, err, ds.Spec.Template.Labels)
	}
	dp := container(t, spec.Containers, "deviceplugin")
	env := map[string]string{}
	for _, e := range dp.Env {
		env[e.Name] = e.Value
	}
	if v, _ := flagValue(dp.Args, "daemonset"); v != "$(POD_NAMESPACE)/$(MEMIFNET_DAEMONSET)" || env["MEMIFNET_DAEMONSET"] != ds.Name {
		t.Errorf("%s watches --daemonset=%s with MEMIFNET_DAEMONSET=%q: not itself", ds.Name, v, env["MEMIFNET_DAEMONSET"])
	}
	var nodeName string
	for _, e := range dp.Env {
		if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			nodeName = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if nodeName != "spec.nodeName" {
		t.Errorf("%s: NODE_NAME from %q, want spec.nodeName (the agent checks its node at a stop)", ds.Name, nodeName)
	}
	key := env["MEMIFNET_CONFIG"]
	if v, _ := flagValue(dp.Args, "config"); v != "/etc/memifnet/$(MEMIFNET_CONFIG)" || cm.Data[key] == "" {
		t.Fatalf("%s: --config=%s, MEMIFNET_CONFIG=%q, which the ConfigMap does not hold", ds.Name, v, key)
	}
	var cfg dpConfig
	if err := yaml.UnmarshalStrict([]byte(cm.Data[key]), &cfg); err != nil {
		t.Fatalf("%s: %s: %v", ds.Name, key, err)
	}
	want := map[string]int64{}
	for _, p := range cfg.Pools {
		u := resource.MustParse(p.UnitSize)
		want[p.PageSize] += u.Value() * p.UnitsPerNUMANode
	}
	if cfg.DRA.Enabled {
		for _, p := range cfg.DRA.Pools {
			u := resource.MustParse(p.UnitSize)
			want[p.PageSize] += u.Value() * p.UnitsPerNUMANode
		}
	}
	for size, bytes := range want {
		rn := corev1.ResourceName("hugepages-" + size)
		req, lim := dp.Resources.Requests[rn], dp.Resources.Limits[rn]
		if req.Value() != bytes || lim.Value() != bytes {
			t.Errorf("%s (%s, %s): hugepages-%s request %s limit %s, want %d bytes", dir, ds.Name, key, size, req.String(), lim.String(), bytes)
		}
	}
	checkDRAProfile(t, dir, ds, key, cfg.DRA.Enabled)
	if strings.HasSuffix(ds.Name, "-small") && len(cfg.Pools) == 0 {
		t.Errorf("%s: the small profile has no pool", ds.Name)
	}
}

// checkDRAProfile: under the DRA overlay every profile runs the DRA driver, not only the default
// (a link claim may land on any memifnet node), with the kubelet's plugin dirs and the CDI dir
// mounted; elsewhere no profile enables it.
func checkDRAProfile(t *testing.T, dir string, ds *appsv1.DaemonSet, key string, enabled bool) {
	t.Helper()
	if want := dir == "overlays/dra"; enabled != want {
		t.Errorf("%s: %s (%s) has dra.enabled %v, want %v", dir, ds.Name, key, enabled, want)
	}
	if !enabled {
		return
	}
	mounted := map[string]bool{}
	for _, m := range container(t, ds.Spec.Template.Spec.Containers, "deviceplugin").VolumeMounts {
		mounted[m.MountPath] = true
	}
	for _, p := range []string{"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins", "/var/run/cdi"} {
		if !mounted[p] {
			t.Errorf("%s: %s runs the DRA driver without %s mounted", dir, ds.Name, p)
		}
	}
}
