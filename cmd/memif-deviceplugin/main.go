// Command memif-deviceplugin is the node agent that offers memif socket
// slots (memifnet.io/socket) and hugepage pools (memifnet.io/<pool>) to the
// kubelet. See docs/deviceplugin.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/memifnet/memifnet/cmd/internal/devinfo"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/config"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/daemon"
	"github.com/memifnet/memifnet/internal/names"
)

// version is the agent's build, set at link time (make image: -ldflags -X main.version=$(VERSION));
// it is logged at start, so a rollout shows which build each pod runs.
var version = "dev"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "memif-deviceplugin:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		opts      daemon.Options
		cfgPath   string
		logLevel  slog.Level
		logFormat string
	)
	flag.StringVar(&cfgPath, "config", "", "YAML config file (default: 64 socket slots and pool hugepool of 4 x 64Mi units per NUMA node)")
	flag.StringVar(&opts.KubeletDir, "kubelet-dir", names.KubeletDir, "kubelet root directory (device-plugins/ and pod-resources/ live under it)")
	flag.StringVar(&opts.StateDir, "state-dir", names.StateDir, "memifnet state directory (sockets/, pools/, deviceplugin/)")
	flag.StringVar(&opts.StateParentDir, "state-dir-parent", "", "the host directory holding --state-dir, mounted apart from it (the manifests: /var/lib at /host/var/lib): an uninstall removes the emptied state dir through it; empty: the state dir stays")
	flag.StringVar(&opts.SysfsRoot, "sysfs-root", "/sys", "sysfs root, read for NUMA nodes")
	flag.StringVar(&opts.DevinfoDir, "devinfo-dir", devinfo.DefaultDir, "directory for NPWG device-info files")
	flag.StringVar(&opts.CDIDir, "cdi-dir", "", "write CDI specs here (e.g. /var/run/cdi) and answer Allocate with CDI devices instead of mounts")
	flag.StringVar(&opts.HTTPAddr, "http-address", ":9102", "node address of the HTTPS endpoints: /healthz and /readyz, and /metrics for authorized bearer tokens; empty disables")
	flag.BoolVar(&opts.MetricsAuth, "metrics-auth", true, "serve /metrics on --http-address to bearer tokens the API server authorizes for get /metrics (TokenReview, SubjectAccessReview); false: /metrics only on --local-metrics-address")
	flag.StringVar(&opts.TLSCertFile, "tls-cert-file", "", "certificate (PEM) of --http-address, re-read when it changes; empty: a self-signed one made at start")
	flag.StringVar(&opts.TLSKeyFile, "tls-private-key-file", "", "key (PEM) of --tls-cert-file")
	flag.StringVar(&opts.LocalMetricsAddr, "local-metrics-address", "127.0.0.1:9101", "loopback address of plain-HTTP /metrics, /healthz and /readyz for node-local tools and kubectl-memifnet (port-forward); empty disables")
	flag.StringVar(&opts.NodeName, "node-name", os.Getenv("NODE_NAME"), "the node's name (default $NODE_NAME): the DRA driver's ResourceSlices (config dra.enabled), and at a stop whether --daemonset still selects the node (if not, memifnet leaves it: the node is cleaned)")
	flag.StringVar(&opts.DaemonSet, "daemonset", "", "the agent's DaemonSet, namespace/name: clean the node when it is deleted (an uninstall) or no longer selects --node-name; empty: never clean")
	flag.StringVar(&opts.CNIBinDir, "cni-bin-dir", "", "the node's CNI bin dir: an uninstall with no memif pod left removes memif-cni's binaries from it; empty: they stay")
	flag.DurationVar(&opts.ReclaimInterval, "reclaim-interval", 0, "how often to ask PodResources which devices are free (default 5s)")
	flag.TextVar(&logLevel, "log-level", slog.LevelInfo, "debug, info, warn or error")
	flag.StringVar(&logFormat, "log-format", "json", "json or text")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}

	hopts := &slog.HandlerOptions{Level: logLevel}
	switch logFormat {
	case "json":
		opts.Log = slog.New(slog.NewJSONHandler(os.Stderr, hopts))
	case "text":
		opts.Log = slog.New(slog.NewTextHandler(os.Stderr, hopts))
	default:
		return fmt.Errorf("-log-format: %q is not json or text", logFormat)
	}
	slog.SetDefault(opts.Log)
	opts.Log.Info("memif-deviceplugin starting", "version", version)
	opts.Version = version

	opts.Config = config.Default()
	if cfgPath != "" {
		c, err := config.Load(cfgPath)
		if err != nil {
			return err
		}
		opts.Config = c
	}
	d, err := daemon.New(opts)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return d.Run(ctx)
}
