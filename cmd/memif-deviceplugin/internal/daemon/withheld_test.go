package daemon

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/observe/events"
	"github.com/memifnet/memifnet/internal/testutil"
)

// healthWatch follows ListAndWatch and keeps the latest health of each device.
type healthWatch struct {
	mu     sync.Mutex
	health map[string]string
}

func watchHealth(t *testing.T, c pluginapi.DevicePluginClient) *healthWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	must(t, err)
	w := &healthWatch{health: map[string]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			r, err := s.Recv()
			if err != nil {
				return
			}
			w.mu.Lock()
			for _, d := range r.Devices {
				w.health[d.ID] = d.Health
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func (w *healthWatch) is(id, health string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.health[id] == health
}

func allocateErr(c pluginapi.DevicePluginClient, ids ...string) error {
	_, err := c.Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	return err
}

// TestHeldUnitsAreWithheld plays two pods that passed their units to processes that outlive
// them, over the real gRPC API. The first held unit is made again in the pool's headroom; the
// second is withheld: unhealthy in ListAndWatch, refused by Allocate with the reason, counted in
// the metrics, while the other units and the slots allocate. Once its holder exits, it is
// healthy again and allocates, a fresh file.
func TestHeldUnitsAreWithheld(t *testing.T) {
	testutil.NeedHugepages(t, 16)
	e := newEnv(t, 1)
	o := withPool(t, e.options(t, 2), 4<<20, 3)
	o.ReclaimGrace = time.Nanosecond
	d, _ := start(t, o)
	regs := registrations(t, e, 2)
	pool := e.kubelet.Dial(t, regs["memifnet.io/hugepool"].Endpoint)
	slotsC := e.kubelet.Dial(t, regs[socketRes].Endpoint)
	res := d.Resources()[1]
	eventually(t, 2*time.Second, "initial reclaim", func() bool { return res.Stats().Dirty == 0 })
	w := watchHealth(t, pool)
	// With an API client (the DRA driver's), the agent records Events about withheld units.
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		rec := events.NewRecorder(client, "node-a", "memifnet.io", nil)
		defer rec.Shutdown()
		d.reportDevices(ctx, rec)
	}()
	t.Cleanup(func() { cancel(); <-reported })

	// Two pods get a unit each and pass it on to processes that stay; then the pods are gone
	// (PodResources lists their units until then).
	e.kubelet.Hold("memifnet.io/hugepool", "hugepool-n0-000", "hugepool-n0-001")
	var holders []*testutil.Holder
	for i, id := range []string{"hugepool-n0-000", "hugepool-n0-001"} {
		resp := allocate(t, pool, []string{id})
		how := []string{testutil.HoldFD, testutil.HoldMapping}[i]
		holders = append(holders, testutil.HoldFile(t, resp.ContainerResponses[0].Mounts[0].HostPath, how))
	}
	e.kubelet.Hold("memifnet.io/hugepool")
	const held = "hugepool-n0-001" // background scrubs go in ID order: n0-000 takes the headroom
	eventually(t, 5*time.Second, "the held unit reported unhealthy", func() bool { return w.is(held, pluginapi.Unhealthy) })
	if err := allocateErr(pool, held); err == nil || !strings.Contains(err.Error(), "withheld") || !strings.Contains(err.Error(), held) {
		t.Errorf("Allocate of the withheld unit: %v, want a refusal naming it withheld", err)
	}
	if st := res.Stats(); st.Withheld != 1 {
		t.Errorf("stats %+v, want 1 withheld", st)
	}
	holder := fmt.Sprintf("pid %d", holders[1].Pid)
	eventually(t, 5*time.Second, "an Event naming the unit and its holder", func() bool {
		evs := nodeEvents(t, client, events.ReasonUnitWithheld)
		return len(evs) == 1 && strings.Contains(evs[0].Message, held) && strings.Contains(evs[0].Message, holder)
	})
	m := metricsText(t, d)
	for _, want := range []string{
		`memifnet_deviceplugin_devices_withheld{resource="memifnet.io/hugepool"} 1`,
		`memifnet_devices_out_of_service{backend="deviceplugin",resource="memifnet.io/hugepool",state="withheld"} 1`,
		`memifnet_device_scrub_errors_total{backend="deviceplugin",resource="memifnet.io/hugepool"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, m)
		}
	}
	eventually(t, 5*time.Second, "the other units reclaimed", func() bool { return res.Stats().Dirty == 1 })
	for _, ids := range [][]string{{"hugepool-n0-000"}, {"hugepool-n0-002"}} {
		if !w.is(ids[0], pluginapi.Healthy) {
			t.Errorf("%s is not healthy", ids[0])
		}
		allocate(t, pool, ids)
	}
	allocate(t, slotsC, []string{"slot-000", "slot-001"})

	holders[1].Release()
	eventually(t, 5*time.Second, "the unit healthy again after its holder exits", func() bool { return w.is(held, pluginapi.Healthy) })
	resp := allocate(t, pool, []string{held})
	if m := mapFile(t, resp.ContainerResponses[0].Mounts[0].HostPath, 4<<20); m[0] != 0 {
		t.Error("the refilled unit carries the holder's data")
	}
	if st := res.Stats(); st.Withheld != 0 {
		t.Errorf("stats %+v, want none withheld", st)
	}
	eventually(t, 5*time.Second, "an Event when the unit is back", func() bool {
		return len(nodeEvents(t, client, events.ReasonUnitRefilled)) == 1
	})
}

func nodeEvents(t *testing.T, c *fake.Clientset, reason string) []corev1.Event {
	t.Helper()
	// The recorder writes events.k8s.io/v1, which the fake keeps apart from core/v1's Events.
	l, err := c.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
	must(t, err)
	var out []corev1.Event
	for _, ev := range l.Items {
		if ev.Reason == reason && ev.Regarding.Kind == "Node" && ev.Regarding.Name == "node-a" {
			out = append(out, corev1.Event{Type: ev.Type, Reason: ev.Reason, Message: ev.Note, InvolvedObject: ev.Regarding})
		}
	}
	return out
}

func metricsText(t *testing.T, d *Daemon) string {
	t.Helper()
	rec := httptest.NewRecorder()
	d.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}
