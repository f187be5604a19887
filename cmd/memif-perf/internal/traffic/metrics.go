package traffic

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memifprom"
)

// serveMetrics serves the ports' metrics (pkg/memif/memifprom, and the Go runtime's) at
// http://addr/metrics until the returned stop is called. The listener is bound before it
// returns, so a bad address is a usage error, not a silent run without metrics.
func serveMetrics(addr string, ports []*memif.Interface) (stop func(), err error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(memifprom.New(ports...), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // ends with Shutdown; the run never depends on its metrics
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
