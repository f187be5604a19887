package explain

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/agentmetrics"
)

func mkPod(name, ann, node string, phase corev1.PodPhase, sandbox bool, schedMsg string) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: phase},
	}
	if ann != "" {
		p.Annotations = map[string]string{"memifnet.io/ports": ann}
	}
	if node == "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: schedMsg}}
	} else {
		st := corev1.ConditionFalse
		if sandbox {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReadyToStartContainers, Status: st}}
	}
	return p
}

func event(pod *corev1.Pod, reason, msg string, at int64) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: pod.Name + "." + reason, Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Reason:         reason, Message: msg, Type: corev1.EventTypeWarning,
		LastTimestamp: metav1.NewTime(time.Unix(at, 0)),
	}
}

const (
	noSlotMsg   = "0/1 nodes are available: 1 Insufficient memifnet.io/socket. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
	affinityMsg = "0/2 nodes are available: 1 Insufficient memifnet.io/socket, 1 node(s) didn't match pod affinity rules."
	conflictEv  = `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "ab": plugin type="memif-cni" name="k8s-pod-network" failed (add): memif-cni: link conflict; pod ns/c port 0 (north): field "link": link "l" already joins pods a and b`
	nodeFullEv  = "link l: peer pod ns/a runs on node n1, which has 0 free memifnet.io/socket (64 allocatable, 64 in use); this pod needs 1 there"
)

func reasons(fs []Finding) string {
	var rs []string
	for _, f := range fs {
		rs = append(rs, f.Reason)
	}
	return strings.Join(rs, ",")
}

func TestExplain(t *testing.T) {
	R, P := corev1.PodRunning, corev1.PodPending
	a := mkPod("a", "east@l", "n1", R, true, "")
	b := mkPod("b", "west@l", "n1", R, true, "")
	bPending := mkPod("b", "west@l", "", P, false, noSlotMsg)
	c := mkPod("c", "north@l", "n1", P, false, "")
	cAffinity := mkPod("c", "north@l", "", P, false, affinityMsg)
	aFar := mkPod("a", "east@l", "n2", R, true, "")
	ended := mkPod("a", "east@l", "n1", corev1.PodFailed, false, "")
	ended.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "perf", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}}}
	up := &agentmetrics.Snapshot{Ports: map[agentmetrics.Key]agentmetrics.Counters{{Namespace: "ns", Pod: "a", Port: "east"}: {HasUp: true, Up: true, RxPackets: 42}}}
	down := &agentmetrics.Snapshot{Ports: map[agentmetrics.Key]agentmetrics.Counters{{Namespace: "ns", Pod: "a", Port: "east"}: {HasUp: true}}}
	forbidden := errors.New(`events is forbidden: User "system:serviceaccount:ns:v" cannot list resource "events"`)
	for _, tc := range []struct {
		name     string
		in       Input
		want     string // reasons in order
		contains string // in the first finding's message
	}{
		{"no slot", Input{Pod: &bPending, Pods: []corev1.Pod{a, bPending}}, "NoSlot", "Insufficient memifnet.io/socket"},
		{"peer pending", Input{Pod: &a, Pods: []corev1.Pod{a, bPending}}, "PeerPending", "peer pod b is Pending: 0/1 nodes are available: 1 Insufficient memifnet.io/socket"},
		{"peer missing", Input{Pod: &a, Pods: []corev1.Pod{a}}, "PeerMissing", "no other pod in namespace ns names this link"},
		{"cni refusal and conflict", Input{Pod: &c, Pods: []corev1.Pod{a, b, c}, Events: []corev1.Event{
			event(&c, "Scheduled", "Successfully assigned ns/c to n1", 1), event(&c, EventSandboxFailed, conflictEv, 2)}},
			"LinkConflict,CNIRefused", "2 other pods name this link (a, b)"},
		{"webhook event", Input{Pod: &cAffinity, Pods: []corev1.Pod{a, cAffinity}, Events: []corev1.Event{
			event(&cAffinity, EventLinkPeerNodeFull, nodeFullEv, 5), event(&cAffinity, EventLinkPeerNodeFull, nodeFullEv, 9)}},
			"PeerAffinity,LinkPeerNodeFull", "must run on its link peer's node"},
		{"split nodes", Input{Pod: &b, Pods: []corev1.Pod{aFar, b}}, "SplitNodes", "peer pod a runs on node n2, this pod on n1"},
		{"wired, state unknown", Input{Pod: &a, Pods: []corev1.Pod{a, b}, MetricsErr: errors.New("no per-port metrics")}, "Wired,StateUnknown", "node n1 with its port(s) east wired"},
		{"up", Input{Pod: &a, Pods: []corev1.Pod{a, b}, Metrics: up}, "Wired,LinkUp", ""},
		{"down", Input{Pod: &a, Pods: []corev1.Pod{a, b}, Metrics: down}, "Wired,LinkDown", ""},
		{"events forbidden", Input{Pod: &c, Pods: []corev1.Pod{a, c}, EventsErr: forbidden}, "EventsUnreadable,Wiring", "cannot read the pod's Events"},
		{"ended", Input{Pod: &ended, Pods: []corev1.Pod{ended, b}}, "Ended", "Failed (container perf: Error, exit code 1)"},
		{"peer ended", Input{Pod: &b, Pods: []corev1.Pod{ended, b}}, "PeerEnded", "peer pod a has ended"},
		{"bad annotation", Input{Pod: ptr.To(mkPod("x", `[{"name":"e","link":"l","ringSize":1000}]`, "n1", R, false, ""))}, "BadAnnotation", `"ringSize": 1000 must be a power of two`},
		{"no memif ports", Input{Pod: ptr.To(mkPod("x", "", "n1", R, true, ""))}, "NoMemifPorts", "asks for no memif port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := Explain(tc.in)
			if got := reasons(fs); got != tc.want {
				t.Fatalf("reasons %s, want %s: %+v", got, tc.want, fs)
			}
			if !strings.Contains(fs[0].Message, tc.contains) {
				t.Errorf("%q does not say %q", fs[0].Message, tc.contains)
			}
		})
	}
}

