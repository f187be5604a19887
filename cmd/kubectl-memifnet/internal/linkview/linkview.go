// Package linkview turns what the API server holds (pods with the memifnet.io/ports annotation
// and link.memifnet.io/ labels; ResourceClaims of driver memifnet.io) into links and ports, and
// derives each link's status from the pods' phases and conditions and the claims' device
// status. It is pure: the command fetches, this decides, tests feed it real API objects.
package linkview

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/ports"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// Backends.
const (
	BackendDevicePlugin = "device-plugin" // annotation + memifnet.io/socket, wired by memif-cni
	BackendDRA          = "dra"           // a ResourceClaim of driver memifnet.io
)

// Statuses of a link, derived from the API objects alone (the agent's metrics add State).
const (
	StatusWired       = "Wired"       // both ends' pods run on one node with their slots wired
	StatusWiring      = "Wiring"      // bound to the node, a sandbox or claim not wired yet (explain says why)
	StatusPending     = "Pending"     // no end is scheduled (or the claim is not allocated)
	StatusPeerPending = "PeerPending" // one end runs or is bound, the other is not scheduled
	StatusPeerMissing = "PeerMissing" // only one pod names the link
	StatusSplitNodes  = "SplitNodes"  // the two pods are on two nodes: the link can never come up
	StatusConflict    = "Conflict"    // more than two pods name the link; memif-cni refuses the third
	StatusEnded       = "Ended"       // a pod of the link has ended
)

// End is one end of a link: a pod's port, or the host data plane of a host port.
type End struct {
	Pod   string `json:"pod,omitempty"` // empty: the host data plane (host ports)
	Port  string `json:"port,omitempty"`
	Role  string `json:"role,omitempty"` // server, client; empty: chosen when the pod attaches
	Phase string `json:"phase,omitempty"`
	Node  string `json:"node,omitempty"`
	// Wired: the pod's sandbox is up with its network set up (memif-cni's ADD succeeded), or the
	// claim's device reports Ready (the DRA driver prepared it).
	Wired bool `json:"wired"`
	// Scheduled: the pod is bound to a node.
	Scheduled bool `json:"scheduled"`
	// LabelOnly: the pod carries the link's label but its annotation does not name the link.
	LabelOnly bool `json:"labelOnly,omitempty"`

	// Filled in from the agent's metrics when it exports them.
	Stats *Stats `json:"stats,omitempty"`
}

// Stats is an end's counters from its node agent, with rates when two scrapes were taken.
type Stats struct {
	Up        bool     `json:"up"`
	RxPackets float64  `json:"rxPackets"`
	TxPackets float64  `json:"txPackets"`
	RxBytes   float64  `json:"rxBytes"`
	TxBytes   float64  `json:"txBytes"`
	Drops     float64  `json:"drops"`
	RxPPS     *float64 `json:"rxPacketsPerSecond,omitempty"`
	TxPPS     *float64 `json:"txPacketsPerSecond,omitempty"`
}

// Link is one row of `kubectl memifnet links`.
type Link struct {
	Namespace string `json:"namespace"`
	Name      string `json:"link"` // the link's name; a host port's is "" (its peer is the host)
	Host      bool   `json:"hostPort,omitempty"`
	Backend   string `json:"backend"`
	Claim     string `json:"claim,omitempty"`
	Ends      []End  `json:"ends"`
	Node      string `json:"node,omitempty"`
	Status    string `json:"status"`
	// State is up or down from the agent's memifnet_port_up; "" when the agent does not say.
	State string `json:"state,omitempty"`
	// StateUnknownReason says why State is empty (the agent's reading failed).
	StateUnknownReason string `json:"stateUnknownReason,omitempty"`
}

// member is one pod's port on a link, before the link is put together.
type member struct {
	pod  *corev1.Pod
	port ports.Port
	// labelOnly: from a link label the annotation does not back.
	labelOnly bool
}

// Links is every link and host port of the pods and claims, sorted by namespace and name.
// Pods with a bad annotation are left out (explain reports them).
func Links(pods []corev1.Pod, claims []resourceapi.ResourceClaim) []Link {
	byLink := map[[2]string][]member{}
	var out []Link
	for i := range pods {
		pod := &pods[i]
		ps, _ := PodPorts(pod)
		named := map[string]bool{}
		for _, p := range ps {
			if p.Link == "" {
				out = append(out, hostLink(pod, p))
				continue
			}
			named[p.Link] = true
			k := [2]string{pod.Namespace, p.Link}
			byLink[k] = append(byLink[k], member{pod: pod, port: p})
		}
		for l, port := range LinkLabels(pod) {
			if !named[l] {
				k := [2]string{pod.Namespace, l}
				byLink[k] = append(byLink[k], member{pod: pod, port: ports.Port{Name: port, Link: l}, labelOnly: true})
			}
		}
	}
	for k, ms := range byLink {
		out = append(out, podLink(k[0], k[1], ms))
	}
	for i := range claims {
		if l, ok := claimLink(&claims[i], pods); ok {
			out = append(out, l)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Ends[0].Pod+"/"+a.Ends[0].Port < b.Ends[0].Pod+"/"+b.Ends[0].Port
	})
	return out
}

