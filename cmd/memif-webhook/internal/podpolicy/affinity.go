package podpolicy

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/memifnet/memifnet/internal/names"
)

// CheckAffinity refuses a pod whose pod affinity or anti-affinity terms (required or preferred)
// select a link label (a key under names.LinkLabelPrefix) in namespaces other than the pod's
// own. A link's second pod has a required affinity to the node of the first; a pod of another
// namespace with a required anti-affinity on `link.memifnet.io/<link>` next to the first pod
// would keep the second Pending forever (anti-affinity is symmetric: the scheduler keeps every
// pod it matches off the node). Within its own namespace a pod may name link labels: whoever
// may create pods there shares the namespace's links already. ns is the namespace the pod is
// created in.
func CheckAffinity(pod *corev1.Pod, ns string) error {
	a := pod.Spec.Affinity
	if a == nil {
		return nil
	}
	type group struct {
		path      string
		required  []corev1.PodAffinityTerm
		preferred []corev1.WeightedPodAffinityTerm
	}
	var groups []group
	if pa := a.PodAffinity; pa != nil {
		groups = append(groups, group{"spec.affinity.podAffinity", pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution})
	}
	if pa := a.PodAntiAffinity; pa != nil {
		groups = append(groups, group{"spec.affinity.podAntiAffinity", pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution})
	}
	for _, g := range groups {
		for i, t := range g.required {
			if err := checkTerm(fmt.Sprintf("%s.requiredDuringSchedulingIgnoredDuringExecution[%d]", g.path, i), t, ns); err != nil {
				return err
			}
		}
		for i, w := range g.preferred {
			if err := checkTerm(fmt.Sprintf("%s.preferredDuringSchedulingIgnoredDuringExecution[%d].podAffinityTerm", g.path, i), w.PodAffinityTerm, ns); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkTerm refuses a term that names a link label and reaches beyond namespace ns.
func checkTerm(path string, t corev1.PodAffinityTerm, ns string) error {
	key := linkKey(t)
	if key == "" {
		return nil
	}
	var where string
	switch {
	case t.NamespaceSelector != nil:
		where = path + ".namespaceSelector: selects namespaces by label"
	default:
		for _, n := range t.Namespaces {
			if n != ns {
				where = fmt.Sprintf("%s.namespaces: names namespace %q", path, n)
				break
			}
		}
	}
	if where == "" {
		return nil
	}
	return refuse("%s, and the term selects the link label %s: a pod may select %s labels only in its own namespace (%s), or it could keep another namespace's link pods off their node",
		where, key, names.LinkLabelPrefix, ns)
}

// linkKey is the first link label key a term selects on (label selector, matchLabelKeys or
// mismatchLabelKeys), or "".
func linkKey(t corev1.PodAffinityTerm) string {
	var keys []string
	if s := t.LabelSelector; s != nil {
		for k := range s.MatchLabels {
			keys = append(keys, k)
		}
		for _, e := range s.MatchExpressions {
			keys = append(keys, e.Key)
		}
	}
	keys = append(keys, t.MatchLabelKeys...)
	keys = append(keys, t.MismatchLabelKeys...)
	first := ""
	for _, k := range keys {
		if strings.HasPrefix(k, names.LinkLabelPrefix) && (first == "" || k < first) {
			first = k
		}
	}
	return first
}
