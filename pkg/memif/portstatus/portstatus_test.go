package portstatus_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/memifnet/memifnet/pkg/memif/portstatus"
)

func valid() portstatus.Status {
	return portstatus.Status{
		Version: "1", Port: "east", State: portstatus.StateUp,
		Time: time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC), IntervalSeconds: 5,
		LinkUps: 2, LinkDowns: 1, LastDownReason: portstatus.ReasonPeer, LastDownMessage: "memif: peer disconnected: bye",
		Rx: portstatus.Counters{Packets: 10, Bytes: 640, Drops: 1, BadDescriptors: 1},
		Tx: portstatus.Counters{Packets: 9, Bytes: 576, RingFull: 3},
	}
}

// TestRoundTrip: what Marshal writes, Parse reads back unchanged, and it is small.
func TestRoundTrip(t *testing.T) {
	s := valid()
	s.Rx.Bytes, s.Tx.Packets = ^uint64(0), ^uint64(0) // the largest numbers survive JSON
	s.LastDownMessage = strings.Repeat("é", portstatus.MaxMessageLen/2)
	data, err := portstatus.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 1024 {
		t.Errorf("a status file of %d bytes: want well under 1 KiB", len(data))
	}
	got, err := portstatus.Parse(data)
	if err != nil {
		t.Fatalf("Parse(Marshal(s)): %v\n%s", err, data)
	}
	if got != s {
		t.Fatalf("round trip: got %+v, want %+v", got, s)
	}
}

// TestParseRejects: each bad file is refused with an error naming what is wrong.
func TestParseRejects(t *testing.T) {
	good, err := portstatus.Marshal(valid())
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	for _, c := range []struct{ name, data, want string }{
		{"too large", string(good) + strings.Repeat(" ", portstatus.MaxSize), "at most"},
		{"unknown field", edit(func(m map[string]any) { m["extra"] = 1 }), "unknown field"},
		{"trailing data", string(good) + "{}", "trailing"},
		{"version", edit(func(m map[string]any) { m["version"] = "2" }), `"version"`},
		{"port", edit(func(m map[string]any) { m["port"] = "../x" }), `"port"`},
		{"state", edit(func(m map[string]any) { m["state"] = "sideways" }), `"state"`},
		{"time", edit(func(m map[string]any) { delete(m, "time") }), `"time"`},
		{"interval", edit(func(m map[string]any) { m["intervalSeconds"] = 0 }), `"intervalSeconds"`},
		{"reason", edit(func(m map[string]any) { m["lastDownReason"] = "pod said so" }), `"lastDownReason"`},
		{"message without reason", edit(func(m map[string]any) { delete(m, "lastDownReason") }), `"lastDownMessage"`},
		{"long message", edit(func(m map[string]any) { m["lastDownMessage"] = strings.Repeat("x", 257) }), `"lastDownMessage"`},
		{"control characters", edit(func(m map[string]any) { m["lastDownMessage"] = "a\x1b[2Jb" }), `"lastDownMessage"`},
		{"negative counter", edit(func(m map[string]any) { m["rx"] = map[string]any{"packets": -1} }), "packets"},
		{"counter too large", strings.Replace(string(good), `"packets":10`, `"packets":18446744073709551616`, 1), "packets"},
		{"not an object", "[]", "decode"},
	} {
		_, err := portstatus.Parse([]byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Parse = %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestTruncateMessage: a peer's reason becomes a valid LastDownMessage whatever it holds.
func TestTruncateMessage(t *testing.T) {
	for _, in := range []string{"", "plain", "a\nb\x00c\x7fd", string([]byte{0xff, 'x'}), strings.Repeat("€", 200)} {
		out := portstatus.TruncateMessage(in)
		s := valid()
		s.LastDownMessage = out
		if err := s.Validate(); err != nil {
			t.Errorf("TruncateMessage(%q) = %q: %v", in, out, err)
		}
	}
	if got := portstatus.TruncateMessage("a\nb"); got != "a b" {
		t.Errorf("TruncateMessage(a\\nb) = %q", got)
	}
}

// TestStaysALeaf: node agents read status files through this package without the data path.
func TestStaysALeaf(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/memifnet/memifnet/pkg/memif/portstatus").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, ".") && dep != "github.com/memifnet/memifnet/pkg/memif/portstatus" &&
			dep != "github.com/memifnet/memifnet/internal/names" {
			t.Errorf("portstatus depends on %s", dep)
		}
	}
}

// FuzzParse: whatever a pod writes, Parse returns an error or a Status that passes Validate and
// survives Marshal and Parse unchanged; it never panics.
func FuzzParse(f *testing.F) {
	good, _ := portstatus.Marshal(valid())
	f.Add(good)
	f.Add([]byte(`{"version":"1"}`))
	f.Add([]byte(`{"version":"1","port":"a","state":"down","time":"2026-01-01T00:00:00Z","intervalSeconds":5,"rx":{},"tx":{}}`))
	f.Add(bytes.Repeat([]byte("["), 5000))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := portstatus.Parse(data)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid status: %v", err)
		}
		again, err := portstatus.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal of a parsed status: %v", err)
		}
		s2, err := portstatus.Parse(again)
		if err != nil || !s2.Time.Equal(s.Time) {
			t.Fatalf("re-parse: %v", err)
		}
		s2.Time = s.Time
		if s2 != s {
			t.Fatalf("round trip changed %+v to %+v", s, s2)
		}
	})
}