// PodPorts is the pod's annotated ports (nil without the annotation).
func PodPorts(pod *corev1.Pod) ([]ports.Port, error) {
	v, ok := pod.Annotations[names.PortsAnnotation]
	if !ok {
		return nil, nil
	}
	return ports.Parse(v)
}

// LinkLabels is the pod's link.memifnet.io/<link> labels: link -> port.
func LinkLabels(pod *corev1.Pod) map[string]string {
	m := map[string]string{}
	for k, v := range pod.Labels {
		if l, ok := strings.CutPrefix(k, names.LinkLabelPrefix); ok && l != "" {
			m[l] = v
		}
	}
	return m
}

// Scheduled reports whether the pod is bound to a node.
func Scheduled(pod *corev1.Pod) bool { return pod.Spec.NodeName != "" }

// Ended reports whether the pod has ended (its sandbox and ports are gone or going).
func Ended(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil
}

// SandboxReady reports whether the pod's sandbox is up with its network configured, which for
// a memif pod means memif-cni's ADD succeeded: the kubelet's PodReadyToStartContainers
// condition, or, from a kubelet that does not set it, a running container.
func SandboxReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReadyToStartContainers {
			return c.Status == corev1.ConditionTrue
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return true
		}
	}
	return false
}

func podEnd(pod *corev1.Pod, port, role string) End {
	return End{Pod: pod.Name, Port: port, Role: role, Phase: phase(pod), Node: pod.Spec.NodeName,
		Scheduled: Scheduled(pod), Wired: !Ended(pod) && SandboxReady(pod)}
}

func phase(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return "Terminating"
	}
	return string(pod.Status.Phase)
}

func hostLink(pod *corev1.Pod, p ports.Port) Link {
	l := Link{Namespace: pod.Namespace, Host: true, Backend: BackendDevicePlugin,
		Ends: []End{podEnd(pod, p.Name, hostRole(p.Role)), {Role: portspec.Opposite(hostRole(p.Role))}}}
	l.Node, l.Status = nodeAndStatus(l.Ends[:1], 1)
	return l
}

// hostRole is a host port's pod role: the pod is the client (portspec.HostPodRole; the
// annotation's parser refuses a host port that asks to serve).
func hostRole(r string) string {
	if r == "" {
		return portspec.HostPodRole
	}
	return r
}

func podLink(ns, name string, ms []member) Link {
	// The older pod first (it likely attached first, but memif-cni decides, so such roles stay
	// unknown); then servers first once the roles one end fixes are filled in.
	sort.SliceStable(ms, func(i, j int) bool {
		ti, tj := ms[i].pod.CreationTimestamp, ms[j].pod.CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return ms[i].pod.Name < ms[j].pod.Name
	})
	l := Link{Namespace: ns, Name: name, Backend: BackendDevicePlugin}
	for _, m := range ms {
		e := podEnd(m.pod, m.port.Name, m.port.Role)
		e.LabelOnly = m.labelOnly
		l.Ends = append(l.Ends, e)
	}
	if len(l.Ends) == 2 {
		// One end's role fixes the other's (memif-cni gives the second the other role).
		a, b := &l.Ends[0], &l.Ends[1]
		if a.Role == "" {
			a.Role = portspec.Opposite(b.Role)
		}
		if b.Role == "" {
			b.Role = portspec.Opposite(a.Role)
		}
	}
	sort.SliceStable(l.Ends, func(i, j int) bool {
		return l.Ends[i].Role == portspec.RoleServer && l.Ends[j].Role != portspec.RoleServer
	})
	l.Node, l.Status = nodeAndStatus(l.Ends, 2)
	return l
}

// nodeAndStatus derives the link's node and status from its pod ends; want is how many pod
// ends a complete link has.
func nodeAndStatus(ends []End, want int) (string, string) {
	var nodes []string
	scheduled, wired, ended := 0, 0, 0
	for _, e := range ends {
		if e.Phase == string(corev1.PodSucceeded) || e.Phase == string(corev1.PodFailed) || e.Phase == "Terminating" {
			ended++
		}
		if e.Scheduled {
			scheduled++
			if !contains(nodes, e.Node) {
				nodes = append(nodes, e.Node)
			}
		}
		if e.Wired {
			wired++
		}
	}
	node := strings.Join(nodes, ",")
	switch {
	case len(ends) > want:
		return node, StatusConflict
	case ended > 0:
		return node, StatusEnded
	case len(ends) < want:
		return node, StatusPeerMissing
	case len(nodes) > 1:
		return node, StatusSplitNodes
	case scheduled == 0:
		return node, StatusPending
	case scheduled < len(ends):
		return node, StatusPeerPending
	case wired < len(ends):
		return node, StatusWiring
	}
	return node, StatusWired
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
