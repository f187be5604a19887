package device

import "github.com/prometheus/client_golang/prometheus"

// The out-of-service families, one for both backends: what an alert on "a device out of
// service" needs, whichever backend hands the device out.
var (
	outDesc = prometheus.NewDesc("memifnet_devices_out_of_service",
		"Devices out of service, by backend (deviceplugin, dra), resource and state (withheld: a previous tenant holds its old file; scrub_failed: until a retried scrub works).",
		[]string{"backend", "resource", "state"}, nil)
	scrubErrorsDesc = prometheus.NewDesc("memifnet_device_scrub_errors_total",
		"Failed scrubs, by backend and resource: a device out of service counts once, not at every retry; a withheld unit is not an error.",
		[]string{"backend", "resource"}, nil)
)

// Collector serves the out-of-service families of the trackers it is given at scrape time.
type Collector struct {
	Trackers func() []*Tracker
}

// Describe implements prometheus.Collector.
func (c Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- outDesc
	ch <- scrubErrorsDesc
}

// Collect implements prometheus.Collector: every backend, resource and state, at 0 when none.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.Trackers() {
		for _, n := range t.Counts() {
			for _, st := range States {
				ch <- prometheus.MustNewConstMetric(outDesc, prometheus.GaugeValue, float64(n.Out[st]), t.backend, n.Resource, string(st))
			}
			ch <- prometheus.MustNewConstMetric(scrubErrorsDesc, prometheus.CounterValue, float64(n.Errors), t.backend, n.Resource)
		}
	}
}
