package dra

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/pkg/memif/portstatus"
)

func writeStatus(t *testing.T, e *env, slot string, s portstatus.Status) {
	t.Helper()
	b, err := portstatus.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.slots.Dir(slot), portstatus.File), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func updates(c *fake.Clientset) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// TestLinkReadyCondition: each socket device of a prepared link claim gets a LinkReady
// condition beside Ready: True while its port's status file says up, False with the reason
// when down, Unknown without a status file; the claim is written only when a condition changes.
func TestLinkReadyCondition(t *testing.T) {
	e := newEnv(t)
	d := e.deviceState(t)
	c := claim("uid-l", "link", linkAllocs)
	client := fake.NewClientset(c)
	p := &Driver{state: d, client: client, log: d.opts.Log}
	ctx := context.Background()
	if res, err := p.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{c}); err != nil || res["uid-l"].Err != nil {
		t.Fatalf("prepare: %v %v", err, res["uid-l"].Err)
	}
	up := portstatus.Status{Version: portstatus.Version, Port: "east", State: portstatus.StateUp, Time: time.Now(), IntervalSeconds: 5, LinkUps: 1}
	writeStatus(t, e, "dra-slot-000", up)
	reported := map[string]metav1.Condition{}
	p.SyncLinks(ctx, reported)
	check := func(dev int, status metav1.ConditionStatus, reason, msg string) {
		t.Helper()
		got, err := client.ResourceV1().ResourceClaims("ns1").Get(ctx, "link", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds := got.Status.Devices[dev].Conditions
		if r := meta.FindStatusCondition(conds, "Ready"); r == nil || r.Status != metav1.ConditionTrue {
			t.Errorf("device %d: Ready lost: %+v", dev, conds)
		}
		l := meta.FindStatusCondition(conds, ConditionLinkReady)
		if l == nil || l.Status != status || l.Reason != reason || !strings.Contains(l.Message, msg) {
			t.Fatalf("device %d: LinkReady %+v, want %s %s (%q)", dev, l, status, reason, msg)
		}
	}
	check(0, metav1.ConditionTrue, ReasonLinkUp, "connected")
	check(1, metav1.ConditionUnknown, ReasonNoStatus, "no status file")
	n := updates(client)
	p.SyncLinks(ctx, reported)
	if updates(client) != n {
		t.Fatalf("an unchanged link state was written again")
	}
	down := up
	down.State, down.LinkDowns, down.LastDownReason, down.LastDownMessage = portstatus.StateDown, 1, portstatus.ReasonPeer, "peer went away"
	writeStatus(t, e, "dra-slot-000", down)
	p.SyncLinks(ctx, reported)
	check(0, metav1.ConditionFalse, ReasonLinkDown, "peer: peer went away")
	if err := os.Symlink("/etc/passwd", filepath.Join(e.slots.Dir("dra-slot-001"), portstatus.File)); err != nil {
		t.Fatal(err)
	}
	p.SyncLinks(ctx, reported)
	check(1, metav1.ConditionUnknown, ReasonBadStatusFile, "refused")
}

// TestPorts: the per-port metrics get every prepared socket device with its claim's
// namespace, name, port and link, in its slot (the claim keys a DRA link apart from memif-cni's
// link of the same name: security row 39).
func TestPorts(t *testing.T) {
	e := newEnv(t)
	d := e.deviceState(t)
	c := claim("uid-p", "link", linkAllocs)
	p := &Driver{state: d, client: fake.NewClientset(c), log: d.opts.Log}
	if res, err := p.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c}); err != nil || res["uid-p"].Err != nil {
		t.Fatalf("prepare: %v %v", err, res["uid-p"].Err)
	}
	got := p.Ports()
	if len(got) != 2 || got[0].Namespace != "ns1" || got[0].Port != "east" || got[0].Slot != "dra-slot-000" ||
		got[1].Port != "west" || got[1].Slot != "dra-slot-001" || got[0].Link == "" || got[0].Link != got[1].Link ||
		got[0].Claim != c.Name || got[1].Claim != c.Name {
		t.Fatalf("ports %+v", got)
	}
}

// TestLinkReadyWithLeasedStatusFile: a pod holds a write lease on its status file (another
// process, never giving it up); the link sync still ends within a bound, that device's
// LinkReady says its file is unreadable and the other device's link state is reported.
func TestLinkReadyWithLeasedStatusFile(t *testing.T) {
	e := newEnv(t)
	d := e.deviceState(t)
	c := claim("uid-l", "link", linkAllocs)
	client := fake.NewClientset(c)
	p := &Driver{state: d, client: client, log: d.opts.Log}
	ctx := context.Background()
	if res, err := p.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{c}); err != nil || res["uid-l"].Err != nil {
		t.Fatalf("prepare: %v %v", err, res["uid-l"].Err)
	}
	up := portstatus.Status{Version: portstatus.Version, Port: "east", State: portstatus.StateUp, Time: time.Now(), IntervalSeconds: 5, LinkUps: 1}
	writeStatus(t, e, "dra-slot-000", up)
	up.Port = "west"
	writeStatus(t, e, "dra-slot-001", up)
	testutil.HoldFile(t, filepath.Join(e.slots.Dir("dra-slot-000"), portstatus.File), testutil.HoldLease)
	done := make(chan struct{})
	go func() { p.SyncLinks(ctx, map[string]metav1.Condition{}); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the link sync is still going after 5 s with one status file leased")
	}
	got, err := client.ResourceV1().ResourceClaims("ns1").Get(ctx, "link", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ reason, msg string }{{ReasonBadStatusFile, "unreadable"}, {ReasonLinkUp, "connected"}}
	for i, w := range want {
		l := meta.FindStatusCondition(got.Status.Devices[i].Conditions, ConditionLinkReady)
		if l == nil || l.Reason != w.reason || !strings.Contains(l.Message, w.msg) {
			t.Fatalf("device %d: LinkReady %+v, want %s (%q)", i, l, w.reason, w.msg)
		}
	}
}
