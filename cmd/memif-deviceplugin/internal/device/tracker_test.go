package device

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newTracker(backend string) *Tracker {
	t := NewTracker(backend, quiet)
	t.Add("memifnet.io/socket", []Unit{{ID: "slot-000"}, {ID: "slot-001"}})
	t.Add("memifnet.io/hugepool", []Unit{{ID: "hugepool-n0-000"}})
	return t
}

func scrubErr(id, why string) error { return &ScrubError{ID: id, Err: errors.New(why)} }

func withheldErr(id string) error {
	return fmt.Errorf("unit %s withheld: %w: held by pid 7", id, ErrWithheld)
}

// brief is a transition as "device state out|back[>then]".
func brief(trs []Transition) []string {
	var out []string
	for _, tr := range trs {
		s := tr.Device + " " + string(tr.State) + " back"
		if tr.Out {
			s = tr.Device + " " + string(tr.State) + " out"
		}
		if tr.Then != "" {
			s += ">" + string(tr.Then)
		}
		out = append(out, s)
	}
	return out
}

func wantTransitions(t *testing.T, got []Transition, want ...string) {
	t.Helper()
	if g := strings.Join(brief(got), ", "); g != strings.Join(want, ", ") {
		t.Errorf("transitions %q, want %q", g, strings.Join(want, ", "))
	}
}

// TestScrubFailedOutOfServiceAndBack: a failed scrub takes the device out (one transition, one
// error), retries that fail again change nothing but the reason (no transition, no count), a
// scrub that works brings it back (one transition); then it can fail again (a second outage,
// counted).
func TestScrubFailedOutOfServiceAndBack(t *testing.T) {
	tr := newTracker(BackendDRA)
	wantTransitions(t, tr.Drain()) // the consumer starts: nothing out
	v0 := tr.Version()

	tr.Scrubbed("slot-001", nil) // in service already: nothing happens
	tr.Scrubbed("slot-001", scrubErr("slot-001", "remove device-info: is a directory"))
	if st, err := tr.State("slot-001"); st != ScrubFailed || !strings.Contains(err.Error(), "remove device-info") {
		t.Fatalf("state %q %v, want scrub_failed with the reason", st, err)
	}
	v1 := tr.Version()
	if v1 == v0 {
		t.Error("the version did not change at the transition")
	}
	for range 5 { // the periodic retries
		tr.Scrubbed("slot-001", scrubErr("slot-001", "still a directory"))
	}
	if tr.Version() != v1 {
		t.Error("the version changed at a retry that failed the same way")
	}
	if _, err := tr.State("slot-001"); !strings.Contains(err.Error(), "still a directory") {
		t.Errorf("reason %v, want the newest", err)
	}
	if f := tr.Out(ScrubFailed); len(f) != 1 || f["slot-001"] == nil {
		t.Errorf("out for a failed scrub: %v", f)
	}
	wantTransitions(t, tr.Drain(), "slot-001 scrub_failed out")
	wantTransitions(t, tr.Drain()) // drained: each transition once

	tr.Scrubbed("slot-001", nil)
	if st, err := tr.State("slot-001"); st != "" || err != nil {
		t.Errorf("after a scrub that worked: %q %v", st, err)
	}
	tr.Scrubbed("slot-001", scrubErr("slot-001", "again"))
	tr.Scrubbed("slot-001", nil)
	wantTransitions(t, tr.Drain(), "slot-001 scrub_failed back", "slot-001 scrub_failed out", "slot-001 scrub_failed back")
	if n := counts(tr)["memifnet.io/socket"]; n.Errors != 2 || n.Out[ScrubFailed] != 0 {
		t.Errorf("socket counts %+v, want 2 errors (one per outage), none out", n)
	}
}

