package daemon

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memifnet/memifnet/pkg/memif/memifprom"
)

const dashboardFile = "../../../../manifests/dashboards/memifnet.json"

// exported is every metric name the node agent's /metrics and the library's collector can
// serve: what a daemon with the DRA driver enabled gathers, and the descriptors of the
// collectors whose label vectors have no series until a port, a request or an error is there.
func exported(t *testing.T) map[string]bool {
	e := newEnv(t, 1)
	o := e.options(t, 2)
	o.NodeName, o.Config.DRA.Enabled, o.Config.DRA.SocketSlots = "node-a", true, 2
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	fams, err := d.registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		names[f.GetName()] = true
	}
	pc, err := d.PortCollector()
	if err != nil {
		t.Fatal(err)
	}
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	ch := make(chan *prometheus.Desc, 100)
	for _, c := range []prometheus.Collector{d.dra, pc, memifprom.New()} {
		c.Describe(ch)
	}
	close(ch)
	for d := range ch {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("descriptor without a name: %s", d)
		}
		names[m[1]] = true
	}
	return names
}

type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboardQueriesExportedMetrics: every query of every panel of the Grafana dashboard
// names only metrics the agent (or pkg/memif/memifprom) exports, each query names one at
// least, and the dashboard covers the link state and every per-port counter.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	have := exported(t)
	metric := regexp.MustCompile(`\bmemifnet_[a-zA-Z0-9_]+`)
	used := map[string]bool{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			names := metric.FindAllString(q.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no memifnet metric", p.Title, q.Expr)
			}
			for _, n := range names {
				used[n] = true
				if !have[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")] && !have[n] {
					t.Errorf("panel %q: %s is not exported (query %q)", p.Title, n, q.Expr)
				}
			}
		}
	}
	for _, want := range []string{"memifnet_link_up", "memifnet_port_rx_packets_total", "memifnet_port_tx_packets_total",
		"memifnet_port_rx_bytes_total", "memifnet_port_tx_bytes_total", "memifnet_port_drops_total", "memifnet_port_ring_full_total",
		"memifnet_port_rx_no_buffers_total", "memifnet_port_bad_descriptors_total"} {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
	if t.Failed() {
		t.Logf("exported: %v", slices.Sorted(maps.Keys(have)))
	}
}
