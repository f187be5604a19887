package daemon

import (
	"net/http"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/metrics"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/portmetrics"
	"github.com/memifnet/memifnet/internal/names"
)

// PortCollector is the per-port metrics of the node's pods: the device plugin's ports from
// memif-cni's records, the DRA driver's from its prepared claims.
func (d *Daemon) PortCollector() prometheus.Collector {
	draPorts := func() ([]portmetrics.Port, error) {
		if p := d.draDriver.Load(); p != nil {
			return p.Ports(), nil
		}
		return nil, nil
	}
	return portmetrics.New(filepath.Join(d.opts.StateDir, names.SocketsSubdir),
		portmetrics.Merge(portmetrics.CNIPorts(d.opts.StateDir), draPorts), d.opts.Log)
}

// metricsHandler serves the agent's own families and then the registry's (the per-port
// metrics) in one text exposition.
func (d *Daemon) metricsHandler(reg prometheus.Gatherer) http.Handler {
	own := metrics.Handler(d.Metrics)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		own.ServeHTTP(w, r)
		fams, err := reg.Gather()
		if err != nil {
			d.opts.Log.Warn("metrics: gather", "err", err)
		}
		enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, f := range fams {
			if err := enc.Encode(f); err != nil {
				return
			}
		}
	})
}
