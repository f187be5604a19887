package explain

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/memifnet/memifnet/cmd/memif-webhook/internal/podpolicy"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/testutil"
)

func linkPod(name, uid, link, node string, sockets string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + uid),
			Annotations: map[string]string{names.PortsAnnotation: "p@" + link},
			Labels:      map[string]string{podpolicy.LinkLabel(link): "p"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{names.SocketResource: resource.MustParse(sockets)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if node == "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
			Message: "0/2 nodes are available: 1 node(s) didn't match pod affinity rules"}}
	} else {
		p.Status.Phase = corev1.PodRunning
	}
	return p
}

func TestWhy(t *testing.T) {
	pod := linkPod("b", "1", "l1", "", "1")
	peers := []podpolicy.Peer{{Link: "l1", Namespace: "ns", Name: "a", Node: "n1"}, {Link: "l1", Namespace: "ns", Name: "b"}}
	got := Why(pod, 1, peers, map[string]Slots{"n1": {Found: true, Allocatable: 2, Used: 2}})
	want := "link l1: peer pod ns/a runs on node n1, which has 0 free memifnet.io/socket (2 allocatable, 2 in use); this pod needs 1 there"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if got := Why(pod, 1, peers, map[string]Slots{"n1": {Found: true, Allocatable: 2, Used: 1}}); len(got) != 0 {
		t.Fatalf("a node with room: %q", got)
	}
	if got := Why(pod, 1, peers, map[string]Slots{}); len(got) != 1 || !strings.Contains(got[0], "node n1, which does not exist") {
		t.Fatalf("a missing node: %q", got)
	}
}

// Pass records one Event per pod and reason, on the pod, and none for pods that are not stuck.
func TestPass(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{names.SocketResource: resource.MustParse("1")}}}
	cs := fake.NewClientset(node, linkPod("a", "1", "l1", "n1", "1"), linkPod("b", "2", "l1", "", "1"), linkPod("c", "3", "other", "", "1"))
	rec := record.NewFakeRecorder(10)
	e := &Explainer{Client: cs, Recorder: rec, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := e.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	close(rec.Events)
	var evs []string
	for ev := range rec.Events {
		evs = append(evs, ev)
	}
	want := "Warning LinkPeerNodeFull link l1: peer pod ns/a runs on node n1, which has 0 free memifnet.io/socket (1 allocatable, 1 in use); this pod needs 1 there"
	if len(evs) != 1 || evs[0] != want {
		t.Fatalf("events %q\nwant [%q]", evs, want)
	}
}

// The pending pods come from the informer: one LIST and one WATCH however many passes run (a LIST
// of every unplaced pod per pass before); only a stuck link pod costs requests per pass, its
// peers' LIST and its peer node's GET and pod LIST. A pod placed since leaves the cache and is no
// longer explained.
func TestInformerRequests(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{names.SocketResource: resource.MustParse("1")}}}
	unlinked := linkPod("u", "9", "x", "", "1")
	delete(unlinked.Annotations, names.PortsAnnotation)
	cs := fake.NewClientset(node, linkPod("a", "1", "l1", "n1", "1"), unlinked)
	rec := record.NewFakeRecorder(100)
	e := &Explainer{Client: cs, Recorder: rec, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	count := func() map[string]int {
		n := map[string]int{}
		for _, a := range cs.Actions() {
			n[a.GetVerb()+" "+a.GetResource().Resource]++
		}
		return n
	}
	const passes = 60 // five minutes at the default --interval
	for range passes {
		if err := e.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := count(), map[string]int{"list pods": 1, "watch pods": 1}; !maps.Equal(got, want) {
		t.Fatalf("%d passes without a stuck link pod: requests %v, want %v", passes, got, want)
	}
	for _, a := range cs.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok && l.GetListRestrictions().Fields.String() != PendingSelector {
			t.Fatalf("the informer lists pods with field selector %q, want %q", l.GetListRestrictions().Fields, PendingSelector)
		}
	}
	stuck := linkPod("b", "2", "l1", "", "1")
	if _, err := cs.CoreV1().Pods("ns").Create(ctx, stuck, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cached := func() bool { _, err := e.pending.Pods("ns").Get("b"); return err == nil }
	testutil.Eventually(t, 10*time.Second, "the informer sees the stuck pod", cached)
	testutil.Eventually(t, 10*time.Second, "the stuck link pod wakes the loop", func() bool {
		select {
		case <-e.stuck:
			return true
		default:
			return false
		}
	})
	for range passes {
		if err := e.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{"list pods": 1 + 2*passes, "watch pods": 1, "create pods": 1, "get nodes": passes}
	if got := count(); !maps.Equal(got, want) {
		t.Fatalf("%d passes with one stuck link pod: requests %v, want %v", passes, got, want)
	}
	if len(rec.Events) != 1 {
		t.Fatalf("%d Events for one stuck pod, want 1", len(rec.Events))
	}
	// Placed: the watch drops it from the cache (the fake filters no field selector: delete it).
	if err := cs.CoreV1().Pods("ns").Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the informer drops the placed pod", func() bool { return !cached() })
}
