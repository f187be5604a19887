package events

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
)

// TestTransitionsOneEventEach: a tracker's transitions between two drains (a unit withheld and
// refilled, a slot whose scrub failed and recovered, all before the consumer looks) are one
// Event each on the Node, in order, with the reasons kubectl-memifnet reads and messages that
// begin "unit <id> " or "device <id> " and say whose device it is.
func TestTransitionsOneEventEach(t *testing.T) {
	client := fake.NewClientset()
	rec := Recorder{Client: client, Node: "node-a", Component: "memifnet.io", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	tr := device.NewTracker(device.BackendDevicePlugin, rec.Log)
	tr.Add("memifnet.io/socket", []device.Unit{{ID: "slot-000"}})
	tr.Add("memifnet.io/hugepool", []device.Unit{{ID: "hugepool-n0-000"}})
	tr.Drain()
	tr.Scrubbed("hugepool-n0-000", fmt.Errorf("unit hugepool-n0-000 withheld: %w: held by pid 7", device.ErrWithheld))
	tr.Scrubbed("hugepool-n0-000", nil)
	tr.Scrubbed("slot-000", &device.ScrubError{ID: "slot-000", Err: errors.New("remove device-info: is a directory")})
	tr.Scrubbed("slot-000", &device.ScrubError{ID: "slot-000", Err: errors.New("remove device-info: is a directory")})
	tr.Scrubbed("slot-000", nil)
	rec.Transitions(context.Background(), tr.Drain())
	rec.Transitions(context.Background(), tr.Drain()) // nothing new: no Event

	l, err := client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ typ, reason, msg string }{
		{corev1.EventTypeWarning, ReasonUnitWithheld, "unit hugepool-n0-000 withheld: a previous tenant still holds its old file: held by pid 7"},
		{corev1.EventTypeNormal, ReasonUnitRefilled, "unit hugepool-n0-000 is back in service: its previous tenant let go of its old file"},
		{corev1.EventTypeWarning, ReasonScrubFailed, "device slot-000 (device plugin memifnet.io/socket) is out of service until a retried scrub works: scrub slot-000: remove device-info: is a directory"},
		{corev1.EventTypeNormal, ReasonRecovered, "device slot-000 (device plugin memifnet.io/socket) is back in service: a retried scrub worked"},
	}
	if len(l.Items) != len(want) {
		t.Fatalf("%d Events, want %d: %+v", len(l.Items), len(want), l.Items)
	}
	// The fake keeps Events by name, which is the node and a timestamp: order by message.
	got := map[string]corev1.Event{}
	for _, ev := range l.Items {
		got[ev.Message] = ev
	}
	for _, w := range want {
		ev, ok := got[w.msg]
		if !ok {
			t.Errorf("no Event %q", w.msg)
			continue
		}
		if ev.Type != w.typ || ev.Reason != w.reason || ev.InvolvedObject.Kind != "Node" || ev.InvolvedObject.Name != "node-a" {
			t.Errorf("Event %q: type %s reason %s on %s/%s", w.msg, ev.Type, ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name)
		}
	}
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
