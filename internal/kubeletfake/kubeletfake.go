// Package kubeletfake is the kubelet stand-in of the tests: the device-plugin Registration
// service, the PodResources v1 service (List, Get, GetAllocatableResources), the kubelet's Pods API
// over HTTPS, and the API server's pod endpoint. Each is built from the real Kubernetes API types
// (k8s.io/kubelet, k8s.io/api) and served on a real socket or HTTPS port, so the code under test
// talks to it exactly as it talks to a kubelet. It stands in only where no kubelet runs (unit and
// binary tests); the end-to-end tiers run the real one.
package kubeletfake

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	api "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Container is the container every stand-in pod's devices are in.
const Container = "app"

// Tenant is the pod Hold gives devices to: the device plugin's tests care which devices some pod
// holds, not which pod.
const (
	TenantNamespace = "default"
	TenantName      = "tenant"
)

// Pod is what the stand-ins know about one pod.
type Pod struct {
	Namespace, Name, UID string
	Annotations          map[string]string
	// Devices are the device IDs the pod holds, by resource name, all in container "app".
	Devices map[string][]string
}

// Kubelet holds the pods and serves them; start the services a test needs with its Serve
// methods. The zero value is not usable; use New.
type Kubelet struct {
	mu          sync.Mutex
	pods        map[string]Pod      // namespace/name ->
	allocatable map[string][]string // resource -> device IDs
	noGet       bool

	gets, lists atomic.Int64

	reg *registration // the device-plugin Registration service, once served
}

// New returns a kubelet without pods.
func New() *Kubelet {
	return &Kubelet{pods: map[string]Pod{}, allocatable: map[string][]string{}}
}

// SetPod adds or replaces a pod.
func (k *Kubelet) SetPod(p Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pods[p.Namespace+"/"+p.Name] = p
}

// DeletePod forgets a pod.
func (k *Kubelet) DeletePod(ns, name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.pods, ns+"/"+name)
}

// Hold sets the devices of resource that pod default/tenant holds (none: it holds none).
func (k *Kubelet) Hold(resource string, ids ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := TenantNamespace + "/" + TenantName
	p, ok := k.pods[key]
	if !ok {
		p = Pod{Namespace: TenantNamespace, Name: TenantName}
	}
	p.Devices = maps.Clone(p.Devices)
	if p.Devices == nil {
		p.Devices = map[string][]string{}
	}
	p.Devices[resource] = slices.Clone(ids)
	k.pods[key] = p
}

// SetAllocatable sets the devices of resource that GetAllocatableResources reports.
func (k *Kubelet) SetAllocatable(resource string, ids ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.allocatable[resource] = slices.Clone(ids)
}

// SetNoGet makes PodResources Get answer Unimplemented, as a kubelet without the
// KubeletPodResourcesGet feature does.
func (k *Kubelet) SetNoGet(v bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.noGet = v
}

// Gets and Lists count the PodResources Get and List calls answered so far.
func (k *Kubelet) Gets() int64  { return k.gets.Load() }
func (k *Kubelet) Lists() int64 { return k.lists.Load() }

// podResourcesOf is the pod's view in the PodResources API.
func podResourcesOf(p Pod) *api.PodResources {
	ctr := &api.ContainerResources{Name: Container}
	for _, r := range sortedKeys(p.Devices) {
		ctr.Devices = append(ctr.Devices, &api.ContainerDevices{ResourceName: r, DeviceIds: p.Devices[r]})
	}
	return &api.PodResources{Name: p.Name, Namespace: p.Namespace, Containers: []*api.ContainerResources{ctr}}
}
