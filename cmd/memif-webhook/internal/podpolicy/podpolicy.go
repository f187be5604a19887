// Package podpolicy is what the admission webhook decides about a pod that carries the
// memifnet.io/ports annotation, without any I/O: the annotation is parsed by internal/ports (the
// parser memif-cni uses, so the messages are the same), the socket limit is derived from it or
// checked against it, and each link becomes a label and a required pod affinity that puts the
// link's pods on one node. The caller looks up the link's existing pods (Peer) and passes them in.
//
// Pool limits (memifnet.io/<pool>) are the pod's own business: a zero-copy port takes no pool
// unit (its buffer pool is a sealed memfd of the pod's own memory, see pkg/memif), and a copy-mode
// client uses a unit only when the pod asks for one, so the webhook neither adds nor checks them.
package podpolicy

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/ports"
)

// HostnameKey is the topology key of the link affinity: one node.
const HostnameKey = "kubernetes.io/hostname"

// Peer is an existing pod of a link, placed on a node (Node) or not yet; Terminating: deleted,
// not gone yet.
type Peer struct {
	Link, Namespace, Name, Node string
	Terminating                 bool
}

// Op is one JSON patch (RFC 6902) operation.
type Op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Refusal is a reason to refuse the pod, for its author: it names the field.
type Refusal struct{ msg string }

func (r *Refusal) Error() string { return r.msg }

func refuse(format string, a ...any) error { return &Refusal{fmt.Sprintf(format, a...)} }

// LinkLabel is the label key of a link's pods.
func LinkLabel(link string) string { return names.LinkLabelPrefix + link }

// Ports parses the pod's annotation, each link's {ordinal} resolved from the pod's labels
// (ports.ParseForPod); ok is false when the pod has none.
func Ports(pod *corev1.Pod) (ps []ports.Port, ok bool, err error) {
	return parsePorts(pod, func(v string) ([]ports.Port, error) { return ports.ParseForPod(v, pod.Labels) })
}

// storedPorts parses the annotation of a pod as stored, where Mutate has pinned every link: a
// placeholder left there is refused.
func storedPorts(pod *corev1.Pod) ([]ports.Port, bool, error) { return parsePorts(pod, ports.Parse) }

func parsePorts(pod *corev1.Pod, parse func(string) ([]ports.Port, error)) (ps []ports.Port, ok bool, err error) {
	v, ok := pod.Annotations[names.PortsAnnotation]
	if !ok {
		return nil, false, nil
	}
	ps, err = parse(v)
	if err != nil {
		// The field path names the annotation: say what is wrong with it, not its name again.
		var ae *ports.AnnotationError
		if errors.As(err, &ae) {
			err = ae.Err
		}
		return nil, true, &Refusal{"metadata.annotations[" + names.PortsAnnotation + "]: " + err.Error()}
	}
	return ps, true, nil
}

// Links is the link names of the ports, sorted.
func Links(ps []ports.Port) []string {
	var ls []string
	for _, p := range ps {
		if p.Link != "" {
			ls = append(ls, p.Link)
		}
	}
	sort.Strings(ls)
	return ls
}

// Mutate returns the patch that makes an annotated pod schedulable as its annotation says: the
// socket limit (one slot per port) where the pod set none, one label per link and a required pod
// affinity to each link's pods on the hostname topology. It refuses a socket limit below the
// annotation's ports, link labels the annotation does not name, links whose peers already run
// on different nodes, and links whose only placed pods are terminating; pool limits it leaves as
// they are. A pod without the annotation gets no
// patch. peers are the existing pods of the pod's links (any order; the pod itself excluded).
func Mutate(pod *corev1.Pod, peers []Peer) ([]Op, error) {
	ps, ok, err := Ports(pod)
	if !ok || err != nil {
		return nil, err
	}
	if err := checkLabels(pod, ps); err != nil {
		return nil, err
	}
	if err := checkPeers(ps, peers); err != nil {
		return nil, err
	}
	if err := checkLeaving(ps, peers); err != nil {
		return nil, err
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, refuse("spec.containers: empty; the memif ports go to the first container")
	}
	var ops []Op
	lim, err := limitOps(pod, ps)
	if err != nil {
		return nil, err
	}
	ops = append(ops, lim...)
	pin, err := pinOps(pod, ps)
	if err != nil {
		return nil, err
	}
	ops = append(ops, pin...)
	ops = append(ops, labelOps(pod, ps)...)
	ops = append(ops, affinityOps(pod, ps)...)
	return ops, nil
}

