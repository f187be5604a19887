//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// The admission webhook as manifests/base installs it (docs/webhook.md).
const (
	t3Webhook     = "memifnet-webhook"
	t3WebhookDep  = "deploy/" + t3Webhook
	t3FakeNode    = "memifnet-fake"
	t3PauseImage  = "localhost/memifnet/pause:dev" // hack/e2e.mk PAUSE_IMAGE
	t3NodeLeaseNS = "kube-node-lease"
)

// webhookReady waits until the webhook's replicas are rolled out and the API server gets its
// answers: a server-side dry run of an annotated pod comes back mutated (CA bundle injected,
// endpoints ready, configuration seen by the API server).
func (x *tier3) webhookReady(ctx context.Context, t *testing.T) {
	t.Helper()
	x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", t3WebhookDep, "--timeout=3m")
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "memifnet-webhook-probe", Annotations: map[string]string{names.PortsAnnotation: "p@probe"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: cluster.Image}}},
	}
	var last error
	if err := node.Poll(ctx, 90*time.Second, "the API server calls the webhook", func() (bool, error) {
		got, err := x.cs.CoreV1().Pods("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err
			return false, nil
		}
		q := got.Spec.Containers[0].Resources.Limits[names.SocketResource]
		return q.Value() == 1 && got.Labels[names.LinkLabelPrefix+"probe"] == "p", nil
	}); err != nil {
		t.Fatalf("%v (last error: %v)", err, last)
	}
}

// annotationOnlyPod is a memif-perf pod that says nothing about memifnet but its annotation:
// the webhook adds the slots, the label and the affinity (and no pool unit: a zero-copy port's
// pool is the pod's own memory).
func annotationOnlyPod(name, port, annotation string, args ...string) string {
	return annotationOnly(perfPod(name, port, "placeholder", args...), port, annotation)
}

// plainPod runs the pause program: no annotation, nothing of memifnet.
func plainPod(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {app: plain}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
    - name: pause
      image: %s
      imagePullPolicy: Never
      securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: ["ALL"]}}
      resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {memory: 16Mi}}
