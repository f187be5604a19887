package dra

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
	"github.com/memifnet/memifnet/internal/names"
)

// Operations of the DRA driver, the operation label of its request metrics.
const (
	opPrepare   = "prepare"
	opUnprepare = "unprepare"
)

// Device states, the state label of memifnet_dra_devices.
const (
	devUsed     = "used"         // in a claim the driver holds (prepared, or half prepared)
	devFree     = "free"         // in the slices and in no claim
	devWithheld = "withheld"     // out of the slices: a previous tenant holds its old file
	devFailed   = "scrub_failed" // out of the slices: its scrub failed, until a retried scrub works
)

var (
	preparedDesc = prometheus.NewDesc("memifnet_dra_prepared_claims",
		"Claims the DRA driver holds as prepared on this node.", nil, nil)
	devicesDesc = prometheus.NewDesc("memifnet_dra_devices",
		"The DRA driver's devices by type (socket, hugepage), hugepage pool and state (used, free, withheld, scrub_failed).",
		[]string{"type", "pool", "state"}, nil)
	// Deprecated: memifnet_device_scrub_errors_total{backend="dra"} (package device) counts the
	// same; this one goes in the release after next.
	scrubErrorsDesc = prometheus.NewDesc("memifnet_dra_scrub_errors_total",
		"Scrubs of the DRA driver's devices that failed, by type and hugepage pool: a device out of service counts once, not at every retry (a withheld unit is not counted).",
		[]string{"type", "pool"}, nil)
)

// metrics are the DRA driver's request counters; the rest is read from the state (and its
// device tracker) at scrape time.
type metrics struct {
	requests *prometheus.CounterVec   // operation, result
	latency  *prometheus.HistogramVec // operation
}

func newMetrics() *metrics {
	return &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memifnet_dra_requests_total",
			Help: "Prepare and Unprepare of one claim, by operation (prepare, unprepare) and result (success, error).",
		}, []string{"operation", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "memifnet_dra_request_duration_seconds",
			Help: "How long Prepare and Unprepare of one claim took, by operation (prepare, unprepare).",
			// A Prepare scrubs (a new tmpfs per slot, a new file per unit) and mounts: a few ms
			// on an idle node, tens to hundreds under load; the kubelet gives up after minutes.
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12), // 0.5 ms to 12 s
		}, []string{"operation"}),
	}
}

// observe counts one operation of a claim that started at start and ended with err.
func (m *metrics) observe(op string, start time.Time, err error) {
	res := "success"
	if err != nil {
		res = "error"
	}
	m.requests.WithLabelValues(op, res).Inc()
	m.latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// Describe implements prometheus.Collector: the DRA driver's metrics.
func (d *DeviceState) Describe(ch chan<- *prometheus.Desc) {
	ch <- preparedDesc
	ch <- devicesDesc
	d.m.requests.Describe(ch)
	d.m.latency.Describe(ch)
	ch <- scrubErrorsDesc
}

// Collect implements prometheus.Collector: the counters, and the prepared claims and devices by
// state as they are now. Every label set of the operations is there from the start (at 0), so
// that a rate over them has a series before the first request.
func (d *DeviceState) Collect(ch chan<- prometheus.Metric) {
	for _, op := range []string{opPrepare, opUnprepare} {
		d.m.requests.WithLabelValues(op, "success")
		d.m.requests.WithLabelValues(op, "error")
		d.m.latency.WithLabelValues(op)
	}
	d.m.requests.Collect(ch)
	d.m.latency.Collect(ch)
	for _, n := range d.track.Counts() {
		if n.Errors == 0 { // as the counter vector this was: a series from the first error on
			continue
		}
		kind, pool := KindHugepage, strings.TrimPrefix(n.Resource, names.ResourcePrefix)
		if n.Resource == names.SocketResource {
			kind, pool = KindSocket, ""
		}
		ch <- prometheus.MustNewConstMetric(scrubErrorsDesc, prometheus.CounterValue, float64(n.Errors), kind, pool)
	}

	used := map[string]bool{}
	prepared := 0
	d.mu.Lock()
	for _, c := range d.claims {
		if c.Prepared {
			prepared++
		}
		for _, dev := range c.Devices {
			used[dev.Name] = true
		}
	}
	d.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(preparedDesc, prometheus.GaugeValue, float64(prepared))

	withheld, failed := d.Withheld(), d.ScrubFailures()
	count := func(kind, pool string, units []device.Unit) {
		n := map[string]int{devUsed: 0, devFree: 0, devWithheld: 0, devFailed: 0}
		for _, u := range units {
			switch {
			case used[u.ID]:
				n[devUsed]++
			case withheld[u.ID] != nil:
				n[devWithheld]++
			case failed[u.ID] != nil:
				n[devFailed]++
			default:
				n[devFree]++
			}
		}
		for _, st := range []string{devUsed, devFree, devWithheld, devFailed} {
			ch <- prometheus.MustNewConstMetric(devicesDesc, prometheus.GaugeValue, float64(n[st]), kind, pool, st)
		}
	}
	if d.opts.Slots != nil {
		count(KindSocket, "", d.opts.Slots.Units())
	}
	for _, p := range d.opts.Pools {
		count(KindHugepage, p.Name, p.Units.Units())
	}
}
