package agentmetrics

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// exposition is what an agent with per-port metrics serves, as client_golang writes it, with
// other metrics around.
const exposition = `# HELP memifnet_deviceplugin_allocations_total Allocate calls.
# TYPE memifnet_deviceplugin_allocations_total counter
memifnet_deviceplugin_allocations_total{resource="memifnet.io/socket"} 12
# HELP memifnet_port_up Whether the port's memif link is connected.
# TYPE memifnet_port_up gauge
memifnet_port_up{link="l1",namespace="ns",pod="rx",port="east"} 1
memifnet_port_up{link="l1",namespace="ns",pod="tx",port="west"} 0
memifnet_port_rx_packets_total{link="l1",namespace="ns",pod="rx",port="east",queue="0"} 1e+06
memifnet_port_rx_packets_total{link="l1",namespace="ns",pod="rx",port="east",queue="1"} 500000
memifnet_port_tx_packets_total{link="l1",namespace="ns",pod="rx",port="east"} 0 1700000000000
memifnet_port_rx_bytes_total{link="l1",namespace="ns",pod="rx",port="east"} 2.25e+09
memifnet_port_drops_total{link="l1",namespace="ns",pod="rx",port="east"} 3
memifnet_port_up{namespace="ns",pod="odd",port="a",note="q\"uo\\te\nnl",} 1
go_gc_duration_seconds{quantile="0.5"} NaN
`

func TestParse(t *testing.T) {
	s, err := Parse(strings.NewReader(exposition), IsPortMetric)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 8 {
		t.Fatalf("%d samples, want 8: %+v", len(s), s)
	}
	odd := slices.IndexFunc(s, func(x Sample) bool { return x.Labels["pod"] == "odd" })
	if odd < 0 || s[odd].Labels["note"] != "q\"uo\\te\nnl" || s[odd].Value != 1 {
		t.Errorf("escaped label: %+v", s)
	}
	snap := FromSamples(time.Unix(0, 0), s)
	rx := snap.Ports[Key{"ns", "rx", "east"}]
	if !rx.HasUp || !rx.Up || rx.RxPackets != 1.5e6 || rx.RxBytes != 2.25e9 || rx.Drops != 3 || rx.Link != "l1" {
		t.Errorf("rx: %+v", rx)
	}
	if tx := snap.Ports[Key{"ns", "tx", "west"}]; !tx.HasUp || tx.Up {
		t.Errorf("tx: %+v, want known and down", tx)
	}
	all, err := Parse(strings.NewReader(exposition), func(string) bool { return true })
	gc := slices.IndexFunc(all, func(x Sample) bool { return x.Name == "go_gc_duration_seconds" })
	if err != nil || len(all) != 10 || gc < 0 || !math.IsNaN(all[gc].Value) {
		t.Fatalf("all metrics: %v, %+v", err, all)
	}
}

func TestParseRefusesBadLines(t *testing.T) {
	for _, line := range []string{
		`memifnet_port_up{pod="a" 1`,
		`memifnet_port_up{pod="a\x"} 1`,
		`memifnet_port_up{pod="a",pod="b"} 1`,
		`memifnet_port_up{pod=a} 1`,
		`memifnet_port_up{pod="a"} one`,
		`memifnet_port_up 1 2 3`,
		`memifnet_port_up{pod="unterminated} 1`,
		`{pod="a"} 1`,
	} {
		if _, err := Parse(strings.NewReader(line+"\n"), IsPortMetric); err == nil {
			t.Errorf("%q parsed", line)
		}
	}
	// A bad line of another metric is skipped unread: it is not ours to judge.
	if _, err := Parse(strings.NewReader("other_metric{x=1} ?\n"), IsPortMetric); err != nil {
		t.Errorf("another metric's line: %v", err)
	}
}

