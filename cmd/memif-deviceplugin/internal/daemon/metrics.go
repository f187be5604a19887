package daemon

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
)

const dpPrefix = "memifnet_deviceplugin_"

// The device plugin's families, one series per resource (and mode, health, NUMA node), read from
// the resources, servers and pools at scrape time.
var (
	allocDesc = prometheus.NewDesc(dpPrefix+"allocations_total", "Container allocations served.", []string{"resource"}, nil)
	scrubDesc = prometheus.NewDesc(dpPrefix+"scrubs_total", "Devices scrubbed, by where the scrub ran.",
		[]string{"resource", "mode"}, nil)
	// Deprecated, with devices_withheld and devices_scrub_failed: the out-of-service families of
	// package device (backend="deviceplugin") count the same for both backends; these three go in
	// the release after next.
	scrubErrDesc = prometheus.NewDesc(dpPrefix+"scrub_errors_total", "Scrubs that failed.", []string{"resource"}, nil)
	devsDesc     = prometheus.NewDesc(dpPrefix+"devices", "Devices by health.", []string{"resource", "health"}, nil)
	dirtyDesc    = prometheus.NewDesc(dpPrefix+"devices_dirty",
		"Devices handed out and not yet scrubbed (used).", []string{"resource"}, nil)
	freeDesc = prometheus.NewDesc(dpPrefix+"devices_free",
		"Healthy devices not handed out: what the kubelet can allocate now.", []string{"resource"}, nil)
	withheldDesc = prometheus.NewDesc(dpPrefix+"devices_withheld",
		"Pool units out of service while a previous tenant holds their old file.", []string{"resource"}, nil)
	scrubFailedDesc = prometheus.NewDesc(dpPrefix+"devices_scrub_failed",
		"Devices out of service because their scrub failed, until a retried scrub works.", []string{"resource"}, nil)
	regsDesc = prometheus.NewDesc(dpPrefix+"registrations_total",
		"Successful registrations with the kubelet.", []string{"resource"}, nil)
	registeredDesc = prometheus.NewDesc(dpPrefix+"registered",
		"1 when the resource is registered with the kubelet.", []string{"resource"}, nil)
	poolBytesDesc = prometheus.NewDesc(dpPrefix+"pool_bytes",
		"Hugepage memory held by pool units.", []string{"resource", "numa_node"}, nil)
)

// devicePluginCollector reads the device plugin's families at scrape time.
type devicePluginCollector struct{ d *Daemon }

func (c devicePluginCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{allocDesc, scrubDesc, scrubErrDesc, devsDesc, dirtyDesc, freeDesc,
		withheldDesc, scrubFailedDesc, regsDesc, registeredDesc, poolBytesDesc} {
		ch <- d
	}
}

func (c devicePluginCollector) Collect(ch chan<- prometheus.Metric) {
	m := func(desc *prometheus.Desc, typ prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, typ, v, labels...)
	}
	const counter, gauge = prometheus.CounterValue, prometheus.GaugeValue
	for i, r := range c.d.resources {
		st, name := r.Stats(), r.Name()
		m(allocDesc, counter, float64(st.Allocations), name)
		m(scrubDesc, counter, float64(st.SyncScrubs), name, "allocate")
		m(scrubDesc, counter, float64(st.BackgroundScrub), name, "background")
		m(scrubErrDesc, counter, float64(st.ScrubErrors), name)
		m(devsDesc, gauge, float64(st.Healthy), name, "healthy")
		m(devsDesc, gauge, float64(st.Unhealthy), name, "unhealthy")
		m(dirtyDesc, gauge, float64(st.Dirty), name)
		m(freeDesc, gauge, float64(r.Free()), name)
		m(withheldDesc, gauge, float64(st.Withheld), name)
		m(scrubFailedDesc, gauge, float64(st.ScrubFailed), name)
		m(regsDesc, counter, float64(c.d.servers[i].Registrations()), name)
		v := 0.0
		if c.d.servers[i].Registered() {
			v = 1
		}
		m(registeredDesc, gauge, v, name)
	}
	for _, pp := range c.d.pools {
		byNode := pp.Bytes()
		for _, node := range slices.Sorted(maps.Keys(byNode)) {
			m(poolBytesDesc, gauge, float64(byNode[node]), pp.Resource(), strconv.Itoa(node))
		}
	}
}

// registry is the agent's metrics: the Go runtime's and the process's, the build, the device
// plugin's, the DRA driver's (when it is enabled) and the per-port metrics of the node's pods.
func (d *Daemon) registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "memifnet_build_info", Help: "1, labelled with the node agent's version.",
		ConstLabels: prometheus.Labels{"version": d.opts.Version},
	})
	build.Set(1)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		build, devicePluginCollector{d}, device.Collector{Trackers: d.trackers})
	if d.dra != nil {
		reg.MustRegister(d.dra)
	}
	if pc, err := d.PortCollector(); err != nil {
		d.opts.Log.Warn("no per-port metrics", "err", err)
	} else {
		reg.MustRegister(pc)
	}
	return reg
}

// trackers are the device trackers of both backends: one per device plugin resource, the DRA
// driver's.
func (d *Daemon) trackers() []*device.Tracker {
	var ts []*device.Tracker
	for _, r := range d.resources {
		ts = append(ts, r.Tracker())
	}
	if d.dra != nil {
		ts = append(ts, d.dra.Tracker())
	}
	return ts
}

// metricsHandler serves the registry. A collector's error (the per-port metrics' sources) is
// logged and the rest served: one unreadable source must not hide the node's other metrics.
func (d *Daemon) metricsHandler(reg prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: promLog{d.opts.Log}, ErrorHandling: promhttp.ContinueOnError})
}

// promLog is promhttp's error log on the agent's logger.
type promLog struct{ log *slog.Logger }

func (l promLog) Println(v ...any) { l.log.Warn("metrics: " + fmt.Sprint(v...)) }
