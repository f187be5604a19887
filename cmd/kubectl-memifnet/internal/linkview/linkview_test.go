package linkview

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// pod is a link pod as the API server stores it after the webhook: annotation, label, phase,
// node and the kubelet's sandbox condition.
func pod(name, ann, node string, phase corev1.PodPhase, sandbox bool, age int) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(time.Unix(int64(1000+age), 0))},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: phase},
	}
	if ann != "" {
		p.Annotations = map[string]string{"memifnet.io/ports": ann}
	}
	st := corev1.ConditionFalse
	if sandbox {
		st = corev1.ConditionTrue
	}
	if node != "" {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: st})
	} else {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient memifnet.io/socket."})
	}
	return p
}

func TestLinksStatus(t *testing.T) {
	running := corev1.PodRunning
	pending := corev1.PodPending
	for _, tc := range []struct {
		name   string
		pods   []corev1.Pod
		status string
		node   string
		roles  [2]string
	}{
		{"wired", []corev1.Pod{pod("rx", "east@l", "n1", running, true, 0), pod("tx", "west@l", "n1", running, true, 1)}, StatusWired, "n1", [2]string{"", ""}},
		{"roles from one end", []corev1.Pod{pod("rx", `[{"name":"east","link":"l","role":"client"}]`, "n1", running, true, 0),
			pod("tx", "west@l", "n1", running, true, 1)}, StatusWired, "n1", [2]string{"server", "client"}},
		{"peer pending", []corev1.Pod{pod("rx", "east@l", "n1", running, true, 0), pod("tx", "west@l", "", pending, false, 1)}, StatusPeerPending, "n1", [2]string{}},
		{"both pending", []corev1.Pod{pod("rx", "east@l", "", pending, false, 0), pod("tx", "west@l", "", pending, false, 1)}, StatusPending, "", [2]string{}},
		{"peer missing", []corev1.Pod{pod("rx", "east@l", "n1", running, true, 0)}, StatusPeerMissing, "n1", [2]string{}},
		{"wiring (sandbox not up)", []corev1.Pod{pod("rx", "east@l", "n1", running, true, 0), pod("tx", "west@l", "n1", pending, false, 1)}, StatusWiring, "n1", [2]string{}},
		{"split nodes", []corev1.Pod{pod("rx", "east@l", "n1", running, true, 0), pod("tx", "west@l", "n2", running, true, 1)}, StatusSplitNodes, "n1,n2", [2]string{}},
		{"ended", []corev1.Pod{pod("rx", "east@l", "n1", corev1.PodSucceeded, false, 0), pod("tx", "west@l", "n1", running, true, 1)}, StatusEnded, "n1", [2]string{}},
		{"conflict", []corev1.Pod{pod("a", "east@l", "n1", running, true, 0), pod("b", "west@l", "n1", running, true, 1),
			pod("c", "north@l", "n1", pending, false, 2)}, StatusConflict, "n1", [2]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := Links(tc.pods, nil)
			if len(ls) != 1 {
				t.Fatalf("%d links: %+v", len(ls), ls)
			}
			l := ls[0]
			if l.Status != tc.status || l.Node != tc.node || l.Name != "l" || l.Namespace != "ns" || l.Backend != BackendDevicePlugin {
				t.Errorf("link %+v, want status %s node %q", l, tc.status, tc.node)
			}
			if tc.roles != [2]string{} && (l.Ends[0].Role != tc.roles[0] || l.Ends[1].Role != tc.roles[1]) {
				t.Errorf("roles %q/%q, want %q", l.Ends[0].Role, l.Ends[1].Role, tc.roles)
			}
			if l.Ends[0].Pod != tc.pods[0].Name && tc.roles[0] != "server" {
				t.Errorf("ends %+v: the older pod comes first", l.Ends)
			}
		})
	}
}

func TestLinksHostPortsLabelsAndBadAnnotations(t *testing.T) {
	hp := pod("hp", "vswitch", "n1", corev1.PodRunning, true, 0)
	forged := pod("forged", "", "n1", corev1.PodRunning, true, 1)
	forged.Labels = map[string]string{"link.memifnet.io/l2": "x"}
	bad := pod("bad", `[{"name":"e","link":"l3","ringSize":1000}]`, "n1", corev1.PodRunning, false, 2)
	plain := pod("plain", "", "n1", corev1.PodRunning, true, 3)
	ls := Links([]corev1.Pod{hp, forged, bad, plain}, nil)
	if len(ls) != 2 {
		t.Fatalf("links %+v: want the host port and the labelled link (a bad annotation and a plain pod have none)", ls)
	}
	h, l := ls[0], ls[1]
	if !h.Host || h.Name != "" || h.Ends[0].Pod != "hp" || h.Ends[0].Role != "client" || h.Ends[1].Role != "server" || h.Status != StatusWired {
		t.Errorf("host port %+v", h)
	}
	if l.Name != "l2" || !l.Ends[0].LabelOnly || l.Ends[0].Port != "x" || l.Status != StatusPeerMissing {
		t.Errorf("label-only link %+v", l)
	}
}

