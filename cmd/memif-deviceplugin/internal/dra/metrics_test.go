package dra

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// TestMetrics: through the kubelet plugin interface, a link claim prepares, a claim whose unit
// cannot be scrubbed (a directory with a file in it where the unit file goes) fails and stays
// half prepared, then both unprepare. The DRA families count each step: requests by result,
// their latency, the failed scrubs (Prepare's and its undo's), the prepared claims and the
// devices used and free.
func TestMetrics(t *testing.T) {
	e := newEnv(t)
	d := e.deviceState(t)
	link := claim("uid-l", "link", linkAllocs)
	perPod := claim("uid-h", "per-pod", []alloc{{"port", "dra-slot-003"}, {"mem", "drapool-n0-001"}})
	client := fake.NewClientset(link, perPod)
	p := &Driver{state: d, client: client, log: d.opts.Log}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(d)

	unit := e.units.Path("drapool-n0-001")
	must(t, os.Remove(unit))
	must(t, os.MkdirAll(filepath.Join(unit, "x"), 0o700))
	res, err := p.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{link, perPod})
	if err != nil || res["uid-l"].Err != nil || res["uid-h"].Err == nil {
		t.Fatalf("prepare: %v, link %v, per-pod %v (want an error)", err, res["uid-l"].Err, res["uid-h"].Err)
	}
	compare(t, reg, `
# HELP memifnet_dra_prepared_claims Claims the DRA driver holds as prepared on this node.
# TYPE memifnet_dra_prepared_claims gauge
memifnet_dra_prepared_claims 1
# HELP memifnet_dra_devices The DRA driver's devices by type (socket, hugepage), hugepage pool and state (used, free, withheld, scrub_failed).
# TYPE memifnet_dra_devices gauge
memifnet_dra_devices{pool="",state="free",type="socket"} 1
memifnet_dra_devices{pool="",state="used",type="socket"} 3
memifnet_dra_devices{pool="",state="withheld",type="socket"} 0
memifnet_dra_devices{pool="",state="scrub_failed",type="socket"} 0
memifnet_dra_devices{pool="drapool",state="free",type="hugepage"} 1
memifnet_dra_devices{pool="drapool",state="used",type="hugepage"} 1
memifnet_dra_devices{pool="drapool",state="withheld",type="hugepage"} 0
memifnet_dra_devices{pool="drapool",state="scrub_failed",type="hugepage"} 0
# HELP memifnet_dra_requests_total Prepare and Unprepare of one claim, by operation (prepare, unprepare) and result (success, error).
# TYPE memifnet_dra_requests_total counter
memifnet_dra_requests_total{operation="prepare",result="error"} 1
memifnet_dra_requests_total{operation="prepare",result="success"} 1
memifnet_dra_requests_total{operation="unprepare",result="error"} 0
memifnet_dra_requests_total{operation="unprepare",result="success"} 0
# HELP memifnet_dra_scrub_errors_total Scrubs of the DRA driver's devices that failed, by type and hugepage pool: a device out of service counts once, not at every retry (a withheld unit is not counted).
# TYPE memifnet_dra_scrub_errors_total counter
memifnet_dra_scrub_errors_total{pool="drapool",type="hugepage"} 2
`, "memifnet_dra_prepared_claims", "memifnet_dra_devices", "memifnet_dra_requests_total", "memifnet_dra_scrub_errors_total")

	must(t, os.RemoveAll(unit)) // the unit can be made again: Unprepare's scrub works
	un, err := p.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: "uid-l"}, {UID: "uid-h"}})
	if err != nil || un["uid-l"] != nil || un["uid-h"] != nil {
		t.Fatalf("unprepare: %v %v", err, un)
	}
	compare(t, reg, `
# HELP memifnet_dra_prepared_claims Claims the DRA driver holds as prepared on this node.
# TYPE memifnet_dra_prepared_claims gauge
memifnet_dra_prepared_claims 0
# HELP memifnet_dra_requests_total Prepare and Unprepare of one claim, by operation (prepare, unprepare) and result (success, error).
# TYPE memifnet_dra_requests_total counter
memifnet_dra_requests_total{operation="prepare",result="error"} 1
memifnet_dra_requests_total{operation="prepare",result="success"} 1
memifnet_dra_requests_total{operation="unprepare",result="error"} 0
memifnet_dra_requests_total{operation="unprepare",result="success"} 2
`, "memifnet_dra_prepared_claims", "memifnet_dra_requests_total")
	for _, op := range []string{opPrepare, opUnprepare} {
		n, sum := histogram(t, reg, "memifnet_dra_request_duration_seconds", op)
		if n != 2 || sum <= 0 {
			t.Errorf("%s latency: %d observations summing to %gs, want 2 and more than 0", op, n, sum)
		}
	}
	compare(t, reg, `
# HELP memifnet_dra_devices The DRA driver's devices by type (socket, hugepage), hugepage pool and state (used, free, withheld, scrub_failed).
# TYPE memifnet_dra_devices gauge
memifnet_dra_devices{pool="",state="free",type="socket"} 4
memifnet_dra_devices{pool="",state="used",type="socket"} 0
memifnet_dra_devices{pool="",state="withheld",type="socket"} 0
memifnet_dra_devices{pool="",state="scrub_failed",type="socket"} 0
memifnet_dra_devices{pool="drapool",state="free",type="hugepage"} 2
memifnet_dra_devices{pool="drapool",state="used",type="hugepage"} 0
memifnet_dra_devices{pool="drapool",state="withheld",type="hugepage"} 0
memifnet_dra_devices{pool="drapool",state="scrub_failed",type="hugepage"} 0
`, "memifnet_dra_devices")
}

func compare(t *testing.T, g prometheus.Gatherer, want string, names ...string) {
	t.Helper()
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

// histogram is the sample count and sum of name's series with operation op.
func histogram(t *testing.T, g prometheus.Gatherer, name, op string) (uint64, float64) {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" && l.GetValue() == op {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	t.Fatalf("no %s{operation=%q}", name, op)
	return 0, 0
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
