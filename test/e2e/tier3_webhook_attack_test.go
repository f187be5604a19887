//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/test/e2e/cluster"
)

// t3OtherNS is the namespace of a tenant who wants another namespace's link to fail.
const t3OtherNS = "wh-other"

// blockerPod is a pause pod of namespace t3OtherNS with the given pod (anti-)affinity.
func blockerPod(name, affinity string) string {
	y := strings.Replace(plainPod(name), "metadata:\n  name: "+name, "metadata:\n  name: "+name+"\n  namespace: "+t3OtherNS, 1)
	return strings.Replace(y, "spec:\n", "spec:\n  affinity:\n    "+affinity+"\n", 1)
}

// whBlockers plays issue 18 part 8 (docs/security.md #24) against link, whose first pod runs and
// whose second pod (port second) is not created yet: from another namespace, pods with a pod
// anti-affinity (or affinity) on the link's guessable label `link.memifnet.io/<link> In
// (<second>)` next to the first pod, reaching into namespace default by name or by selector.
// Admitted, the first would keep the second pod off the node where its peer runs: Pending
// forever. Each is refused naming the field, and nothing is created.
func (x *tier3) whBlockers(ctx context.Context, t *testing.T, link, second string) {
	x.kubectl(ctx, t, "create", "namespace", t3OtherNS)
	x.undoWith(t, []string{"delete", "namespace", t3OtherNS, "--ignore-not-found", "--wait=true"})
	key := names.LinkLabelPrefix + link
	sel := fmt.Sprintf("labelSelector: {matchExpressions: [{key: %s, operator: In, values: [%s]}]}", key, second)
	for _, b := range []struct{ name, affinity, field string }{
		{"wh-block-named", "podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: kubernetes.io/hostname, namespaces: [default], " + sel + "}]}",
			`spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaces: names namespace "default", and the term selects the link label ` + key},
		{"wh-block-all", "podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: kubernetes.io/hostname, namespaceSelector: {}, " + sel + "}]}",
			"spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector: selects namespaces by label, and the term selects the link label " + key},
		{"wh-block-preferred", "podAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 100, podAffinityTerm: {topologyKey: kubernetes.io/hostname, namespaceSelector: {}, " + sel + "}}]}",
			"spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.namespaceSelector"},
	} {
		cmd := x.c.KubectlCmd(ctx, "apply", "-f", "-")
		cmd.Stdin = strings.NewReader(blockerPod(b.name, b.affinity))
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), `admission webhook "pods.validate.memifnet.io" denied the request: memifnet: `+b.field) {
			t.Errorf("pod %s/%s (%s): %v, want a refusal naming %q:\n%s", t3OtherNS, b.name, b.affinity, err, b.field, out)
			// Each blocker on its own, and the step goes on (the link's second pod must be able
			// to come up).
			x.cs.CoreV1().Pods(t3OtherNS).Delete(ctx, b.name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
			continue
		}
		if _, err := x.cs.CoreV1().Pods(t3OtherNS).Get(ctx, b.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("refused pod %s/%s exists: %v", t3OtherNS, b.name, err)
		}
		x.logf("webhook: another namespace's link blocker refused: %s", strings.TrimSpace(string(out)))
	}
}

// whStatusPatches plays issue 18 part 6 (docs/security.md #25) on a running link pod: through
// pods/status (which may change labels and annotations) a changed memifnet.io/ports annotation
// and an added link label are refused like any update, naming the field, and the pod keeps its
// own; a status update that changes other metadata still passes.
func (x *tier3) whStatusPatches(ctx context.Context, t *testing.T, name string) {
	before := x.pod(ctx, t, name)
	for _, p := range []struct{ patch, want string }{
		{`{"metadata":{"annotations":{"` + names.PortsAnnotation + `":"east@wh-elsewhere"}}}`, "metadata.annotations[" + names.PortsAnnotation + "]: cannot change"},
		{`{"metadata":{"labels":{"` + names.LinkLabelPrefix + `wh-elsewhere":"east"}}}`, "metadata.labels[" + names.LinkLabelPrefix + "wh-elsewhere]"},
		{`{"metadata":{"labels":{"` + names.LinkLabelPrefix + `wh-link":null}}}`, "metadata.labels[" + names.LinkLabelPrefix + "wh-link]"},
	} {
		_, err := x.cs.CoreV1().Pods("default").Patch(ctx, name, types.MergePatchType, []byte(p.patch), metav1.PatchOptions{}, "status")
		if err == nil || !strings.Contains(err.Error(), `admission webhook "pods.validate.memifnet.io" denied the request: memifnet: `+p.want) {
			t.Errorf("PATCH pods/status %s of %s: %v, want a refusal naming %q", p.patch, name, err, p.want)
			continue
		}
		x.logf("webhook: pods/status refused: %v", err)
	}
	after := x.pod(ctx, t, name)
	if after.Annotations[names.PortsAnnotation] != before.Annotations[names.PortsAnnotation] || fmt.Sprint(after.Labels) != fmt.Sprint(before.Labels) {
		t.Errorf("%s changed: annotation %q labels %v, before %q %v", name, after.Annotations[names.PortsAnnotation], after.Labels,
			before.Annotations[names.PortsAnnotation], before.Labels)
	}
	if _, err := x.cs.CoreV1().Pods("default").Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"wh-status":"ok"}}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("a pods/status update of another label: %v", err)
	}
	x.logf("webhook: pods/status may still change other labels of %s", name)
}

