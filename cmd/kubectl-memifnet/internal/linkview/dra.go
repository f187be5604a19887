package linkview

import (
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/memifnet/memifnet/cmd/internal/draattr"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// SocketClass is the DeviceClass of the DRA driver's socket slots (manifests/overlays/dra).
const SocketClass = "socket." + names.DRADriver

// ClaimPort is one socket request of a memifnet claim: its allocation, status and the pod
// that uses it.
type ClaimPort struct {
	Request   string
	Device    string             // allocated device ("" while unallocated)
	Node      string             // the device's pool: the node
	Data      draattr.PortStatus // the driver's data of the device in the claim's status
	Ready     bool               // the driver's Ready condition
	Allocated bool
	Pod       *corev1.Pod
}

// ClaimPorts is the claim's socket requests in spec order (the first serves); false when the
// claim asks memifnet for no socket.
func ClaimPorts(claim *resourceapi.ResourceClaim, pods []corev1.Pod) ([]ClaimPort, bool) {
	var out []ClaimPort
	results := map[string]resourceapi.DeviceRequestAllocationResult{}
	if a := claim.Status.Allocation; a != nil {
		for _, r := range a.Devices.Results {
			if r.Driver == names.DRADriver && strings.HasPrefix(r.Device, names.DRASlotPrefix) {
				results[r.Request] = r
			}
		}
	}
	for _, req := range claim.Spec.Devices.Requests {
		r, allocated := results[req.Name]
		isSocket := allocated || req.Exactly != nil && req.Exactly.DeviceClassName == SocketClass
		if !isSocket {
			continue
		}
		cp := ClaimPort{Request: req.Name, Allocated: allocated, Device: r.Device, Node: r.Pool, Data: draattr.PortStatus{Port: req.Name}}
		for _, st := range claim.Status.Devices {
			if st.Driver != names.DRADriver || st.Pool != r.Pool || st.Device != r.Device || !allocated {
				continue
			}
			if st.Data != nil {
				var d draattr.PortStatus
				if json.Unmarshal(st.Data.Raw, &d) == nil && d.Port != "" {
					cp.Data = d
				}
			}
			cp.Ready = meta.IsStatusConditionTrue(st.Conditions, "Ready")
		}
		cp.Pod = requestPod(claim, req.Name, pods)
		out = append(out, cp)
	}
	return out, len(out) > 0
}

// requestPod is the pod of the claim's namespace whose container uses the request (a container
// claim without a request uses all of them).
func requestPod(claim *resourceapi.ResourceClaim, request string, pods []corev1.Pod) *corev1.Pod {
	for i := range pods {
		pod := &pods[i]
		if pod.Namespace != claim.Namespace {
			continue
		}
		refs := PodClaimRefs(pod)
		for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
			for _, rc := range c.Resources.Claims {
				if refs[rc.Name] == claim.Name && (rc.Request == "" || rc.Request == request) {
					return pod
				}
			}
		}
	}
	return nil
}

// PodClaimRefs maps the pod's claim references (spec.resourceClaims[].name) to claim names: the
// named claim, or the one generated from a template (status.resourceClaimStatuses).
func PodClaimRefs(pod *corev1.Pod) map[string]string {
	m := map[string]string{}
	for _, rc := range pod.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil {
			m[rc.Name] = *rc.ResourceClaimName
		}
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil {
			m[st.Name] = *st.ResourceClaimName
		}
	}
	return m
}

func claimLink(claim *resourceapi.ResourceClaim, pods []corev1.Pod) (Link, bool) {
	cps, ok := ClaimPorts(claim, pods)
	if !ok {
		return Link{}, false
	}
	l := Link{Namespace: claim.Namespace, Name: claim.Name, Backend: BackendDRA, Claim: claim.Name}
	if len(cps) == 1 {
		l.Name, l.Host = "", true
	}
	allocated := true
	for i, cp := range cps {
		if cp.Data.Link != "" && !l.Host {
			l.Name = cp.Data.Link
		}
		role := cp.Data.Role
		if role == "" && !l.Host { // before Prepare: the first request serves
			role = portspec.FirstRole
			if i > 0 {
				role = portspec.Opposite(portspec.FirstRole)
			}
		}
		e := End{Port: cp.Data.Port, Role: role}
		if cp.Pod != nil {
			e = podEnd(cp.Pod, cp.Data.Port, role)
			e.Wired = e.Wired && cp.Ready
		}
		if cp.Node != "" && e.Node == "" {
			e.Node = cp.Node
		}
		allocated = allocated && cp.Allocated
		l.Ends = append(l.Ends, e)
	}
	if l.Host {
		l.Ends = append(l.Ends, End{Role: portspec.Opposite(hostRole(l.Ends[0].Role))})
	}
	podEnds := l.Ends
	if l.Host {
		podEnds = l.Ends[:1]
	}
	missing := false
	for _, e := range podEnds {
		missing = missing || e.Pod == ""
	}
	l.Node, l.Status = nodeAndStatus(podEnds, len(podEnds))
	switch {
	case !allocated:
		l.Status = StatusPending
	case missing && l.Status != StatusEnded:
		l.Status = StatusPeerMissing
	}
	if l.Node == "" && len(cps) > 0 {
		l.Node = cps[0].Node
	}
	return l, true
}