// TestWithheldOutAndRefilled: a withheld unit is out as withheld (its pool's reason, naming the
// holder, is the transition's), a refill still refused changes nothing, a refill that works brings
// it back. A withheld unit is not a failed scrub: no error is counted.
func TestWithheldOutAndRefilled(t *testing.T) {
	tr := newTracker(BackendDevicePlugin)
	tr.Drain()
	tr.Scrubbed("hugepool-n0-000", withheldErr("hugepool-n0-000"))
	tr.Scrubbed("hugepool-n0-000", withheldErr("hugepool-n0-000"))
	got := tr.Drain()
	wantTransitions(t, got, "hugepool-n0-000 withheld out")
	if len(got) == 1 && (got[0].Resource != "memifnet.io/hugepool" || got[0].Backend != BackendDevicePlugin || !strings.Contains(got[0].Err.Error(), "pid 7")) {
		t.Errorf("transition %+v, want the unit's resource, backend and reason", got[0])
	}
	if w := tr.Out(Withheld); len(w) != 1 || len(tr.Out(ScrubFailed)) != 0 {
		t.Errorf("withheld %v, scrub failed %v", w, tr.Out(ScrubFailed))
	}
	tr.Scrubbed("hugepool-n0-000", nil)
	wantTransitions(t, tr.Drain(), "hugepool-n0-000 withheld back")
	if n := counts(tr)["memifnet.io/hugepool"]; n.Errors != 0 {
		t.Errorf("hugepool counts %+v, want no error for a withheld unit", n)
	}
}

// TestStateSwitch: a device out for one reason that goes out for the other leaves the first
// (saying which it entered) and enters the second; entering scrub_failed counts an error.
func TestStateSwitch(t *testing.T) {
	tr := newTracker(BackendDRA)
	tr.Drain()
	tr.Scrubbed("hugepool-n0-000", withheldErr("hugepool-n0-000"))
	tr.Fail("hugepool-n0-000", errors.New("refill: not a regular file"))
	tr.Scrubbed("hugepool-n0-000", withheldErr("hugepool-n0-000"))
	wantTransitions(t, tr.Drain(), "hugepool-n0-000 withheld out", "hugepool-n0-000 withheld back>scrub_failed",
		"hugepool-n0-000 scrub_failed out", "hugepool-n0-000 scrub_failed back>withheld", "hugepool-n0-000 withheld out")
	if n := counts(tr)["memifnet.io/hugepool"]; n.Errors != 1 || n.Out[Withheld] != 1 {
		t.Errorf("counts %+v, want 1 error, 1 withheld", n)
	}
}

// TestOtherErrorsCountedStateKept: an error that is neither withheld nor a failed scrub is
// counted at each scrub and leaves the state alone (the caller decides: Fail).
func TestOtherErrorsCountedStateKept(t *testing.T) {
	tr := newTracker(BackendDRA)
	tr.Drain()
	tr.Scrubbed("slot-000", errors.New("disk on fire"))
	tr.Scrubbed("slot-000", errors.New("disk on fire"))
	if st, _ := tr.State("slot-000"); st != "" {
		t.Errorf("state %q, want in service", st)
	}
	wantTransitions(t, tr.Drain())
	if n := counts(tr)["memifnet.io/socket"]; n.Errors != 2 {
		t.Errorf("counts %+v, want 2 errors", n)
	}
	tr.Fail("slot-000", errors.New("check after the scrub: gone"))
	tr.Fail("slot-000", errors.New("check after the scrub: gone"))
	wantTransitions(t, tr.Drain(), "slot-000 scrub_failed out")
	if n := counts(tr)["memifnet.io/socket"]; n.Errors != 3 {
		t.Errorf("counts %+v, want 3 errors", n)
	}
}

// TestFirstDrainReplaysOutages: transitions before anyone drains are not queued (no consumer, no
// growth), but the first Drain returns every device out of service then, as going out.
func TestFirstDrainReplaysOutages(t *testing.T) {
	tr := newTracker(BackendDevicePlugin)
	for range 100 {
		tr.Scrubbed("slot-001", scrubErr("slot-001", "x"))
		tr.Scrubbed("slot-001", nil)
	}
	tr.Withhold("hugepool-n0-000", withheldErr("hugepool-n0-000"))
	tr.Scrubbed("slot-000", scrubErr("slot-000", "y"))
	if len(tr.queue) != 0 {
		t.Fatalf("%d transitions queued with no consumer", len(tr.queue))
	}
	wantTransitions(t, tr.Drain(), "hugepool-n0-000 withheld out", "slot-000 scrub_failed out")
	tr.Scrubbed("slot-000", nil)
	wantTransitions(t, tr.Drain(), "slot-000 scrub_failed back")
}

// TestQueueBounded: a consumer that stopped draining keeps at most maxQueued transitions, the
// newest.
func TestQueueBounded(t *testing.T) {
	tr := newTracker(BackendDRA)
	tr.Drain()
	for range maxQueued {
		tr.Scrubbed("slot-000", scrubErr("slot-000", "x"))
		tr.Scrubbed("slot-000", nil)
	}
	got := tr.Drain()
	if len(got) != maxQueued || got[len(got)-1].Out || !got[0].Out {
		t.Errorf("%d transitions (first out %v, last out %v), want %d ending with the newest", len(got), got[0].Out, got[len(got)-1].Out, maxQueued)
	}
}

