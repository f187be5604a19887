// Command memif-webhook is memifnet's admission webhook: it turns a pod's memifnet.io/ports
// annotation into a socket limit and a pod affinity that keeps each link's pods on one
// node, refuses bad annotations naming the field, and explains link pods that cannot be placed.
// See docs/webhook.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/memifnet/memifnet/cmd/memif-webhook/internal/server"
)

func main() {
	var o server.Options
	flag.StringVar(&o.Listen, "listen", ":8443", "address of the admission endpoints (TLS)")
	flag.StringVar(&o.HealthListen, "health-listen", ":9103", "address of /healthz and /readyz (plain HTTP)")
	flag.StringVar(&o.Identity.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the Service, Secret and Lease (default $POD_NAMESPACE)")
	flag.StringVar(&o.Identity.Service, "service", "memifnet-webhook", "the webhook's Service (the certificate's name)")
	flag.StringVar(&o.Identity.Secret, "secret", "memifnet-webhook-tls", "Secret holding the CA and serving certificate")
	flag.DurationVar(&o.Identity.Validity, "cert-validity", 365*24*time.Hour, "lifetime of a new certificate; renewed when a third is left")
	flag.StringVar(&o.Configuration, "configuration", "memifnet-webhook", "name of the Mutating- and ValidatingWebhookConfiguration to inject the CA bundle into")
	flag.StringVar(&o.Lease, "lease", "memifnet-webhook", "Lease for leader election")
	flag.StringVar(&o.Holder, "identity", os.Getenv("POD_NAME"), "this replica's name in the Lease (default $POD_NAME)")
	flag.DurationVar(&o.Interval, "interval", 5*time.Second, "period of the certificate, CA bundle, readiness and explain passes")
	certificates := flag.String("certificates", "self", "self: issue, rotate and inject the certificate; external: serve the one cert-manager writes into --secret (its cainjector injects the CA)")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (default: in-cluster)")
	flag.Parse()
	switch *certificates {
	case "self":
	case "external":
		o.Identity.External = true
	default:
		fmt.Fprintf(os.Stderr, "memif-webhook: --certificates=%q: want self or external\n", *certificates)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(o, *kubeconfig, log); err != nil {
		log.Error("memif-webhook", "err", err)
		os.Exit(1)
	}
}

func run(o server.Options, kubeconfig string, log *slog.Logger) error {
	if o.Identity.Namespace == "" || o.Holder == "" {
		return fmt.Errorf("--namespace and --identity are required (or $POD_NAMESPACE and $POD_NAME)")
	}
	if o.Identity.Validity < time.Hour {
		return fmt.Errorf("--cert-validity=%s: at least 1h", o.Identity.Validity)
	}
	cfg, err := rest.InClusterConfig()
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return fmt.Errorf("API server client: %w", err)
	}
	// Admission waits on the peer lookups: the client must not throttle them.
	cfg.QPS, cfg.Burst = 100, 200
	cfg.UserAgent = "memif-webhook"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info("starting", "listen", o.Listen, "external-certificates", o.Identity.External, "namespace", o.Identity.Namespace, "identity", o.Holder)
	return server.Run(ctx, cs, o, log)
}
