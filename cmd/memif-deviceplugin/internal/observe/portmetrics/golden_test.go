package portmetrics

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/pkg/memif/portstatus"
)

// goldenFile is the agent's /metrics for a node with one pod-to-pod link (one end down after a
// peer's disconnect) and a host port, as the real collector serves it. kubectl-memifnet's parser
// tests read it, so a change to what the agent serves shows up there: regenerate it with
// `go test -run TestGoldenMetrics -update` (as root) and review the diff.
const goldenFile = "testdata/agent-metrics.txt"

// TestGoldenMetrics: what the collector serves over HTTP is the fixture, byte for byte.
func TestGoldenMetrics(t *testing.T) {
	n := newNode(t, "slot-000", "slot-001", "slot-002")
	now := start.Add(time.Second)
	ports := append(append([]Port(nil), pair...), Port{Namespace: "ns", Pod: "vpp-app", Port: "up0", Slot: "slot-002"})
	_, reg := collector(n, ports, &now)
	n.write("slot-000", status("p0", portstatus.StateUp, 1000000))
	down := status("p0", portstatus.StateDown, 7)
	down.LinkDowns, down.LastDownReason, down.LastDownMessage = 1, portstatus.ReasonPeer, "peer said bye"
	down.Rx.BadDescriptors, down.Tx.Drops = 2, 5
	n.write("slot-001", down)
	n.write("slot-002", status("up0", portstatus.StateUp, 42))

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	testutil.Golden(t, goldenFile, rec.Body.Bytes())
}