// An agent cannot make the plugin read without end: one line over 1 MiB is an error, and
// nothing after the first 16 MiB is read.
func TestParseLimits(t *testing.T) {
	long := `memifnet_port_up{pod="` + strings.Repeat("a", maxLine) + `"} 1` + "\n"
	if _, err := Parse(strings.NewReader(long), IsPortMetric); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("a line over the limit: %v", err)
	}
	filler := strings.Repeat("other_metric 1\n", maxBody/len("other_metric 1\n")+1)
	s, err := Parse(io.MultiReader(strings.NewReader(filler), strings.NewReader("memifnet_port_up 1\n")), IsPortMetric)
	if err != nil || len(s) != 0 {
		t.Errorf("a sample after %d bytes: %+v, %v", len(filler), s, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(exposition)
	f.Add(`memifnet_port_up{a="\\\"\n"} +Inf`)
	f.Fuzz(func(t *testing.T, s string) {
		samples, err := Parse(strings.NewReader(s), func(string) bool { return true })
		if err != nil {
			return
		}
		for _, x := range samples {
			if x.Name == "" || x.Labels == nil {
				t.Fatalf("sample %+v", x)
			}
		}
	})
}

func TestRate(t *testing.T) {
	k := Key{"ns", "p", "east"}
	a := Snapshot{At: time.Unix(10, 0), Ports: map[Key]Counters{k: {RxPackets: 100, TxPackets: 50, RxBytes: 1000}}}
	b := Snapshot{At: time.Unix(12, 0), Ports: map[Key]Counters{k: {RxPackets: 300, TxPackets: 50, RxBytes: 5000}}}
	r, ok := Rate(a, b, k)
	if !ok || r.RxPPS != 100 || r.TxPPS != 0 || r.RxBPS != 2000 {
		t.Errorf("rate %+v %v", r, ok)
	}
	if _, ok := Rate(b, a, k); ok {
		t.Error("a counter going back (a reopened port) gave a rate")
	}
	if _, ok := Rate(a, b, Key{"ns", "p", "west"}); ok {
		t.Error("a missing port gave a rate")
	}
}

// TestRateOverStatusTime: the agent's counters move only when a port's status file is
// rewritten (every 5 s), so scrapes a second apart see either the same counters (no rate yet,
// not 0) or 5 s of packets (their rate over the files' times, not 5 times it over the scrapes').
func TestRateOverStatusTime(t *testing.T) {
	k := Key{"ns", "p", "east"}
	at := func(sec int64, rx float64) Snapshot {
		return Snapshot{At: time.Unix(sec, 0), Ports: map[Key]Counters{k: {RxPackets: rx, At: time.Unix(1000+5*(sec/5), 0)}}}
	}
	if r, ok := Rate(at(11, 1e5), at(12, 1e5), k); ok {
		t.Errorf("one status file read twice gave a rate: %+v", r)
	}
	if r, ok := Rate(at(14, 1e5), at(15, 1.5e5), k); !ok || r.RxPPS != 1e4 {
		t.Errorf("50000 packets over two files 5 s apart, scraped 1 s apart: %+v %v, want 10000/s", r, ok)
	}
}

// BenchmarkParse reads the exposition of an agent with 1000 ports (five samples each) and as
// many lines of other metrics.
//
//	go test ./cmd/kubectl-memifnet/internal/agentmetrics -run '^$' -bench Parse
func BenchmarkParse(b *testing.B) {
	var sb strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&sb, "other_metric{i=\"%d\"} %d\n", i, i)
		for _, m := range []string{"up", "rx_packets_total", "tx_packets_total", "rx_bytes_total", "drops_total"} {
			fmt.Fprintf(&sb, "memifnet_port_%s{link=\"l%d\",namespace=\"ns\",pod=\"p%d\",port=\"east\"} %d\n", m, i, i, i)
		}
	}
	body := sb.String()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if s, err := Parse(strings.NewReader(body), IsPortMetric); err != nil || len(s) != 5000 {
			b.Fatal(len(s), err)
		}
	}
}
