package nodeview

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func limits(socket, pool int64) corev1.ResourceRequirements {
	l := corev1.ResourceList{"memifnet.io/socket": *resource.NewQuantity(socket, resource.DecimalSI)}
	if pool > 0 {
		l["memifnet.io/hugepool"] = *resource.NewQuantity(pool, resource.DecimalSI)
	}
	return corev1.ResourceRequirements{Limits: l}
}

func nodePod(name, node string, phase corev1.PodPhase, cs ...corev1.Container) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: node, Containers: cs},
		Status: corev1.PodStatus{Phase: phase}}
}

func TestBuildDevicePlugin(t *testing.T) {
	q := func(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{
		Capacity:    corev1.ResourceList{"memifnet.io/socket": q(64), "memifnet.io/hugepool": q(4), "cpu": q(2)},
		Allocatable: corev1.ResourceList{"memifnet.io/socket": q(62), "memifnet.io/hugepool": q(4), "cpu": q(2)},
	}}
	sidecar := corev1.ContainerRestartPolicyAlways
	withInit := nodePod("init", "n1", corev1.PodRunning, corev1.Container{Name: "c", Resources: limits(1, 0)})
	withInit.Spec.InitContainers = []corev1.Container{{Name: "big", Resources: limits(3, 0)},
		{Name: "side", RestartPolicy: &sidecar, Resources: limits(1, 0)}}
	pods := []corev1.Pod{
		nodePod("rx", "n1", corev1.PodRunning, corev1.Container{Name: "c", Resources: limits(1, 1)}),
		nodePod("two", "n1", corev1.PodPending, corev1.Container{Name: "a", Resources: limits(1, 0)}, corev1.Container{Name: "b", Resources: limits(1, 0)}),
		nodePod("done", "n1", corev1.PodSucceeded, corev1.Container{Name: "c", Resources: limits(5, 0)}),
		nodePod("elsewhere", "n2", corev1.PodRunning, corev1.Container{Name: "c", Resources: limits(7, 0)}),
		nodePod("plain", "n1", corev1.PodRunning, corev1.Container{Name: "c"}),
		withInit, // max(1+1 sidecar, 3 init) = 3
	}
	rep := Build(node, pods, nil, nil)
	if len(rep.Resources) != 2 {
		t.Fatalf("resources %+v", rep.Resources)
	}
	hp, sock := rep.Resources[0], rep.Resources[1]
	if sock.Name != "memifnet.io/socket" || sock.Capacity != 64 || sock.Allocatable != 62 || sock.Used != 6 || sock.Free != 56 || sock.Unhealthy != 2 {
		t.Errorf("socket %+v", sock)
	}
	if hp.Used != 1 || hp.Free != 3 || hp.Unhealthy != 0 {
		t.Errorf("hugepool %+v", hp)
	}
	if len(rep.Pods) != 3 || rep.Pods[0].Pod != "init" || rep.Pods[0].Resources["memifnet.io/socket"] != 3 {
		t.Errorf("pods %+v", rep.Pods)
	}
	if len(rep.Unhealthy) != 1 || !strings.Contains(rep.Unhealthy[0], "memifnet.io/socket: 2 of 64") {
		t.Errorf("unhealthy %q", rep.Unhealthy)
	}
}