// TestConcurrentScrubs: scrubs of many devices from many goroutines (as Allocate, Reclaim and the
// health check do) make one transition per change, under -race.
func TestConcurrentScrubs(t *testing.T) {
	tr := NewTracker(BackendDRA, quiet)
	var units []Unit
	for i := range 16 {
		units = append(units, Unit{ID: fmt.Sprintf("slot-%03d", i)})
	}
	tr.Add("memifnet.io/socket", units)
	tr.Drain()
	var wg sync.WaitGroup
	for _, u := range units {
		for range 4 {
			wg.Go(func() { tr.Scrubbed(u.ID, scrubErr(u.ID, "x")) })
		}
	}
	wg.Wait()
	if got := tr.Drain(); len(got) != len(units) {
		t.Errorf("%d transitions, want %d (one per device)", len(got), len(units))
	}
	if n := counts(tr)["memifnet.io/socket"]; n.Errors != uint64(len(units)) || n.Out[ScrubFailed] != len(units) {
		t.Errorf("counts %+v", n)
	}
}

func counts(tr *Tracker) map[string]Counts {
	m := map[string]Counts{}
	for _, c := range tr.Counts() {
		m[c.Resource] = c
	}
	return m
}

// TestCollector: the out-of-service families per backend, resource and state, every series
// present at 0, a device counted in its backend alone.
func TestCollector(t *testing.T) {
	dp, dra := newTracker(BackendDevicePlugin), NewTracker(BackendDRA, quiet)
	dra.Add("memifnet.io/socket", []Unit{{ID: "dra-slot-000"}, {ID: "dra-slot-001"}})
	dra.Add("memifnet.io/drapool", []Unit{{ID: "drapool-n0-000"}})
	dp.Scrubbed("hugepool-n0-000", withheldErr("hugepool-n0-000"))
	dp.Scrubbed("slot-000", scrubErr("slot-000", "x"))
	dp.Scrubbed("slot-000", nil)
	dra.Scrubbed("dra-slot-000", scrubErr("dra-slot-000", "x"))
	dra.Scrubbed("dra-slot-001", scrubErr("dra-slot-001", "x"))
	dra.Scrubbed("drapool-n0-000", withheldErr("drapool-n0-000"))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(Collector{Trackers: func() []*Tracker { return []*Tracker{dp, dra} }})
	want := `
# HELP memifnet_device_scrub_errors_total Failed scrubs, by backend and resource: a device out of service counts once, not at every retry; a withheld unit is not an error.
# TYPE memifnet_device_scrub_errors_total counter
memifnet_device_scrub_errors_total{backend="deviceplugin",resource="memifnet.io/hugepool"} 0
memifnet_device_scrub_errors_total{backend="deviceplugin",resource="memifnet.io/socket"} 1
memifnet_device_scrub_errors_total{backend="dra",resource="memifnet.io/drapool"} 0
memifnet_device_scrub_errors_total{backend="dra",resource="memifnet.io/socket"} 2
# HELP memifnet_devices_out_of_service Devices out of service, by backend (deviceplugin, dra), resource and state (withheld: a previous tenant holds its old file; scrub_failed: until a retried scrub works).
# TYPE memifnet_devices_out_of_service gauge
memifnet_devices_out_of_service{backend="deviceplugin",resource="memifnet.io/hugepool",state="scrub_failed"} 0
memifnet_devices_out_of_service{backend="deviceplugin",resource="memifnet.io/hugepool",state="withheld"} 1
memifnet_devices_out_of_service{backend="deviceplugin",resource="memifnet.io/socket",state="scrub_failed"} 0
memifnet_devices_out_of_service{backend="deviceplugin",resource="memifnet.io/socket",state="withheld"} 0
memifnet_devices_out_of_service{backend="dra",resource="memifnet.io/drapool",state="scrub_failed"} 0
memifnet_devices_out_of_service{backend="dra",resource="memifnet.io/drapool",state="withheld"} 1
memifnet_devices_out_of_service{backend="dra",resource="memifnet.io/socket",state="scrub_failed"} 2
memifnet_devices_out_of_service{backend="dra",resource="memifnet.io/socket",state="withheld"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