func TestExplainCNIRefusalCode(t *testing.T) {
	c := mkPod("c", "north@l", "n1", corev1.PodPending, false, "")
	fs := Explain(Input{Pod: &c, Pods: []corev1.Pod{c, mkPod("a", "east@l", "n1", corev1.PodRunning, true, "")},
		Events: []corev1.Event{event(&c, EventSandboxFailed, conflictEv, 2)}})
	f := fs[len(fs)-1]
	if f.Reason != ReasonCNIRefused || f.CNI == nil || f.CNI.Code != 102 || !strings.Contains(f.Message, "code 102: link conflict: pod ns/c port 0 (north)") {
		t.Errorf("%+v", fs)
	}
}

func TestExplainDRA(t *testing.T) {
	claim := resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "cl", Namespace: "ns"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "east", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "socket.memifnet.io"}},
			{Name: "west", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "socket.memifnet.io"}}}}},
	}
	user := func(p corev1.Pod, req string) corev1.Pod {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "link", ResourceClaimName: ptr.To("cl")}}
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "link", Request: req}}}}}
		return p
	}
	rx := user(mkPod("rx", "", "", corev1.PodPending, false, "0/1 nodes are available: 1 cannot allocate all claims."), "east")
	fs := Explain(Input{Pod: &rx, Pods: []corev1.Pod{rx}, Claims: []resourceapi.ResourceClaim{claim}})
	if reasons(fs) != "NoDevice,PeerMissing" || !strings.Contains(fs[1].Message, "no pod uses request west") {
		t.Errorf("%+v", fs)
	}
	fs = Explain(Input{Pod: &rx, Pods: []corev1.Pod{rx}, Claims: nil})
	if reasons(fs) != "NoDevice,ClaimMissing" {
		t.Errorf("claim missing: %+v", fs)
	}
	bound := user(mkPod("rx", "", "n1", corev1.PodPending, false, ""), "east")
	tx := user(mkPod("tx", "", "n1", corev1.PodPending, false, ""), "west")
	fs = Explain(Input{Pod: &bound, Pods: []corev1.Pod{bound, tx}, Claims: []resourceapi.ResourceClaim{claim},
		Events: []corev1.Event{event(&bound, EventDRAPrepare, `Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for ResourceClaim cl: claim ns/cl: request west: field "ringSize": 1000 must be a power of two`, 3)}})
	if reasons(fs) != "DRAPrepareFailed" || !strings.Contains(fs[0].Message, `request west: field "ringSize"`) {
		t.Errorf("prepare failed: %+v", fs)
	}
}
