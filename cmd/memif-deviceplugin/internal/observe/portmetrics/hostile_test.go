package portmetrics

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/pkg/memif/portstatus"
)

// TestHostileStatusFiles plays what a pod can put at <slot>/status.json: each read returns (no
// hang on a FIFO, no read past the limit, nothing followed out of the slot), gives no status and
// a reason, and the bad files are counted in memifnet_port_status_errors_total; the good port
// beside them is still exported.
func TestHostileStatusFiles(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.json") // a valid status file outside the slot
	cases := []struct {
		name, reason string
		plant        func(path string) error
	}{
		{"symlink out of the slot", ReasonRefused, func(p string) error {
			b, _ := portstatus.Marshal(status("p0", portstatus.StateUp, 1))
			if err := os.WriteFile(secret, b, 0o600); err != nil {
				return err
			}
			return os.Symlink(secret, p)
		}},
		{"FIFO no one writes", ReasonRefused, func(p string) error { return unix.Mkfifo(p, 0o666) }},
		{"directory", ReasonRefused, func(p string) error { return os.Mkdir(p, 0o755) }},
		{"1 MiB file", ReasonRefused, func(p string) error { return os.WriteFile(p, bytes.Repeat([]byte(" "), 1<<20), 0o644) }},
		{"sparse 1 TiB file", ReasonRefused, func(p string) error {
			f, err := os.Create(p)
			if err == nil {
				err = f.Truncate(1 << 40)
				f.Close()
			}
			return err
		}},
		{"not JSON", ReasonInvalid, func(p string) error { return os.WriteFile(p, []byte("\x00\xff{"), 0o644) }},
		{"unknown field", ReasonInvalid, func(p string) error {
			return os.WriteFile(p, []byte(`{"version":"1","port":"p0","state":"up","time":"2026-12-03T22:00:00Z","intervalSeconds":5,"rx":{},"tx":{},"evil":1}`), 0o644)
		}},
		{"another port's name", ReasonInvalid, func(p string) error {
			b, _ := portstatus.Marshal(status("p1", portstatus.StateUp, 1))
			return os.WriteFile(p, b, 0o644)
		}},
		{"unbounded reason", ReasonInvalid, func(p string) error {
			return os.WriteFile(p, []byte(`{"version":"1","port":"p0","state":"down","time":"2026-12-03T22:00:00Z","intervalSeconds":5,"lastDownReason":"x`+strings.Repeat("y", 100)+`","rx":{},"tx":{}}`), 0o644)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, "slot-000", "slot-001")
			now := start
			c, reg := collector(n, pair, &now)
			n.write("slot-001", status("p0", portstatus.StateUp, 5))
			if err := tc.plant(n.path("slot-000")); err != nil {
				t.Fatal(err)
			}
			done := make(chan []Reading)
			go func() { done <- c.Readings() }()
			var rs []Reading
			select {
			case rs = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("reading the status files hangs")
			}
			if rs[0].Reason != tc.reason || rs[0].Err == nil {
				t.Fatalf("reason %q (%v), want %q and an error", rs[0].Reason, rs[0].Err, tc.reason)
			}
			if !rs[1].Up() {
				t.Fatalf("the good port beside it: %+v", rs[1])
			}
			if got := promtest.ToFloat64(c.errors.WithLabelValues(tc.reason)); got != 1 {
				t.Fatalf("errors{reason=%q} = %v, want 1", tc.reason, got)
			}
			if got := promtest.CollectAndCount(c, "memifnet_port_up"); got != 1 {
				t.Fatalf("%d memifnet_port_up series, want the good port's only", got)
			}
			if got, err := promtest.GatherAndCount(reg, "memifnet_link_up"); err != nil || got != 1 {
				t.Fatalf("link_up series %d, %v", got, err)
			}
		})
	}
}

// TestSlotNotMounted: a slot that is not the agent's mount (the records name a slot that is
// gone, or was replaced by a plain directory) is not read at all.
func TestSlotNotMounted(t *testing.T) {
	n := newNode(t, "slot-000")
	if err := os.Mkdir(filepath.Join(n.slotsDir, "slot-001"), 0o777); err != nil {
		t.Fatal(err)
	}
	n.write("slot-001", status("p0", portstatus.StateUp, 5))
	rs := Read(n.slotsDir, pair[1], start)
	if rs.Reason != ReasonUnreadable {
		t.Fatalf("reason %q (%v), want %q", rs.Reason, rs.Err, ReasonUnreadable)
	}
	if r := Read(n.slotsDir, pair[0], start); r.Reason != ReasonMissing || r.Err != nil {
		t.Fatalf("no file: reason %q, err %v; want %q and no error", r.Reason, r.Err, ReasonMissing)
	}
}

