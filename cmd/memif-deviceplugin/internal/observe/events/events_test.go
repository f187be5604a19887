package events

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
	"github.com/memifnet/memifnet/internal/testutil"
)

// TestTransitionsOneEventEach: a tracker's transitions between two drains (a unit withheld and
// refilled, a slot whose scrub failed and recovered, all before the consumer looks) are one
// Event each on the Node (events.k8s.io/v1, namespace default), with the reasons
// kubectl-memifnet reads and messages that begin "unit <id> " or "device <id> " and say whose
// device it is.
func TestTransitionsOneEventEach(t *testing.T) {
	client := fake.NewClientset()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec := NewRecorder(client, "node-a", "memifnet.io", log)
	defer rec.Shutdown()
	tr := device.NewTracker(device.BackendDevicePlugin, log)
	tr.Add("memifnet.io/socket", []device.Unit{{ID: "slot-000"}})
	tr.Add("memifnet.io/hugepool", []device.Unit{{ID: "hugepool-n0-000"}})
	tr.Drain()
	tr.Scrubbed("hugepool-n0-000", fmt.Errorf("unit hugepool-n0-000 withheld: %w: held by pid 7", device.ErrWithheld))
	tr.Scrubbed("hugepool-n0-000", nil)
	tr.Scrubbed("slot-000", &device.ScrubError{ID: "slot-000", Err: errors.New("remove device-info: is a directory")})
	tr.Scrubbed("slot-000", &device.ScrubError{ID: "slot-000", Err: errors.New("remove device-info: is a directory")})
	tr.Scrubbed("slot-000", nil)
	rec.Transitions(tr.Drain())
	rec.Transitions(tr.Drain()) // nothing new: no Event

	want := []struct{ typ, reason, msg string }{
		{corev1.EventTypeWarning, ReasonUnitWithheld, "unit hugepool-n0-000 withheld: a previous tenant still holds its old file: held by pid 7"},
		{corev1.EventTypeNormal, ReasonUnitRefilled, "unit hugepool-n0-000 is back in service: its previous tenant let go of its old file"},
		{corev1.EventTypeWarning, ReasonScrubFailed, "device slot-000 (device plugin memifnet.io/socket) is out of service until a retried scrub works: scrub slot-000: remove device-info: is a directory"},
		{corev1.EventTypeNormal, ReasonRecovered, "device slot-000 (device plugin memifnet.io/socket) is back in service: a retried scrub worked"},
	}
	got := awaitEvents(t, client, len(want))
	for _, w := range want {
		ev, ok := got[w.msg]
		if !ok {
			t.Errorf("no Event %q", w.msg)
			continue
		}
		if ev.Type != w.typ || ev.Reason != w.reason || ev.Regarding.Kind != "Node" || ev.Regarding.Name != "node-a" ||
			ev.Action == "" || ev.ReportingController != "memifnet.io" || ev.Series != nil {
			t.Errorf("Event %q: type %s reason %s action %q by %s on %s/%s, series %v", w.msg, ev.Type, ev.Reason, ev.Action,
				ev.ReportingController, ev.Regarding.Kind, ev.Regarding.Name, ev.Series)
		}
	}
}

// awaitEvents polls until the fake holds n Events in namespace default (the recorder sends in
// the background) and returns them by note; more than n fails.
func awaitEvents(t *testing.T, client *fake.Clientset, n int) map[string]eventsv1.Event {
	t.Helper()
	var items []eventsv1.Event
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("%d Events", n), func() bool {
		l, err := client.EventsV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		items = l.Items
		return len(items) >= n
	})
	if len(items) != n {
		t.Fatalf("%d Events, want %d: %+v", len(items), n, items)
	}
	got := map[string]eventsv1.Event{}
	for _, ev := range items {
		got[ev.Note] = ev
	}
	return got
}

// TestRepeatIsASeries: the same Event again (a device that flaps) is a series on the first
// object, not a second object: the library's aggregation, which the hand-made Events lacked.
func TestRepeatIsASeries(t *testing.T) {
	client := fake.NewClientset()
	rec := NewRecorder(client, "node-a", "memifnet.io", nil)
	defer rec.Shutdown()
	rec.Record(corev1.EventTypeWarning, ReasonScrubFailed, "device slot-000 (DRA) is out of service until a retried scrub works: x")
	awaitEvents(t, client, 1)
	rec.Record(corev1.EventTypeWarning, ReasonScrubFailed, "device slot-000 (DRA) is out of service until a retried scrub works: x")
	testutil.Eventually(t, 10*time.Second, "a series of 2", func() bool {
		for _, ev := range awaitEvents(t, client, 1) {
			return ev.Series != nil && ev.Series.Count == 2
		}
		return false
	})
}

// TestLongNoteTruncated: a message over the API server's 1024-byte note limit (a withheld unit's
// many holders) is cut at a rune boundary and marked, not refused and lost.
func TestLongNoteTruncated(t *testing.T) {
	client := fake.NewClientset()
	rec := NewRecorder(client, "node-a", "memifnet.io", nil)
	defer rec.Shutdown()
	long := "unit hugepool-n0-000 withheld: held by " + strings.Repeat("pid 7 (é), ", 200)
	rec.Record(corev1.EventTypeWarning, ReasonUnitWithheld, long)
	for note := range awaitEvents(t, client, 1) {
		if len(note) > noteLimit || !utf8.ValidString(note) || !strings.HasSuffix(note, " ...") || !strings.HasPrefix(long, strings.TrimSuffix(note, " ...")) {
			t.Errorf("note of %d bytes (valid UTF-8 %v): %q", len(note), utf8.ValidString(note), note)
		}
	}
	if got := truncate("short"); got != "short" {
		t.Errorf("truncate(short) = %q", got)
	}
}

// A nil client records nothing and does not panic.
func TestNilClient(t *testing.T) {
	rec := NewRecorder(nil, "node-a", "memifnet.io", nil)
	rec.Record(corev1.EventTypeNormal, ReasonRecovered, "x")
	rec.Transitions([]device.Transition{{Device: "slot-000"}})
	rec.Shutdown()
}

// TestDescribeSwitchAndDRA: a device that goes from one state out of service to the other says
// so in the Event of the state it left, and a DRA device names the DRA driver.
func TestDescribeSwitchAndDRA(t *testing.T) {
	typ, reason, msg := describe(device.Transition{Backend: device.BackendDRA, Device: "drapool-n0-000", State: device.Withheld, Then: device.ScrubFailed})
	if typ != corev1.EventTypeNormal || reason != ReasonUnitRefilled || msg != "unit drapool-n0-000 is no longer withheld, now scrub failed" {
		t.Errorf("switch: %s %s %q", typ, reason, msg)
	}
	_, reason, msg = describe(device.Transition{Backend: device.BackendDRA, Device: "dra-slot-001", State: device.ScrubFailed, Out: true, Err: errors.New("boom")})
	if reason != ReasonScrubFailed || !strings.HasPrefix(msg, "device dra-slot-001 (DRA) is out of service") {
		t.Errorf("DRA: %s %q", reason, msg)
	}
}
