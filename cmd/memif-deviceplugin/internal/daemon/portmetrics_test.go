package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/deviceplugin/podresources"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/observe/portmetrics"
	"github.com/memifnet/memifnet/pkg/memif/portstatus"
)

// portMetrics: a port memif-cni recorded in slot-001, whose application writes its status
// file, appears in the agent's /metrics (at the latest one second later) with the record's labels, and the whole exposition (the
// agent's own families and the per-port ones) parses as one.
func portMetrics(t *testing.T, stateDir string, scrape func() string) {
	t.Helper()
	att := filepath.Join(stateDir, "state", "attachments")
	must(t, os.MkdirAll(att, 0o700))
	must(t, os.WriteFile(filepath.Join(att, "c1_net1.json"), []byte(
		`{"namespace":"ns","pod":"east","ports":[{"name":"p0","slot":"slot-001","link":"l1","mode":"ethernet"}]}`), 0o600))
	b, err := portstatus.Marshal(portstatus.Status{Version: portstatus.Version, Port: "p0", State: portstatus.StateUp,
		Time: time.Now(), IntervalSeconds: 5, LinkUps: 1, Rx: portstatus.Counters{Packets: 42}})
	must(t, err)
	must(t, os.WriteFile(filepath.Join(stateDir, "sockets", "slot-001", portstatus.File), b, 0o644))
	// A scrape within portmetrics.MinInterval of the last is served from that pass.
	var body string
	eventually(t, 3*time.Second, "the port's metrics", func() bool { body = scrape(); return strings.Contains(body, "memifnet_port_up{") })
	for _, want := range []string{
		`memifnet_port_up{link="l1",namespace="ns",pod="east",port="p0"} 1`,
		`memifnet_port_rx_packets_total{link="l1",namespace="ns",pod="east",port="p0"} 42`,
		`memifnet_link_up{claim="",link="l1",namespace="ns"} 0`, // one end only
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("metrics lack %q:\n%s", want, body)
		}
	}
	var p expfmt.TextParser
	if _, err := p.TextToMetricFamilies(strings.NewReader(body)); err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, body)
	}
}

// TestWithPods: a DRA port gets the pod the kubelet says holds its device; a device no pod
// holds yet, or one the kubelet places in another namespace than its claim, is left out.
func TestWithPods(t *testing.T) {
	ports := []portmetrics.Port{{Namespace: "ns", Port: "east", Slot: "dra-slot-000"}, {Namespace: "ns", Port: "west", Slot: "dra-slot-001"},
		{Namespace: "ns", Port: "x", Slot: "dra-slot-002"}}
	got, err := withPods(ports, func() (map[string]podresources.PodRef, error) {
		return map[string]podresources.PodRef{"dra-slot-000": {Namespace: "ns", Name: "rx"}, "dra-slot-002": {Namespace: "other", Name: "y"}}, nil
	})
	if err != nil || len(got) != 1 || got[0].Pod != "rx" || got[0].Port != "east" {
		t.Fatalf("got %+v, %v", got, err)
	}
}
