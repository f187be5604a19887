package daemon

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/deviceplugin/dpmetrics"
)

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
		build, dpmetrics.Collector{Resources: d.resources, Servers: d.servers, Pools: d.pools},
		device.Collector{Trackers: d.trackers})
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
