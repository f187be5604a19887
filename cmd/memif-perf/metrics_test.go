package main

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

// TestMetricsFlag: memif-perf --metrics serves pkg/memif/memifprom while it runs: the receiving
// server's port is up and its received packets rise while the client sends.
func TestMetricsFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	sock := sockName(t)
	c := pairCase{64, 2048}
	srv := start(t, append(common(sock, c, 20*time.Second), "--role", "server", "--mode", "rx", "--metrics", addr)...)
	waitListening(t, srv, sock)
	cli := start(t, append(common(sock, c, 20*time.Second), "--role", "client", "--mode", "tx")...)
	var first float64
	deadline := time.Now().Add(15 * time.Second)
	for {
		up, rx := scrape(t, "http://"+addr+"/metrics")
		switch {
		case up && first == 0 && rx > 0:
			first = rx
		case up && first > 0 && rx > first:
			cli.cmd.Process.Kill()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never showed the port up with rising rx packets (up %v, rx %v, first %v)", up, rx, first)
		}
		time.Sleep(100 * time.Millisecond) // a scrape interval: there is nothing to wait on
	}
}

// scrape reads memifnet_port_up and the sum of memifnet_port_rx_packets_total.
func scrape(t *testing.T, url string) (up bool, rx float64) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return false, 0 // not listening yet
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	if f := fams["memifnet_port_up"]; f != nil && len(f.GetMetric()) == 1 {
		up = f.GetMetric()[0].GetGauge().GetValue() == 1
	}
	for _, m := range fams["memifnet_port_rx_packets_total"].GetMetric() {
		rx += m.GetCounter().GetValue()
	}
	return up, rx
}