// Validate checks the pod as it will be stored (after every mutating webhook): a valid
// annotation, a socket limit that covers it, link labels only for its own links, and no affinity
// term on link labels of other namespaces (CheckAffinity, in pod.Namespace).
func Validate(pod *corev1.Pod) error {
	if err := CheckAffinity(pod, pod.Namespace); err != nil {
		return err
	}
	ps, ok, err := storedPorts(pod)
	if err != nil {
		return err
	}
	if !ok {
		// Sent only because it carries a link label (the webhook's to set) or selects one.
		return checkLabels(pod, nil)
	}
	if err := checkLabels(pod, ps); err != nil {
		return err
	}
	sockets, _ := sum(pod, names.SocketResource)
	if sockets < int64(len(ps)) {
		return refuse("spec.containers[*].resources.limits[%s]: %d in all, but annotation %s asks for %d port(s), one slot each",
			names.SocketResource, sockets, names.PortsAnnotation, len(ps))
	}
	return nil
}

// ValidateUpdate refuses changes to the annotation and to link labels: the pod's limits and
// placement were made for what it had at creation, and memif-cni reads the annotation again when
// the sandbox is re-created.
func ValidateUpdate(old, pod *corev1.Pod) error {
	if old.Annotations[names.PortsAnnotation] != pod.Annotations[names.PortsAnnotation] {
		return refuse("metadata.annotations[%s]: cannot change after the pod is created (its limits and node were chosen for the old value); create a new pod",
			names.PortsAnnotation)
	}
	keys := map[string]bool{}
	for k := range old.Labels {
		keys[k] = true
	}
	for k := range pod.Labels {
		keys[k] = true
	}
	for k := range keys {
		if !strings.HasPrefix(k, names.LinkLabelPrefix) {
			continue
		}
		ov, oldHas := old.Labels[k]
		nv, newHas := pod.Labels[k]
		if ov != nv || oldHas != newHas {
			return refuse("metadata.labels[%s]: set by the memifnet admission webhook at creation; it cannot change", k)
		}
	}
	return nil
}

func checkLabels(pod *corev1.Pod, ps []ports.Port) error {
	own := map[string]bool{}
	for _, l := range Links(ps) {
		own[LinkLabel(l)] = true
	}
	var bad []string
	for k := range pod.Labels {
		if strings.HasPrefix(k, names.LinkLabelPrefix) && !own[k] {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return refuse("metadata.labels[%s]: names a link that annotation %s does not; labels under %s are set by the memifnet admission webhook from the annotation",
			bad[0], names.PortsAnnotation, names.LinkLabelPrefix)
	}
	return nil
}

// checkPeers refuses a pod whose links' existing pods run on more than one node: it cannot be
// next to all of them.
func checkPeers(ps []ports.Port, peers []Peer) error {
	own := map[string]bool{}
	for _, l := range Links(ps) {
		own[l] = true
	}
	first := map[string]Peer{} // node -> first peer seen there
	var nodes []string
	sorted := append([]Peer(nil), peers...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		return a.Link+"/"+a.Name < b.Link+"/"+b.Name
	})
	for _, p := range sorted {
		if !own[p.Link] || p.Node == "" {
			continue
		}
		if _, seen := first[p.Node]; !seen {
			first[p.Node] = p
			nodes = append(nodes, p.Node)
		}
	}
	if len(nodes) < 2 {
		return nil
	}
	a, b := first[nodes[0]], first[nodes[1]]
	return refuse("metadata.annotations[%s]: link %s's pod %s/%s runs on node %s and link %s's pod %s/%s on node %s; both ends of a link must share a node, so one pod cannot join both links",
		names.PortsAnnotation, a.Link, a.Namespace, a.Name, a.Node, b.Link, b.Namespace, b.Name, b.Node)
}

// sum adds up a resource's limits over the containers; set says whether any container names it.
func sum(pod *corev1.Pod, rn corev1.ResourceName) (total int64, set bool) {
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Limits[rn]; ok {
			total += q.Value()
			set = true
		}
	}
	return total, set
}