func TestBuildDRA(t *testing.T) {
	attr := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(s)} }
	dev := func(name, typ, pool string) resourceapi.Device {
		d := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": attr(typ)}}
		if pool != "" {
			d.Attributes["pool"] = attr(pool)
		}
		return d
	}
	tainted := dev("dra-slot-002", "socket", "")
	tainted.Taints = []resourceapi.DeviceTaint{{Key: "memifnet.io/unhealthy", Value: "scrub-failed", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	slice := func(gen int64, devs ...resourceapi.Device) resourceapi.ResourceSlice {
		return resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: "memifnet.io", NodeName: ptr.To("n1"),
			Pool: resourceapi.ResourcePool{Name: "n1", Generation: gen, ResourceSliceCount: 1}, Devices: devs}}
	}
	slices := []resourceapi.ResourceSlice{
		slice(1, dev("stale", "socket", "")), // an older generation: replaced
		slice(2, dev("dra-slot-000", "socket", ""), dev("dra-slot-001", "socket", ""), tainted, dev("drapool-n0-000", "hugepage", "drapool")),
		{Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourceapi.ResourcePool{Name: "n1", Generation: 9}, Devices: []resourceapi.Device{dev("gpu0", "gpu", "")}}},
	}
	claims := []resourceapi.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns"}, Status: resourceapi.ResourceClaimStatus{
		Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "east", Driver: "memifnet.io", Pool: "n1", Device: "dra-slot-000"},
			{Request: "mem", Driver: "memifnet.io", Pool: "n1", Device: "drapool-n0-000"},
			{Request: "x", Driver: "memifnet.io", Pool: "n2", Device: "dra-slot-001"}, // another node's
		}}}}}}
	rep := Build(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, nil, slices, claims)
	if len(rep.DRA) != 2 {
		t.Fatalf("groups %+v", rep.DRA)
	}
	hp, sock := rep.DRA[0], rep.DRA[1]
	if sock != (DRAGroup{Type: "socket", Total: 3, Used: 1, Free: 1, Tainted: 1}) || hp != (DRAGroup{Type: "hugepage", Pool: "drapool", Total: 1, Used: 1}) {
		t.Errorf("groups %+v", rep.DRA)
	}
	if len(rep.Devices) != 4 || rep.Devices[0].Claim != "ns/l" || rep.Devices[1].Claim != "" {
		t.Errorf("devices %+v", rep.Devices)
	}
	if len(rep.Unhealthy) != 1 || !strings.Contains(rep.Unhealthy[0], "dra-slot-002") || !strings.Contains(rep.Unhealthy[0], "scrub-failed") {
		t.Errorf("unhealthy %q", rep.Unhealthy)
	}
}

func TestAgentEvents(t *testing.T) {
	ev := func(reason, msg string, at int64) corev1.Event {
		return corev1.Event{Reason: reason, Message: msg, LastTimestamp: metav1.Unix(at, 0),
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
	}
	rep := Build(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, nil, nil, nil)
	rep.AddAgentEvents([]corev1.Event{
		ev(EventUnitWithheld, "unit hugepool-n0-001 withheld: no space left on device: the hugepages of /var/lib/memifnet/pools/hugepool/hugepool-n0-001 are still held by pid 4242 (app) mapping; the unit comes back once they are let go", 10),
		ev(EventUnitWithheld, "unit drapool-n0-000 withheld: ...", 11),
		ev(EventUnitRefilled, "unit drapool-n0-000 is back in service: its previous tenant let go of its old file", 12),
		ev("NodeReady", "Node n1 status is now: NodeReady", 13),
		ev(EventScrubFailed, "device slot-001 (device plugin memifnet.io/socket) is out of service until a retried scrub works: scrub slot-001: ...", 5),
		ev(EventScrubFailed, "device dra-slot-002 (DRA) is out of service until a retried scrub works: scrub dra-slot-002: ...", 6),
		ev(EventRecovered, "device dra-slot-002 (DRA) is back in service: a retried scrub worked", 7),
	})
	if len(rep.Events) != 6 || rep.Events[0].Reason != EventUnitRefilled {
		t.Errorf("events %+v", rep.Events)
	}
	if len(rep.Unhealthy) != 2 || !strings.HasPrefix(rep.Unhealthy[0], "unit hugepool-n0-001 withheld") || !strings.HasPrefix(rep.Unhealthy[1], "device slot-001 (device plugin") {
		t.Errorf("unhealthy %q: want only the unit still withheld and the device still out of service", rep.Unhealthy)
	}
}
