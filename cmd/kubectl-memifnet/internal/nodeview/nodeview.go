// Package nodeview says what a node offers and what is used of it: the device plugin's
// extended resources (memifnet.io/*: capacity, allocatable, the requests of the node's pods that
// have not ended, unhealthy devices as capacity minus allocatable) and the DRA driver's devices
// (its ResourceSlices for the node, the allocated claims, tainted devices). Pure, like linkview.
package nodeview

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/linkview"
	"github.com/memifnet/memifnet/internal/names"
)

// Resource is one memifnet.io/* extended resource of the node.
type Resource struct {
	Name        string `json:"name"`
	Capacity    int64  `json:"capacity"`
	Allocatable int64  `json:"allocatable"`
	Used        int64  `json:"used"`      // requests of the node's pods that have not ended
	Free        int64  `json:"free"`      // allocatable - used (the scheduler's view)
	Unhealthy   int64  `json:"unhealthy"` // capacity - allocatable: devices the plugin reports unhealthy
}

// PodUse is one pod's memifnet resources on the node.
type PodUse struct {
	Namespace string           `json:"namespace"`
	Pod       string           `json:"pod"`
	Phase     string           `json:"phase"`
	Resources map[string]int64 `json:"resources"`
}

// Device is one DRA device of the node.
type Device struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`           // socket or hugepage
	Pool   string   `json:"pool,omitempty"` // a hugepage unit's pool
	Claim  string   `json:"claim,omitempty"`
	Taints []string `json:"taints,omitempty"` // key=value:effect
}

// DRAGroup is the DRA devices of one type (and pool) on the node.
type DRAGroup struct {
	Type    string `json:"type"`
	Pool    string `json:"pool,omitempty"`
	Total   int64  `json:"total"`
	Used    int64  `json:"used"`
	Free    int64  `json:"free"`
	Tainted int64  `json:"tainted"`
}

// Report is `kubectl memifnet node NODE`.
type Report struct {
	Node string `json:"node"`
	// Agent is the node's memifnet agent pod; nil when none runs there, and AgentNote says so.
	Agent     *Agent `json:"agent,omitempty"`
	AgentNote string `json:"agentNote,omitempty"`
	// Links are the links with an end on the node, their state and rates read from its agent.
	Links     []linkview.Link `json:"links"`
	Resources []Resource      `json:"resources"`
	Pods      []PodUse        `json:"pods"`
	DRA       []DRAGroup      `json:"dra,omitempty"`
	Devices   []Device        `json:"draDevices,omitempty"`
	// Unhealthy lists what is known to be unhealthy: device-plugin counts per resource (the API
	// does not name the devices) and tainted DRA devices.
	Unhealthy []string `json:"unhealthy"`
	// Events is the node agent's Events on the Node (withheld and refilled pool units).
	Events []corev1.Event `json:"events,omitempty"`
}

// PodRequest is what the scheduler counts of resource r for the pod: the larger of the sum over
// its containers (with restartable init containers, i.e. sidecars) and the largest init
// container plus the sidecars started before it; a request defaults to its limit.
func PodRequest(pod *corev1.Pod, r corev1.ResourceName) int64 {
	req := func(c *corev1.Container) int64 {
		if q, ok := c.Resources.Requests[r]; ok {
			return q.Value()
		}
		q := c.Resources.Limits[r]
		return q.Value()
	}
	var sum, sidecars, initMax int64
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars += req(c)
			initMax = max(initMax, sidecars)
			continue
		}
		initMax = max(initMax, sidecars+req(c))
	}
	for i := range pod.Spec.Containers {
		sum += req(&pod.Spec.Containers[i])
	}
	return max(sum+sidecars, initMax)
}

// isMemifnet reports whether r is one of the device plugin's resources.
func isMemifnet(r corev1.ResourceName) bool {
	return strings.HasPrefix(string(r), names.ResourcePrefix)
}

// Build makes the report from the node, the pods bound to it, the driver's slices for it and
// the claims (any namespace) that may hold its devices.
func Build(node *corev1.Node, pods []corev1.Pod, slices []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim) Report {
	rep := Report{Node: node.Name, Unhealthy: []string{}, Links: []linkview.Link{}}
	res := map[corev1.ResourceName]*Resource{}
	get := func(r corev1.ResourceName) *Resource {
		if res[r] == nil {
			res[r] = &Resource{Name: string(r)}
		}
		return res[r]
	}
	for r, q := range node.Status.Capacity {
		if isMemifnet(r) {
			get(r).Capacity = q.Value()
		}
	}
	for r, q := range node.Status.Allocatable {
		if isMemifnet(r) {
			get(r).Allocatable = q.Value()
		}
	}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != node.Name || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		use := PodUse{Namespace: p.Namespace, Pod: p.Name, Phase: string(p.Status.Phase), Resources: map[string]int64{}}
		for r := range podResources(p) {
			if n := PodRequest(p, r); n > 0 {
				get(r).Used += n
				use.Resources[string(r)] = n
			}
		}
		if len(use.Resources) > 0 {
			rep.Pods = append(rep.Pods, use)
		}
	}
	for _, r := range res {
		r.Free = r.Allocatable - r.Used
		r.Unhealthy = max(r.Capacity-r.Allocatable, 0)
		rep.Resources = append(rep.Resources, *r)
		if r.Unhealthy > 0 {
			rep.Unhealthy = append(rep.Unhealthy, fmt.Sprintf("%s: %d of %d device(s) unhealthy (capacity - allocatable; the agent's log names them)", r.Name, r.Unhealthy, r.Capacity))
		}
	}
	sort.Slice(rep.Resources, func(i, j int) bool { return rep.Resources[i].Name < rep.Resources[j].Name })
	sort.Slice(rep.Pods, func(i, j int) bool {
		return rep.Pods[i].Namespace+"/"+rep.Pods[i].Pod < rep.Pods[j].Namespace+"/"+rep.Pods[j].Pod
	})
	rep.dra(node.Name, slices, claims)
	return rep
}

// podResources is the memifnet resources any container of the pod names.
func podResources(p *corev1.Pod) map[corev1.ResourceName]bool {
	m := map[corev1.ResourceName]bool{}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				for r := range l {
					if isMemifnet(r) {
						m[r] = true
					}
				}
			}
		}
	}
	return m
}