`, name, t3PauseImage)
}

// refused applies a pod that must be refused and checks the message and that nothing was made.
func (x *tier3) refused(ctx context.Context, t *testing.T, name, pod, want string) string {
	t.Helper()
	cmd := x.c.KubectlCmd(ctx, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(pod)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("kubectl apply of %s: %v, want a refusal containing %q:\n%s", name, err, want, out)
	}
	if _, err := x.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("refused pod %s exists: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

func (x *tier3) pod(ctx context.Context, t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, err := x.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// bound waits for the scheduler to bind a pod and returns its node.
func (x *tier3) bound(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	var nodeName string
	if err := node.Poll(ctx, 60*time.Second, name+" scheduled", func() (bool, error) {
		p, err := x.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		nodeName = p.Spec.NodeName
		return nodeName != "", nil
	}); err != nil {
		t.Fatal(err)
	}
	return nodeName
}

func (x *tier3) running(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if err := node.Poll(ctx, 90*time.Second, name+" running", func() (bool, error) {
		p, err := x.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	}); err != nil {
		t.Fatal(err)
	}
}

// forceDelete removes pods at once (those on the fake node have no kubelet to confirm).
func (x *tier3) forceDelete(ctx context.Context, t *testing.T, pods ...string) {
	t.Helper()
	zero := int64(0)
	for _, p := range pods {
		if err := x.cs.CoreV1().Pods("default").Delete(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}

// webhook: the admission webhook installed with manifests/base: annotation-only pods get their
// slots, label and affinity and pass verified traffic; bad annotations, contradicting limits and
// forged link labels are refused at kubectl apply naming the field; pods without the annotation
// are not touched, and still start while the webhook is scaled to 0 (annotated pods are then
// refused: failurePolicy Fail). On a second, kubelet-less Node object: the second pod of a link
// follows the first to it; a pod joining a link whose node is full gets an Event saying so; a
// pod whose links sit on two nodes is refused; and without the webhook the pods of a link land
// apart and the link never comes up.
func (x *tier3) webhook(ctx context.Context, t *testing.T) {
	x.webhookRBAC(ctx, t)
	// Annotation-only pods. Between the link's first pod and its second, another namespace tries
	// to keep the second off the first one's node (tier3_webhook_attack_test.go).
	x.kubectlIn(ctx, t, annotationOnlyPod("wh-rx", "east", `east@wh-link`, "--mode=rx", "--verify", "--size=1500", "--duration=8s", "--connect-timeout=2m"),
		"apply", "-f", "-")
	x.whBlockers(ctx, t, "wh-link", "west")
	// wh-tx is the link's client in zero-copy mode: it gets its slot and no pool unit, and its
	// buffer pool (a sealed memfd of its own memory) carries the verified traffic.
	x.kubectlIn(ctx, t, annotationOnlyPod("wh-tx", "west", `[{"name":"west","link":"wh-link","role":"client","zeroCopy":true}]`, "--mode=tx", "--verify", "--size=1500", "--duration=5s", "--connect-timeout=2m"),
		"apply", "-f", "-")
	for name, port := range map[string]string{"wh-rx": "east", "wh-tx": "west"} {
		p := x.pod(ctx, t, name)
		c := p.Spec.Containers[0]
		lim, req := c.Resources.Limits[names.SocketResource], c.Resources.Requests[names.SocketResource]
		if lim.Value() != 1 || req.Value() != 1 || p.Labels[names.LinkLabelPrefix+"wh-link"] != port {
			t.Fatalf("%s: limits %v requests %v labels %v: want 1 slot and the link label", name, c.Resources.Limits, c.Resources.Requests, p.Labels)
		}
		for _, l := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
			for rn := range l {
				if strings.HasPrefix(string(rn), names.ResourcePrefix) && rn != names.SocketResource {
					t.Fatalf("%s: limits %v requests %v: the webhook added %s; a zero-copy port takes no pool unit", name, c.Resources.Limits, c.Resources.Requests, rn)
				}
			}
		}
		var terms []corev1.PodAffinityTerm
		if p.Spec.Affinity != nil && p.Spec.Affinity.PodAffinity != nil {
			terms = p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
		if len(terms) != 1 || terms[0].TopologyKey != "kubernetes.io/hostname" || terms[0].LabelSelector.MatchExpressions[0].Key != names.LinkLabelPrefix+"wh-link" {
			t.Fatalf("%s: pod affinity %+v", name, terms)
		}
	}
	x.logf("webhook: annotation-only pods wh-rx, wh-tx (zero-copy client) got memifnet.io/socket: 1 and no pool unit, label %swh-link and a required pod affinity on kubernetes.io/hostname", names.LinkLabelPrefix)
	x.whStatusPatches(ctx, t, "wh-rx")
	x.whBindings(ctx, t)

	// Refusals, each naming the field, at kubectl apply.
	for _, r := range []struct{ name, pod, want string }{
		{"wh-bad-ring", annotationOnlyPod("wh-bad-ring", "east", `[{"name":"east","link":"l","ringSize":1000}]`),
			`metadata.annotations[memifnet.io/ports]: port 0 (east): field "ringSize": 1000 must be a power of two`},
		{"wh-bad-limits", strings.Replace(perfPod("wh-bad-limits", "east", "l"), `'[{"name":"east","link":"l"}]'`, `'east@l,west@m'`, 1),
			"spec.containers[*].resources.limits[memifnet.io/socket]: 1 in all, but annotation memifnet.io/ports asks for 2 port(s)"},
		{"wh-forged", strings.Replace(plainPod("wh-forged"), "labels: {app: plain}", "labels: {app: plain, link.memifnet.io/wh-link: east}", 1),
			"metadata.labels[link.memifnet.io/wh-link]: names a link that annotation memifnet.io/ports does not"},
	} {
		x.logf("webhook: refused: %s", x.refused(ctx, t, r.name, r.pod, r.want))
	}

	// A pod without the annotation is not touched.
	x.kubectlIn(ctx, t, plainPod("wh-plain"), "apply", "-f", "-")
	p := x.pod(ctx, t, "wh-plain")
	if p.Spec.Affinity != nil || len(p.Labels) != 1 || len(p.Spec.Containers[0].Resources.Limits) != 1 {
		t.Fatalf("wh-plain was changed: labels %v affinity %+v limits %v", p.Labels, p.Spec.Affinity, p.Spec.Containers[0].Resources.Limits)
	}
	x.podSucceeded(ctx, t, "default", "wh-tx", 3*time.Minute)
	x.podSucceeded(ctx, t, "default", "wh-rx", 3*time.Minute)
	x.verified(ctx, t, "default", "wh-rx")
	// Zero-copy on the wire: the server mapped the client's pool as region 1 of 2.
	for _, name := range []string{"wh-rx", "wh-tx"} {
		if log := x.logs(ctx, "default", name); !strings.Contains(log, "ring 1024, 2 region(s)") {
			t.Fatalf("%s: want the link up with the zero-copy client's 2 regions; kubectl logs:\n%s", name, log)
		}
	}
	x.logf("webhook: wh-tx sent zero-copy (2 regions on both ends) without a pool unit; wh-rx verified it")
	x.running(ctx, t, "wh-plain")
	x.kubectl(ctx, t, "delete", "pod", "wh-rx", "wh-tx", "wh-plain", "--wait=true")

	// Scaled to 0: unrelated pods still start; annotated ones are refused; the kubelet's status
	// updates of an annotated pod (pods/status, which the webhook is not sent) still go through:
	// the pod, deleted, goes away.
	statusPod := strings.Replace(plainPod("wh-status-down"), "labels: {app: plain}",
		"labels: {app: plain}\n  annotations: {"+names.PortsAnnotation+": 'p'}", 1)
	x.kubectlIn(ctx, t, statusPod, "apply", "-f", "-")
	x.running(ctx, t, "wh-status-down")
	x.kubectl(ctx, t, "-n", t3Namespace, "scale", t3WebhookDep, "--replicas=0")
	if err := node.Poll(ctx, 60*time.Second, "no webhook pods", func() (bool, error) {
		pods, err := x.cs.CoreV1().Pods(t3Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + t3Webhook})
		return err == nil && len(pods.Items) == 0, err
	}); err != nil {
		t.Fatal(err)
	}
	x.kubectlIn(ctx, t, plainPod("wh-plain-down"), "apply", "-f", "-")
	x.running(ctx, t, "wh-plain-down")
	msg := x.refused(ctx, t, "wh-down", annotationOnlyPod("wh-down", "east", "east@l"), `failed calling webhook "pods.mutate.memifnet.io"`)
	x.logf("webhook: scaled to 0: wh-plain-down runs (the scheduler's Binding is not sent to the webhook); an annotated pod is refused: %s", msg)
	x.kubectl(ctx, t, "delete", "pod", "wh-plain-down", "wh-status-down", "--wait=true", "--timeout=90s")
	x.logf("webhook: scaled to 0: the annotated pod wh-status-down was deleted (the kubelet's status updates do not wait for the webhook)")
	x.kubectl(ctx, t, "-n", t3Namespace, "scale", t3WebhookDep, "--replicas=2")
	x.webhookReady(ctx, t)
	x.logf("webhook: scaled back to 2 and answering")

	x.fakeNode(ctx, t)
	x.noLeftovers(ctx, t, "after the webhook pods")
}

// fakeNode: a second Node object with no kubelet behind it (kept Ready by renewing its Lease):
// the scheduler can bind pods to it, which then never start.
func (x *tier3) fakeNode(ctx context.Context, t *testing.T) {
	setSlots := func(n int64) {
		t.Helper()
		// The node lifecycle controller writes the Node too (taints): retry on a conflict.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			nd, err := x.cs.CoreV1().Nodes().Get(ctx, t3FakeNode, metav1.GetOptions{})
			if err != nil {
				return err
			}
			alloc := corev1.ResourceList{
				names.SocketResource: *resource.NewQuantity(n, resource.DecimalSI),
				"cpu":                resource.MustParse("8"), "memory": resource.MustParse("16Gi"), "pods": resource.MustParse("110"),
			}
			nd.Status.Capacity, nd.Status.Allocatable = alloc, alloc
			now := metav1.Now()
			nd.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "no kubelet: a Node object of the e2e", LastHeartbeatTime: now, LastTransitionTime: now}}
			_, err = x.cs.CoreV1().Nodes().UpdateStatus(ctx, nd, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// No kubernetes.io/os label: the DaemonSet and the webhook (nodeSelector linux) stay off it.
	if _, err := x.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: t3FakeNode,
		Labels: map[string]string{"kubernetes.io/hostname": t3FakeNode}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lctx, stopLease := context.WithCancel(ctx)
	leaseDone := make(chan struct{})
	t.Cleanup(func() {
		stopLease()
		<-leaseDone
		zero := int64(0)
		pods, _ := x.cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + t3FakeNode})
		for _, p := range pods.Items {
			x.cs.CoreV1().Pods("default").Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
		x.cs.CoordinationV1().Leases(t3NodeLeaseNS).Delete(context.Background(), t3FakeNode, metav1.DeleteOptions{})
		if err := x.cs.CoreV1().Nodes().Delete(context.Background(), t3FakeNode, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting node %s: %v", t3FakeNode, err)
		}
	})
	go func() {
		// The node lifecycle controller takes a Node whose Lease is not renewed for unreachable.
		defer close(leaseDone)
		holder, secs := t3FakeNode, int32(40)
		for {
			now := metav1.NewMicroTime(time.Now())
			l, err := x.cs.CoordinationV1().Leases(t3NodeLeaseNS).Get(lctx, t3FakeNode, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				x.cs.CoordinationV1().Leases(t3NodeLeaseNS).Create(lctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: t3FakeNode},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &now}}, metav1.CreateOptions{})
			} else if err == nil {
				l.Spec.RenewTime = &now
				x.cs.CoordinationV1().Leases(t3NodeLeaseNS).Update(lctx, l, metav1.UpdateOptions{})
			}
			select {
			case <-lctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
		}
	}()
	setSlots(2)
	onFake := "nodeSelector: {kubernetes.io/hostname: " + t3FakeNode + "}\n  restartPolicy: Never"
	pinned := func(y string) string { return strings.Replace(y, "restartPolicy: Never", onFake, 1) }

	// The second pod of a link follows the first.
	x.kubectlIn(ctx, t, pinned(annotationOnlyPod("wh-follow-a", "east", "east@wh-follow", "--mode=rx")), "apply", "-f", "-")
	if n := x.bound(ctx, t, "wh-follow-a"); n != t3FakeNode {
		t.Fatalf("wh-follow-a bound to %s, its nodeSelector says %s", n, t3FakeNode)
	}
	x.kubectlIn(ctx, t, annotationOnlyPod("wh-follow-b", "west", "west@wh-follow", "--mode=tx"), "apply", "-f", "-")
	if n := x.bound(ctx, t, "wh-follow-b"); n != t3FakeNode {
		t.Fatalf("wh-follow-b bound to %s: it did not follow wh-follow-a to %s", n, t3FakeNode)
	}
	x.logf("webhook: wh-follow-b (no nodeSelector) followed wh-follow-a to node %s", t3FakeNode)

	// A pod joining the link while that node is full: Pending, with an Event that says why.
	x.kubectlIn(ctx, t, annotationOnlyPod("wh-follow-c", "third", "third@wh-follow", "--mode=rx"), "apply", "-f", "-")
	want := "link wh-follow: peer pod default/wh-follow-a runs on node " + t3FakeNode + ", which has 0 free memifnet.io/socket (2 allocatable, 2 in use)"
	var evs []string
	if err := node.Poll(ctx, 60*time.Second, "an Event explaining wh-follow-c", func() (bool, error) {
		list, err := x.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=wh-follow-c"})
		if err != nil {
			return false, err
		}
		evs = evs[:0]
		for _, e := range list.Items {
			evs = append(evs, e.Reason+": "+e.Message)
			if e.Reason == "LinkPeerNodeFull" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, want) {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("%v: events %q", err, evs)
	}
	if p := x.pod(ctx, t, "wh-follow-c"); p.Spec.NodeName != "" {
		t.Fatalf("wh-follow-c was bound to %s", p.Spec.NodeName)
	}
	x.logf("webhook: wh-follow-c stays Pending; Event: %s", evs[len(evs)-1])
	x.forceDelete(ctx, t, "wh-follow-c")

	// Links on two nodes: refused.
	x.kubectlIn(ctx, t, strings.Replace(annotationOnlyPod("wh-here", "east", "east@wh-here", "--mode=rx", "--duration=1s", "--connect-timeout=1m"),
		"restartPolicy: Never", "nodeSelector: {kubernetes.io/hostname: \""+cluster.NodeName+"\"}\n  restartPolicy: Never", 1), "apply", "-f", "-")
	x.bound(ctx, t, "wh-here")
	msg := x.refused(ctx, t, "wh-both", annotationOnlyPod("wh-both", "a", "a@wh-follow,b@wh-here"),
		"link wh-follow's pod default/wh-follow-a runs on node "+t3FakeNode+" and link wh-here's pod default/wh-here on node "+cluster.NodeName)
	x.logf("webhook: refused: %s", msg)
	x.kubectl(ctx, t, "delete", "pod", "wh-here", "--wait=true")

	// Without the webhook: the link's pods land apart and the link never comes up.
	x.kubectl(ctx, t, "delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration", t3Webhook)
	x.forceDelete(ctx, t, "wh-follow-b")
	setSlots(1) // wh-follow-a holds the fake node's one slot
	if err := node.Poll(ctx, 30*time.Second, "the API server no longer calls the webhook", func() (bool, error) {
		got, err := x.cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "wh-probe-off",
			Annotations: map[string]string{names.PortsAnnotation: "p@probe"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: cluster.Image}}}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Labels[names.LinkLabelPrefix+"probe"] == "", nil
	}); err != nil {
		t.Fatal(err)
	}
	x.kubectlIn(ctx, t, perfPod("wh-apart", "west", "wh-follow", "--mode=tx", "--connect-timeout=5s"), "apply", "-f", "-")
	if p := x.pod(ctx, t, "wh-apart"); p.Spec.Affinity != nil || p.Labels[names.LinkLabelPrefix+"wh-follow"] != "" {
		t.Fatalf("without the webhook wh-apart got affinity %+v labels %v", p.Spec.Affinity, p.Labels)
	}
	if n := x.bound(ctx, t, "wh-apart"); n == t3FakeNode {
		t.Fatalf("wh-apart bound to %s, which has no free slot", n)
	}
	var phase corev1.PodPhase
	if err := node.Poll(ctx, 2*time.Minute, "wh-apart ended", func() (bool, error) {
		p, err := x.cs.CoreV1().Pods("default").Get(ctx, "wh-apart", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	}); err != nil || phase != corev1.PodFailed {
		t.Fatalf("wh-apart: %v, phase %s; want it Failed: its link's other pod is on another node", err, phase)
	}
	log := x.logs(ctx, "default", "wh-apart")
	if sum, ok := node.Summary(log); !ok || sum["tx_pkts"] != 0 {
		t.Fatalf("wh-apart: want a run that sent nothing; kubectl logs:\n%s", log)
	}
	why := lastLine(log)
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(strings.ToLower(l), "timeout") || strings.Contains(strings.ToLower(l), "timed out") {
			why = strings.TrimSpace(l)
		}
	}
	x.logf("webhook: without the webhook wh-apart landed on %s, apart from wh-follow-a (%s, never started), sent nothing and failed: %s",
		cluster.NodeName, t3FakeNode, why)
	x.kubectl(ctx, t, "delete", "pod", "wh-apart", "--wait=true")
	x.forceDelete(ctx, t, "wh-follow-a")

	// Back: re-applying the manifests re-creates the configurations; the webhook injects its CA.
	x.kubectl(ctx, t, "apply", "-k", "manifests/")
	x.webhookReady(ctx, t)
	x.logf("webhook: configurations re-created by kubectl apply -k manifests/; the webhook answers again")
}

// webhookRBAC: `kubectl auth can-i --list` for the webhook's service account, in its namespace,
// holds exactly docs/webhook.md's rules beyond what every service account may.
func (x *tier3) webhookRBAC(ctx context.Context, t *testing.T) {
	extra, ok := x.mayOnly(ctx, t, t3Namespace, t3Webhook, []string{
		"events [] [] [create patch]",
		"leases.coordination.k8s.io [] [] [create]",
		"leases.coordination.k8s.io [] [memifnet-webhook] [get update]",
		"mutatingwebhookconfigurations.admissionregistration.k8s.io [] [memifnet-webhook] [get update]",
		"nodes [] [] [get]",
		"pods [] [] [list watch]",
		"secrets [] [] [create]",
		"secrets [] [memifnet-webhook-tls] [get update]",
		"validatingwebhookconfigurations.admissionregistration.k8s.io [] [memifnet-webhook] [get update]",
	})
	if !ok {
		t.FailNow()
	}
	x.logf("webhook: memifnet-system/memifnet-webhook may %q besides self-reviews and discovery", extra)
}
