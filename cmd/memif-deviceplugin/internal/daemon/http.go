package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/observe/metricsauth"
)

// The agent's HTTP endpoints (docs/deviceplugin.md, "Metrics and probes"):
//
//   - HTTPAddr, the node address (hostNetwork): HTTPS. /healthz and /readyz answer anyone (the
//     kubelet's probes; they say nothing about pods). /metrics names every memif pod of the node
//     (namespace, pod, port, link, traffic), so it answers only a bearer token of a user the API
//     server authorizes for get /metrics (package metricsauth), or is not served there at all
//     without MetricsAuth.
//   - LocalMetricsAddr, a loopback address: plain HTTP, everything, for node-local tools and for
//     kubectl-memifnet through a port-forward (which reaches the node's loopback for a
//     hostNetwork pod). No pod outside the host's network namespace can reach it.

// checkHTTP refuses a local address that is not a loopback IP address (a name such as
// localhost is resolved by the node's configuration, which the agent does not check).
func (o *Options) checkHTTP() error {
	if o.LocalMetricsAddr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(o.LocalMetricsAddr)
	if err != nil {
		return fmt.Errorf("--local-metrics-address %q: %w", o.LocalMetricsAddr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--local-metrics-address %q: not a loopback IP address such as 127.0.0.1:9101 (it serves /metrics without authentication)", o.LocalMetricsAddr)
	}
	return nil
}

// startHTTP starts the endpoints; stop shuts them down.
func (d *Daemon) startHTTP() (stop func(), err error) {
	var srvs []*http.Server
	stop = func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, s := range srvs {
			_ = s.Shutdown(sctx)
		}
	}
	serve := func(addr string, h http.Handler, cfg *tls.Config, what string) (string, error) {
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			return "", fmt.Errorf("http listen (%s): %w", what, err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute,
			ErrorLog: slog.NewLogLogger(d.opts.Log.Handler(), slog.LevelDebug)} // failed handshakes: any port scan
		if cfg != nil {
			lis = tls.NewListener(lis, cfg)
		}
		srvs = append(srvs, srv)
		d.goRun(func() {
			if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.opts.Log.Error("http", "endpoints", what, "err", err)
			}
		})
		d.opts.Log.Info("http endpoints", "endpoints", what, "addr", lis.Addr().String())
		return lis.Addr().String(), nil
	}
	if d.opts.HTTPAddr != "" {
		h, err := d.secureHandler()
		if err != nil {
			return stop, err
		}
		cfg, err := metricsauth.TLSConfig(d.opts.TLSCertFile, d.opts.TLSKeyFile, d.certHosts())
		if err != nil {
			return stop, err
		}
		addr, err := serve(d.opts.HTTPAddr, h, cfg, "https: /healthz, /readyz, authorized /metrics")
		if err != nil {
			return stop, err
		}
		d.secureAddr.Store(&addr)
	}
	if d.opts.LocalMetricsAddr != "" {
		addr, err := serve(d.opts.LocalMetricsAddr, d.Handler(), nil, "local http: /metrics, /healthz, /readyz")
		if err != nil {
			return stop, err
		}
		d.localAddr.Store(&addr)
	}
	return stop, nil
}

// HTTPAddrs are the addresses the endpoints listen on, once Run started them ("" otherwise).
func (d *Daemon) HTTPAddrs() (secure, local string) {
	if p := d.secureAddr.Load(); p != nil {
		secure = *p
	}
	if p := d.localAddr.Load(); p != nil {
		local = *p
	}
	return secure, local
}

// certHosts are the names of a self-signed certificate: the node's.
func (d *Daemon) certHosts() []string {
	hosts := []string{"localhost", "127.0.0.1"}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	if d.opts.NodeName != "" {
		hosts = append(hosts, d.opts.NodeName)
	}
	return hosts
}

// secureHandler serves the node address: the probes to anyone, /metrics behind the guard.
func (d *Daemon) secureHandler() (http.Handler, error) {
	mux := d.probes()
	if !d.opts.MetricsAuth {
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "/metrics is served on the agent's local address only (--metrics-auth=false)", http.StatusNotFound)
		})
		return mux, nil
	}
	mk := d.opts.KubeClient
	if mk == nil {
		mk = inClusterClient
	}
	client, err := mk()
	if err != nil {
		return nil, fmt.Errorf("metrics authentication needs the API server (--metrics-auth=false serves /metrics on the local address only): %w", err)
	}
	mux.Handle("/metrics", metricsauth.New(client, "/metrics", d.opts.Log).Wrap(d.metricsHandler(d.registry())))
	return mux, nil
}

// Handler serves /metrics, /healthz and /readyz to anyone: the local endpoints.
func (d *Daemon) Handler() http.Handler {
	mux := d.probes()
	mux.Handle("/metrics", d.metricsHandler(d.registry()))
	return mux
}

// probes serves /healthz (the process serves) and /readyz (every resource is registered with
// the kubelet).
func (d *Daemon) probes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !d.Ready() {
			http.Error(w, "not registered with the kubelet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