// leaseBound is how long a pass may take with a leased status file among the others: far
// under the kernel's lease-break-time (45 s), for which the old reader retried the open.
const leaseBound = 5 * time.Second

// TestLeasedStatusFile: a pod takes a write lease on its own status file (another process,
// as the pod is) and never gives it up. The agent's open fails EWOULDBLOCK; the pass still
// ends within leaseBound, the leased file counts as unreadable, and the other port is exported.
func TestLeasedStatusFile(t *testing.T) {
	n := newNode(t, "slot-000", "slot-001")
	now := start
	c, reg := collector(n, pair, &now)
	n.write("slot-000", status("p0", portstatus.StateUp, 5))
	n.write("slot-001", status("p0", portstatus.StateUp, 5))
	testutil.HoldFile(t, n.path("slot-000"), testutil.HoldLease)
	for pass := range 2 {
		began := time.Now()
		done := make(chan []Reading, 1)
		go func() { done <- c.Readings() }()
		var rs []Reading
		select {
		case rs = <-done:
		case <-time.After(leaseBound):
			t.Fatalf("pass %d: reading the status files with one leased is still going after %v", pass, leaseBound)
		}
		t.Logf("pass %d took %v", pass, time.Since(began))
		if rs[0].Reason != ReasonUnreadable || !errors.Is(rs[0].Err, unix.EWOULDBLOCK) {
			t.Fatalf("leased file: reason %q (%v), want %q and EWOULDBLOCK", rs[0].Reason, rs[0].Err, ReasonUnreadable)
		}
		if !rs[1].Up() {
			t.Fatalf("the good port beside it: %+v", rs[1])
		}
		if got := promtest.ToFloat64(c.errors.WithLabelValues(ReasonUnreadable)); got != float64(pass+1) {
			t.Fatalf("errors{reason=unreadable} = %v after pass %d", got, pass)
		}
		if got, err := promtest.GatherAndCount(reg, "memifnet_port_up"); err != nil || got != 1 {
			t.Fatalf("%d memifnet_port_up series (%v), want the good port's only", got, err)
		}
		now = now.Add(MinInterval)
	}
}

// TestScrapeDoesNotWaitForAPass: while a pass is under way (here held in listing the ports), a
// scrape gets the previous readings at once instead of queueing behind it.
func TestScrapeDoesNotWaitForAPass(t *testing.T) {
	n := newNode(t, "slot-000", "slot-001")
	n.write("slot-000", status("p0", portstatus.StateUp, 5))
	n.write("slot-001", status("p0", portstatus.StateUp, 5))
	now := start
	c, _ := collector(n, pair, &now)
	first := c.Readings()
	entered, release := make(chan struct{}), make(chan struct{})
	c.ports = func() ([]Port, error) { close(entered); <-release; return pair, nil }
	now = now.Add(MinInterval)
	slow := make(chan []Reading, 1)
	go func() { slow <- c.Readings() }()
	<-entered
	done := make(chan []Reading, 1)
	go func() { done <- c.Readings() }()
	select {
	case rs := <-done:
		if len(rs) != 2 || &rs[0] != &first[0] {
			t.Fatalf("a scrape during a pass got %+v, want the previous readings", rs)
		}
	case <-time.After(leaseBound):
		t.Fatal("a scrape waits for the pass under way")
	}
	close(release)
	if rs := <-slow; len(rs) != 2 || !rs[0].Up() || !rs[1].Up() {
		t.Fatalf("the pass: %+v", rs)
	}
}

// TestPassBudget: the ports a pass has no time left for count as unreadable, with a reason.
func TestPassBudget(t *testing.T) {
	n := newNode(t, "slot-000", "slot-001")
	n.write("slot-000", status("p0", portstatus.StateUp, 5))
	now := start
	c, _ := collector(n, pair, &now)
	c.budget = 0
	for _, r := range c.Readings() {
		if r.Reason != ReasonUnreadable || !errors.Is(r.Err, errPassBudget) {
			t.Fatalf("%s: reason %q (%v), want unreadable: over the budget", r.Slot, r.Reason, r.Err)
		}
	}
	if got := promtest.ToFloat64(c.errors.WithLabelValues(ReasonUnreadable)); got != 2 {
		t.Fatalf("errors{reason=unreadable} = %v, want 2", got)
	}
}
