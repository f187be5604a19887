package podpolicy

import (
	"sort"
	"strings"

	"github.com/memifnet/memifnet/internal/names"
)

// AnnotationPrefix is the prefix of every annotation that is memifnet's (memifnet.io/ports today).
const AnnotationPrefix = "memifnet.io/"

// ValidateBinding refuses a pods/binding request that would write memifnet's metadata into the
// pod: the API server merges a Binding's annotations into the bound pod (and, with the
// PodTopologyLabelsAdmission feature, its labels), with no pod UPDATE that the webhook would see.
// A binding cannot add the annotation a pod was not admitted with, nor change the one it was, so
// any memifnet.io/ annotation or link label on a Binding is refused, whatever the pod holds; the
// scheduler's bindings carry none (and are never sent to the webhook).
func ValidateBinding(annotations, labels map[string]string) error {
	if k := firstWithPrefix(annotations, AnnotationPrefix); k != "" {
		return refuse("metadata.annotations[%s]: a Binding (pods/binding) cannot set annotations under %s: the API server would copy it into the pod past admission; set %s when the pod is created",
			k, AnnotationPrefix, names.PortsAnnotation)
	}
	if k := firstWithPrefix(labels, names.LinkLabelPrefix); k != "" {
		return refuse("metadata.labels[%s]: a Binding (pods/binding) cannot set labels under %s: they are set by the memifnet admission webhook at the pod's creation",
			k, names.LinkLabelPrefix)
	}
	return nil
}

// firstWithPrefix is the smallest key of m with the prefix, "" if none: a refusal names the same
// key every time.
func firstWithPrefix(m map[string]string, prefix string) string {
	var keys []string
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	sort.Strings(keys)
	return keys[0]
}
