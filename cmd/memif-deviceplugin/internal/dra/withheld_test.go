package dra

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/config"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device/pools"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/observe/events"
	"github.com/memifnet/memifnet/internal/testutil"
)

// withRealPool gives the driver a hugetlbfs pool of n 4Mi units.
func withRealPool(t *testing.T, e *env, n int) *pools.Provider {
	t.Helper()
	testutil.NeedHugepages(t, 2*(n+1))
	pc := config.Pool{Name: "drapool", PageSize: config.Quantity{Bytes: 2 << 20}, UnitSize: config.Quantity{Bytes: 4 << 20}, UnitsPerNUMANode: n}
	p, err := pools.New(e.state, pc, []int{0}, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Unmount() })
	e.pool = p
	return p
}

// publisher records what the plugin publishes.
type publisher struct {
	mu   sync.Mutex
	last resourceslice.DriverResources
	n    int
}

func (p *publisher) publish(_ context.Context, r resourceslice.DriverResources) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last, p.n = r, p.n+1
	return nil
}

func (p *publisher) has(device string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slicesHave(p.last, device)
}

func slicesHave(r resourceslice.DriverResources, device string) bool {
	for _, pool := range r.Pools {
		for _, s := range pool.Slices {
			for _, d := range s.Devices {
				if d.Name == device {
					return true
				}
			}
		}
	}
	return false
}

// eventsOf is the Events of reason on the node, as kubectl reads them through core/v1 (the fake
// client keeps the events.k8s.io/v1 objects the recorder writes apart: they are converted here).
func eventsOf(t *testing.T, c *fake.Clientset, reason string) []corev1.Event {
	t.Helper()
	l, err := c.EventsV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, ev := range l.Items {
		if ev.Reason == reason {
			out = append(out, corev1.Event{Type: ev.Type, Reason: ev.Reason, Message: ev.Note, InvolvedObject: ev.Regarding})
		}
	}
	return out
}

// awaitEvents is eventsOf once there is one (the recorder sends in the background).
func awaitEvents(t *testing.T, c *fake.Clientset, reason string) []corev1.Event {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, "an Event "+reason, func() bool { return len(eventsOf(t, c, reason)) > 0 })
	return eventsOf(t, c, reason)
}

// recorder is the driver's Event recorder on the fake client, shut down at the test's end.
func recorder(t *testing.T, c *fake.Clientset, log *slog.Logger) *events.Recorder {
	r := events.NewRecorder(c, testNode, "memifnet.io", log)
	t.Cleanup(r.Shutdown)
	return r
}

// TestUnprepareWithHeldUnits plays two pods whose claims each had a hugepage unit, passed on to
// processes that stay. The first held unit is made again in the pool's headroom; the second is
// withheld. Unprepare completes all the same and frees both claims' slots; the withheld unit
// leaves the ResourceSlices (an Event on the node names it and its holder) and a claim that still
// names it is refused at Prepare, while the next claims get the freed slots and the other units.
// Once the holder exits, the unit is back in the slices and prepares.
func TestUnprepareWithHeldUnits(t *testing.T) {
	e := newEnv(t)
	withRealPool(t, e, 3)
	d := e.deviceState(t)
	client := fake.NewClientset()
	pub := &publisher{}
	p := &Driver{state: d, client: client, log: d.opts.Log, publish: pub.publish, events: recorder(t, client, d.opts.Log)}
	if err := p.publishUnits(context.Background()); err != nil {
		t.Fatal(err)
	}
	const held = "drapool-n0-001"
	a := claim("uid-a", "a", []alloc{{"port", "dra-slot-000"}, {"mem", "drapool-n0-000"}})
	b := claim("uid-b", "b", []alloc{{"port", "dra-slot-001"}, {"mem", held}})
	var holders []*testutil.Holder
	for _, c := range []*resourceapi.ResourceClaim{a, b} {
		if _, err := d.Prepare(c); err != nil {
			t.Fatal(err)
		}
		unit := c.Status.Allocation.Devices.Results[1].Device
		holders = append(holders, testutil.HoldFile(t, e.pool.Path(unit), testutil.HoldMapping))
	}
	un, err := p.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: "uid-a"}, {UID: "uid-b"}})
	if err != nil || un["uid-a"] != nil || un["uid-b"] != nil {
		t.Fatalf("unprepare with held units: %v %v", err, un)
	}
	if c := d.Prepared(); len(c) != 0 {
		t.Fatalf("claims still prepared after Unprepare: %+v", c)
	}
	if pub.has(held) || !pub.has("drapool-n0-000") || !pub.has("drapool-n0-002") {
		t.Errorf("published slices: withheld unit present %v, others %v %v; want it alone left out",
			pub.has(held), pub.has("drapool-n0-000"), pub.has("drapool-n0-002"))
	}
	evs := awaitEvents(t, client, events.ReasonUnitWithheld)
	if len(evs) != 1 || !strings.Contains(evs[0].Message, held) || evs[0].InvolvedObject.Kind != "Node" || evs[0].InvolvedObject.Name != testNode {
		t.Errorf("withheld events: %+v", evs)
	} else if pid := "pid " + strconv.Itoa(holders[1].Pid); !strings.Contains(evs[0].Message, pid) {
		t.Errorf("the event does not name the holder (%s): %s", pid, evs[0].Message)
	}

	// The next claims get the freed slots and the other units.
	for _, c := range []*resourceapi.ResourceClaim{
		claim("uid-c", "c", []alloc{{"port", "dra-slot-001"}, {"mem", "drapool-n0-002"}}),
		claim("uid-e", "e", []alloc{{"port", "dra-slot-000"}, {"mem", "drapool-n0-000"}}),
	} {
		if _, err := d.Prepare(c); err != nil {
			t.Fatalf("a next claim: %v", err)
		}
	}
	late := claim("uid-d", "d", []alloc{{"port", "dra-slot-002"}, {"mem", held}}) // allocated before the slices changed
	if _, err := d.Prepare(late); err == nil || !strings.Contains(err.Error(), "withheld") {
		t.Fatalf("Prepare of a claim with the withheld unit: %v, want a refusal naming it withheld", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.WatchUnits(ctx, 20*time.Millisecond)
	holders[1].Release()
	testutil.Eventually(t, 5*time.Second, "the unit back in the slices with an Event after its holder's exit", func() bool {
		return pub.has(held) && len(eventsOf(t, client, events.ReasonUnitRefilled)) > 0
	})
	if evs := eventsOf(t, client, events.ReasonUnitRefilled); len(evs) != 1 || !strings.Contains(evs[0].Message, held) {
		t.Errorf("refilled events: %+v", evs)
	}
	if _, err := d.Prepare(late); err != nil {
		t.Fatalf("Prepare after the unit came back: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(e.pool.Path(held), &st); err != nil || st.Size != 4<<20 {
		t.Errorf("the unit after it came back: size %d, %v", st.Size, err)
	}
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))
