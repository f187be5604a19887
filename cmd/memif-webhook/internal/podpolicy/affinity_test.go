package podpolicy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// blocker is the pod of issue 18 part 8: in namespace "other", a required anti-affinity on the
// link label of a link in namespace "ns", next to the link's first pod.
func blocker(term corev1.PodAffinityTerm) *corev1.Pod {
	p := pod("", nil)
	p.Namespace = "other"
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
	return p
}

func linkExpr(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func TestCheckAffinityRefusesCrossNamespaceLinkTerms(t *testing.T) {
	const host = "kubernetes.io/hostname"
	inNS := linkExpr("link.memifnet.io/l", metav1.LabelSelectorOpIn, "west")
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"anti-affinity, namespaces": {blocker(corev1.PodAffinityTerm{LabelSelector: inNS, Namespaces: []string{"ns"}, TopologyKey: host}),
			`spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaces: names namespace "ns", and the term selects the link label link.memifnet.io/l`},
		"anti-affinity, every namespace": {blocker(corev1.PodAffinityTerm{LabelSelector: inNS, NamespaceSelector: &metav1.LabelSelector{}, TopologyKey: host}),
			"requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector: selects namespaces by label"},
		"matchLabels": {blocker(corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x", "link.memifnet.io/l": "west"}},
			Namespaces: []string{"other", "ns"}, TopologyKey: host}), `names namespace "ns"`},
		"Exists": {blocker(corev1.PodAffinityTerm{LabelSelector: linkExpr("link.memifnet.io/l", metav1.LabelSelectorOpExists),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "ns"}}, TopologyKey: host}), "link.memifnet.io/l"},
		"mismatchLabelKeys": {blocker(corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{}, MismatchLabelKeys: []string{"link.memifnet.io/l"},
			Namespaces: []string{"ns"}, TopologyKey: host}), "link.memifnet.io/l"},
	} {
		if err := CheckAffinity(tc.pod, "other"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
		// Validate (the validating webhook's CREATE check) refuses it too.
		if err := Validate(tc.pod); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}

	// Preferred terms and pod affinity too.
	pref := pod("", nil)
	pref.Namespace = "other"
	pref.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
		{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{}, TopologyKey: host}},
		{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: inNS, NamespaceSelector: &metav1.LabelSelector{}, TopologyKey: host}},
	}}}
	if err := CheckAffinity(pref, "other"); err == nil || !strings.Contains(err.Error(), "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[1].podAffinityTerm.namespaceSelector") {
		t.Errorf("preferred: %v", err)
	}
}

func TestCheckAffinityAllows(t *testing.T) {
	const host = "kubernetes.io/hostname"
	for name, term := range map[string]corev1.PodAffinityTerm{
		// A link's own term (the webhook's), and any link term confined to the pod's namespace.
		"own namespace":          AffinityTerm("l"),
		"own namespace, by name": {LabelSelector: linkExpr("link.memifnet.io/l", metav1.LabelSelectorOpIn, "west"), Namespaces: []string{"other"}, TopologyKey: host},
		// Cross-namespace terms on other labels are Kubernetes's business (docs/security.md).
		"other label, every namespace": {LabelSelector: linkExpr("app", metav1.LabelSelectorOpIn, "x"), NamespaceSelector: &metav1.LabelSelector{}, TopologyKey: host},
	} {
		if err := CheckAffinity(blocker(term), "other"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := CheckAffinity(pod("", nil), "ns"); err != nil {
		t.Error(err)
	}
}
