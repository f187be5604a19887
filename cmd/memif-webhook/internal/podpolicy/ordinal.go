package podpolicy

import (
	"encoding/json"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/ports"
)

// pinOps pins the pod's resolved links: an annotation whose links use {ordinal} is rewritten with
// the links Ports resolved from the pod's labels at creation. memif-cni then reads links that need
// no label: no runtime passes labels to a CNI plugin, a label can be edited after creation (the
// annotation cannot, see ValidateUpdate), and a re-created sandbox must join the link the pod's
// limits, link labels and node were chosen for. The short form keeps its spelling when a plain
// text substitution means the same ports; otherwise the ports are written as a JSON list.
func pinOps(pod *corev1.Pod, ps []ports.Port) ([]Op, error) {
	v := pod.Annotations[names.PortsAnnotation]
	if _, err := ports.Parse(v); err == nil {
		return nil, nil // no placeholder: ports.Parse refuses any brace in a link
	}
	pinned := strings.ReplaceAll(v, names.OrdinalPlaceholder, pod.Labels[names.PodIndexLabel])
	if got, err := ports.Parse(pinned); err != nil || !reflect.DeepEqual(got, ps) {
		b, err := json.Marshal(ps)
		if err != nil {
			return nil, err
		}
		pinned = string(b)
	}
	// "add" on an existing member replaces it (RFC 6902).
	return []Op{{Op: "add", Path: "/metadata/annotations/" + escape(names.PortsAnnotation), Value: pinned}}, nil
}
