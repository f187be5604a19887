package agentmetrics

import (
	"math"
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
	if s[7].Labels["note"] != "q\"uo\\te\nnl" || s[7].Value != 1 {
		t.Errorf("escaped label: %+v", s[7])
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
	if err != nil || len(all) != 10 || !math.IsNaN(all[9].Value) {
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