// whBindings plays issue 32 item 7 (docs/security.md #38): the API server copies a Binding's
// annotations into the pod it binds (and its labels with PodTopologyLabelsAdmission), with no pod
// update the webhook would see. A pod no scheduler binds (schedulerName names none) is bound by
// hand with a Binding that carries the annotation, another memifnet.io/ annotation or a link
// label, through pods/binding and through the older bindings resource: each is refused by
// bindings.validate.memifnet.io naming the field, and the pod stays unbound and unannotated. A
// Binding without them (what a scheduler sends) binds it.
func (x *tier3) whBindings(ctx context.Context, t *testing.T) {
	const name = "wh-unbound"
	x.kubectlIn(ctx, t, strings.Replace(plainPod(name), "spec:\n", "spec:\n  schedulerName: wh-nobody\n", 1), "apply", "-f", "-")
	t.Cleanup(func() {
		x.cs.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	})
	binding := func(ann, lab map[string]string) *corev1.Binding {
		return &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: ann, Labels: lab},
			Target: corev1.ObjectReference{Kind: "Node", Name: cluster.NodeName}}
	}
	for _, b := range []struct {
		legacy   bool
		ann, lab map[string]string
		want     string
	}{
		{false, map[string]string{names.PortsAnnotation: "east@wh-link"}, nil, "metadata.annotations[" + names.PortsAnnotation + "]: a Binding (pods/binding) cannot set"},
		{true, map[string]string{names.PortsAnnotation: "east@wh-link"}, nil, "metadata.annotations[" + names.PortsAnnotation + "]: a Binding (pods/binding) cannot set"},
		{false, map[string]string{"memifnet.io/other": "x"}, nil, "metadata.annotations[memifnet.io/other]"},
		{false, nil, map[string]string{names.LinkLabelPrefix + "wh-link": "east"}, "metadata.labels[" + names.LinkLabelPrefix + "wh-link]"},
	} {
		var err error
		if b.legacy {
			err = x.cs.CoreV1().RESTClient().Post().Namespace("default").Resource("bindings").
				Body(binding(b.ann, b.lab)).Do(ctx).Error()
		} else {
			err = x.cs.CoreV1().Pods("default").Bind(ctx, binding(b.ann, b.lab), metav1.CreateOptions{})
		}
		if err == nil || !strings.Contains(err.Error(), `admission webhook "bindings.validate.memifnet.io" denied the request: memifnet: `+b.want) {
			t.Errorf("Binding of %s (legacy bindings resource %v) with annotations %v labels %v: %v, want a refusal naming %q", name, b.legacy, b.ann, b.lab, err, b.want)
			continue
		}
		x.logf("webhook: Binding refused: %v", err)
	}
	p := x.pod(ctx, t, name)
	_, annotated := p.Annotations[names.PortsAnnotation]
	_, other := p.Annotations["memifnet.io/other"]
	_, labelled := p.Labels[names.LinkLabelPrefix+"wh-link"]
	if p.Spec.NodeName != "" || annotated || other || labelled {
		t.Fatalf("%s after the refused Bindings: node %q annotations %v labels %v, want unbound and unannotated", name, p.Spec.NodeName, p.Annotations, p.Labels)
	}
	if err := x.cs.CoreV1().Pods("default").Bind(ctx, binding(map[string]string{"wh.example.com/by": "hand"}, nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a Binding without memifnet's metadata: %v", err)
	}
	if p := x.pod(ctx, t, name); p.Spec.NodeName != cluster.NodeName || p.Annotations["wh.example.com/by"] != "hand" {
		t.Fatalf("%s after a plain Binding: node %q annotations %v", name, p.Spec.NodeName, p.Annotations)
	}
	x.kubectl(ctx, t, "delete", "pod", name, "--wait=true", "--timeout=90s")
	x.logf("webhook: a Binding without memifnet's metadata bound %s to %s", name, cluster.NodeName)
}
