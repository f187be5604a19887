package owner

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// A DaemonSet that is still there also takes its pod off a node that no longer matches its
// node selector or required node affinity: the operator took the node's memifnet.io/node label
// away (or moved it to another profile's DaemonSet). That is an uninstall from this node: the
// agent cleans it as it stops, as at `kubectl delete -k`. Every other deletion of the pod while
// the DaemonSet stays (a rollout, `kubectl delete pod`, an eviction) finds the node still
// matching and is a restart. A node that cannot be read (no RBAC for it, the API server away)
// keeps the node as a restart does.

// nodeLeft reads the agent's node and reports whether ds no longer selects it, and why.
func (w *Watcher) nodeLeft(ctx context.Context, ds *appsv1.DaemonSet) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	n, err := w.client.CoreV1().Nodes().Get(ctx, w.node, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Sprintf("node %s not read (%v): keeping the node's slots and pools as on a restart", w.node, err)
	}
	if ok, why := Selects(ds.Spec.Template.Spec, n.Labels); !ok {
		return true, fmt.Sprintf("node %s no longer selected by the DaemonSet (%s): memifnet leaves this node", w.node, why)
	}
	return false, ""
}

// Selects reports whether a pod of spec may run on a node with these labels as far as labels
// decide (nodeSelector and the required node affinity's label expressions; matchFields, which
// name the node itself, are left to the scheduler), and if not, why.
func Selects(spec corev1.PodSpec, node map[string]string) (bool, string) {
	set := labels.Set(node)
	for k, v := range spec.NodeSelector {
		if got, ok := node[k]; !ok || got != v {
			return false, fmt.Sprintf("nodeSelector %s=%s", k, v)
		}
	}
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true, ""
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for _, term := range terms {
		sel, err := termSelector(term)
		if err == nil && sel.Matches(set) {
			return true, ""
		}
	}
	return false, "required node affinity"
}

// termSelector is a node selector term's label expressions as a label selector (ANDed).
func termSelector(term corev1.NodeSelectorTerm) (labels.Selector, error) {
	ops := map[corev1.NodeSelectorOperator]selection.Operator{
		corev1.NodeSelectorOpIn: selection.In, corev1.NodeSelectorOpNotIn: selection.NotIn,
		corev1.NodeSelectorOpExists: selection.Exists, corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
		corev1.NodeSelectorOpGt: selection.GreaterThan, corev1.NodeSelectorOpLt: selection.LessThan,
	}
	sel := labels.NewSelector()
	for _, e := range term.MatchExpressions {
		op, ok := ops[e.Operator]
		if !ok {
			return nil, fmt.Errorf("operator %q", e.Operator)
		}
		r, err := labels.NewRequirement(e.Key, op, e.Values)
		if err != nil {
			return nil, err
		}
		sel = sel.Add(*r)
	}
	return sel, nil
}