func draClaim() resourceapi.ResourceClaim {
	data := func(port, role string) *runtime.RawExtension {
		return &runtime.RawExtension{Raw: []byte(`{"port":"` + port + `","role":"` + role + `","socket":"/run/memifnet/x/link/memif.sock","link":"dl"}`)}
	}
	ready := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Prepared"}}
	return resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "ns"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "east", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: SocketClass}},
			{Name: "west", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: SocketClass}},
			{Name: "mem", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "hugepool.memifnet.io"}},
		}}},
		Status: resourceapi.ResourceClaimStatus{
			Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "east", Driver: "memifnet.io", Pool: "n1", Device: "dra-slot-000"},
				{Request: "west", Driver: "memifnet.io", Pool: "n1", Device: "dra-slot-001"},
				{Request: "mem", Driver: "memifnet.io", Pool: "n1", Device: "drapool-n0-000"},
			}}},
			Devices: []resourceapi.AllocatedDeviceStatus{
				{Driver: "memifnet.io", Pool: "n1", Device: "dra-slot-000", Conditions: ready, Data: data("east", "server")},
				{Driver: "memifnet.io", Pool: "n1", Device: "dra-slot-001", Conditions: ready, Data: data("west", "client")},
			},
		},
	}
}

func claimPod(name, request, node string, sandbox bool) corev1.Pod {
	p := pod(name, "", node, corev1.PodRunning, sandbox, 0)
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "link", ResourceClaimName: ptr.To("c1")}}
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "link", Request: request}}}}}
	return p
}

func TestLinksDRA(t *testing.T) {
	c := draClaim()
	ls := Links([]corev1.Pod{claimPod("rx", "east", "n1", true), claimPod("tx", "west", "n1", true)}, []resourceapi.ResourceClaim{c})
	if len(ls) != 1 {
		t.Fatalf("links %+v", ls)
	}
	l := ls[0]
	if l.Backend != BackendDRA || l.Claim != "c1" || l.Name != "dl" || l.Status != StatusWired || l.Node != "n1" ||
		l.Ends[0].Pod != "rx" || l.Ends[0].Role != "server" || l.Ends[1].Pod != "tx" || l.Ends[1].Port != "west" {
		t.Errorf("DRA link %+v", l)
	}
	// Not prepared yet: allocated, the device reports no Ready condition.
	c.Status.Devices = nil
	ls = Links([]corev1.Pod{claimPod("rx", "east", "n1", true), claimPod("tx", "west", "n1", true)}, []resourceapi.ResourceClaim{c})
	if ls[0].Status != StatusWiring || ls[0].Ends[0].Role != "server" || ls[0].Ends[1].Role != "client" {
		t.Errorf("unprepared claim %+v", ls[0])
	}
	// Not allocated, one pod so far.
	c.Status = resourceapi.ResourceClaimStatus{}
	ls = Links([]corev1.Pod{claimPod("rx", "east", "", false)}, []resourceapi.ResourceClaim{c})
	if ls[0].Status != StatusPending || ls[0].Ends[1].Pod != "" {
		t.Errorf("unallocated claim %+v", ls[0])
	}
	// A claim of no memifnet socket is no link.
	other := resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: "ns"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "g", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}}}}}
	if ls := Links(nil, []resourceapi.ResourceClaim{other}); len(ls) != 0 {
		t.Errorf("a GPU claim became %+v", ls)
	}
}

// A DRA claim whose free-text link is named like a memif-cni link of its namespace (security
// row 39): two rows, each with its own two ends and status; neither is a Conflict or
// borrows the other's pods.
func TestLinksDRAAndCNIOfOneName(t *testing.T) {
	c := draClaim() // link "dl"
	pods := []corev1.Pod{claimPod("rx", "east", "n1", true), claimPod("tx", "west", "n1", true),
		pod("a", "east@dl", "n2", corev1.PodRunning, true, 2), pod("b", "west@dl", "n2", corev1.PodRunning, true, 3)}
	ls := Links(pods, []resourceapi.ResourceClaim{c})
	if len(ls) != 2 {
		t.Fatalf("links %+v, want the DRA link and memif-cni's", ls)
	}
	for _, l := range ls {
		want, ok := map[string][2]string{"c1": {"rx", "tx"}, "": {"a", "b"}}[l.Claim]
		if !ok {
			t.Fatalf("link of claim %q: %+v", l.Claim, l)
		}
		if l.Name != "dl" || l.Status != StatusWired || len(l.Ends) != 2 || l.Ends[0].Pod != want[0] || l.Ends[1].Pod != want[1] {
			t.Errorf("link %+v, want link dl wired between %v", l, want)
		}
	}
}
