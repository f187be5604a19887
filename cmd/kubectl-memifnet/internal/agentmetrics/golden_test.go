package agentmetrics

import (
	"os"
	"testing"
	"time"
)

// agentMetrics is the node agent's /metrics as its real collector serves it, written by the
// agent's TestGoldenMetrics (-update): a change of the agent's names or labels breaks this test
// rather than kubectl-memifnet's "-" columns in a cluster.
const agentMetrics = "../../../memif-deviceplugin/internal/observe/portmetrics/testdata/agent-metrics.txt"

// TestAgentFixture: every port of the agent's /metrics is read with its link, state and
// counters (drops summed over both directions, as the column shows them).
func TestAgentFixture(t *testing.T) {
	f, err := os.Open(agentMetrics)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := Parse(f, IsPortMetric)
	if err != nil {
		t.Fatal(err)
	}
	snap := FromSamples(time.Unix(0, 0), s)
	at := time.Unix(1796335200, 0) // the status files' time in the agent's test
	want := map[Key]Counters{
		{"ns", "east", "p0"}:     {Link: "l1", HasUp: true, Up: true, RxPackets: 1e6, TxPackets: 7, RxBytes: 64e6, TxBytes: 448, Drops: 1, At: at},
		{"ns", "west", "p0"}:     {Link: "l1", HasUp: true, Up: false, RxPackets: 7, TxPackets: 7, RxBytes: 448, TxBytes: 448, Drops: 5, At: at},
		{"ns", "vpp-app", "up0"}: {HasUp: true, Up: true, RxPackets: 42, TxPackets: 7, RxBytes: 2688, TxBytes: 448, Drops: 1, At: at},
	}
	if len(snap.Ports) != len(want) {
		t.Errorf("%d ports, want %d: %+v", len(snap.Ports), len(want), snap.Ports)
	}
	for k, w := range want {
		if got := snap.Ports[k]; got != w {
			t.Errorf("%v: %+v, want %+v", k, got, w)
		}
	}
}
