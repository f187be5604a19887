package owner

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// agentDaemonSet selects nodes as manifests/base/node/daemonset.yaml does (the default profile:
// labelled, without a profile label).
func agentDaemonSet() *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "memifnet-system", Name: "memifnet-node", UID: "u1"}}
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux", "memifnet.io/node": "true"}
	ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "memifnet.io/profile", Operator: corev1.NodeSelectorOpDoesNotExist}},
		}}},
	}}
	return ds
}

// At SIGTERM with the DaemonSet still there, the agent's node decides: still selected (a
// rollout, kubectl delete pod) is a restart; the memifnet.io/node label taken away, or a profile
// label that moves the node to another profile's DaemonSet, is memifnet leaving the node; a node
// that cannot be read keeps the node.
func TestNodeLeavesWhenUnlabelled(t *testing.T) {
	linux := map[string]string{"kubernetes.io/os": "linux"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range linux {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		name      string
		labels    map[string]string
		forbidden bool
		uninstall bool
	}{
		{"labelled", with(map[string]string{"memifnet.io/node": "true"}), false, false},
		{"label taken away", linux, false, true},
		{"label set false", with(map[string]string{"memifnet.io/node": "false"}), false, true},
		{"moved to a profile", with(map[string]string{"memifnet.io/node": "true", "memifnet.io/profile": "small"}), false, true},
		{"node not readable", linux, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: c.labels}}
			client := fake.NewClientset(agentDaemonSet(), n)
			if c.forbidden {
				client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New(`nodes "n1" is forbidden`)
				})
			}
			w := Start(ctx, client, "memifnet-system", "memifnet-node", "n1", slog.Default())
			waitUntil(t, "the first GET of the DaemonSet", func() bool { return w.ownUID() != "" })
			if gone, why := w.Uninstalling(ctx); gone != c.uninstall {
				t.Errorf("uninstall %v (%s), want %v", gone, why, c.uninstall)
			}
		})
	}
}

// Selects follows the scheduler on labels: nodeSelector, and any one term of the required node
// affinity with all of its expressions.
func TestSelects(t *testing.T) {
	spec := agentDaemonSet().Spec.Template.Spec
	spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(
		spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms,
		corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "memifnet.io/profile", Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}},
			{Key: "cpus", Operator: corev1.NodeSelectorOpGt, Values: []string{"8"}},
		}})
	for labels, want := range map[string]bool{
		"kubernetes.io/os=linux,memifnet.io/node=true":                                       true,
		"kubernetes.io/os=linux":                                                             false,
		"kubernetes.io/os=linux,memifnet.io/node=true,memifnet.io/profile=small":             false,
		"kubernetes.io/os=linux,memifnet.io/node=true,memifnet.io/profile=default,cpus=16":   true,
		"kubernetes.io/os=linux,memifnet.io/node=true,memifnet.io/profile=default,cpus=4":    false,
		"kubernetes.io/os=windows,memifnet.io/node=true,memifnet.io/profile=default,cpus=16": false,
	} {
		m := map[string]string{}
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		if got, why := Selects(spec, m); got != want {
			t.Errorf("%s: selected %v (%s), want %v", labels, got, why, want)
		}
	}
}