// escape makes a map key a JSON pointer token (RFC 6901).
func escape(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }

// limitOps adds the socket limit when no container sets one, and refuses one below the ports.
func limitOps(pod *corev1.Pod, ps []ports.Port) ([]Op, error) {
	sockets, set := sum(pod, names.SocketResource)
	switch {
	case set && sockets < int64(len(ps)):
		return nil, refuse("spec.containers[*].resources.limits[%s]: %d in all, but annotation %s asks for %d port(s), one slot each; remove the limit (the webhook sets it) or set %d",
			names.SocketResource, sockets, names.PortsAnnotation, len(ps), len(ps))
	case set:
		return nil, nil
	}
	add := corev1.ResourceList{names.SocketResource: *resource.NewQuantity(int64(len(ps)), resource.DecimalSI)}
	// Extended resources: requests default to limits, and must equal them when set.
	c := pod.Spec.Containers[0]
	var ops []Op
	for _, field := range []struct {
		name string
		list corev1.ResourceList
	}{{"limits", c.Resources.Limits}, {"requests", c.Resources.Requests}} {
		base := "/spec/containers/0/resources/" + field.name
		if field.list == nil {
			if field.name == "requests" {
				continue // defaulted from the limits
			}
			m := map[string]string{}
			for rn, q := range add {
				m[string(rn)] = q.String()
			}
			ops = append(ops, Op{Op: "add", Path: base, Value: m})
			continue
		}
		for _, rn := range sortedNames(add) {
			q := add[rn]
			ops = append(ops, Op{Op: "add", Path: base + "/" + escape(string(rn)), Value: q.String()})
		}
	}
	return ops, nil
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for rn := range l {
		out = append(out, rn)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func labelOps(pod *corev1.Pod, ps []ports.Port) []Op {
	labels := map[string]string{}
	for _, p := range ps {
		if p.Link != "" {
			labels[LinkLabel(p.Link)] = p.Name
		}
	}
	if len(labels) == 0 {
		return nil
	}
	if pod.Labels == nil {
		return []Op{{Op: "add", Path: "/metadata/labels", Value: labels}}
	}
	var ops []Op
	for _, l := range Links(ps) {
		k := LinkLabel(l)
		ops = append(ops, Op{Op: "add", Path: "/metadata/labels/" + escape(k), Value: labels[k]})
	}
	return ops
}

// AffinityTerm is the required pod affinity term of a link: on the node of the link's pods (in
// the pod's namespace, where link names live).
func AffinityTerm(link string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: LinkLabel(link), Operator: metav1.LabelSelectorOpExists,
		}}},
		TopologyKey: HostnameKey,
	}
}

func affinityOps(pod *corev1.Pod, ps []ports.Port) []Op {
	// Terms already there are not added again: the webhook may be called again on its own
	// result (reinvocationPolicy IfNeeded), or see a pod copied from a mutated one.
	var have []corev1.PodAffinityTerm
	if a := pod.Spec.Affinity; a != nil && a.PodAffinity != nil {
		have = a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	var terms []corev1.PodAffinityTerm
	for _, l := range Links(ps) {
		term := AffinityTerm(l)
		if !slices.ContainsFunc(have, func(h corev1.PodAffinityTerm) bool { return equality.Semantic.DeepEqual(h, term) }) {
			terms = append(terms, term)
		}
	}
	if len(terms) == 0 {
		return nil
	}
	a := pod.Spec.Affinity
	switch {
	case a == nil:
		return []Op{{Op: "add", Path: "/spec/affinity", Value: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}}}
	case a.PodAffinity == nil:
		return []Op{{Op: "add", Path: "/spec/affinity/podAffinity", Value: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}}
	case a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil:
		return []Op{{Op: "add", Path: "/spec/affinity/podAffinity/requiredDuringSchedulingIgnoredDuringExecution", Value: terms}}
	}
	var ops []Op
	for _, t := range terms {
		ops = append(ops, Op{Op: "add", Path: "/spec/affinity/podAffinity/requiredDuringSchedulingIgnoredDuringExecution/-", Value: t})
	}
	return ops
}
