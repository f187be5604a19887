package portmetrics

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

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
