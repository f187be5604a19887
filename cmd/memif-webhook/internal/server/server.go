// Package server wires the webhook together: the TLS endpoints every replica serves, the health
// endpoints, and the work one replica does at a time under a Lease (issuing and renewing the
// certificate, injecting the CA bundle, explaining pending link pods). With cert-manager
// (Identity.External) the leader only explains: cert-manager issues, its cainjector injects.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/memifnet/memifnet/cmd/memif-webhook/internal/admission"
	"github.com/memifnet/memifnet/cmd/memif-webhook/internal/cainject"
	"github.com/memifnet/memifnet/cmd/memif-webhook/internal/certs"
	"github.com/memifnet/memifnet/cmd/memif-webhook/internal/explain"
)

// Options are the webhook's settings (flags of cmd/memif-webhook).
type Options struct {
	Listen, HealthListen string
	Identity             certs.Identity
	Configuration        string // name of both webhook configurations
	Lease, Holder        string // leader election Lease (in Identity.Namespace) and this replica's name
	// Interval between passes of the certificate, injection, readiness and explain loops.
	Interval time.Duration
}

// Run serves until ctx ends, then shuts the servers down and gives the Lease up.
func Run(ctx context.Context, cs kubernetes.Interface, o Options, log *slog.Logger) error {
	var loader certs.Loader
	var ready atomic.Value
	ready.Store("starting")
	target := cainject.Target{Configuration: o.Configuration, Namespace: o.Identity.Namespace, Service: o.Identity.Service}

	mux := http.NewServeMux()
	(&admission.Handler{Peers: admission.APIPeers(cs), Log: log}).Register(mux)
	srv := &http.Server{Addr: o.Listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{GetCertificate: loader.GetCertificate, MinVersion: tls.VersionTLS12}}
	health := http.NewServeMux()
	health.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	health.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := ready.Load().(string); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	hsrv := &http.Server{Addr: o.HealthListen, Handler: health, ReadHeaderTimeout: 10 * time.Second}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 3)
	go func() { errc <- serve(srv, true) }()
	go func() { errc <- serve(hsrv, false) }()
	go func() { errc <- lead(ctx, cs, o, target, log) }()
	go func() {
		// Every replica: serve what the Secret holds; ready once the configurations trust it.
		for {
			ready.Store(readiness(ctx, cs, &loader, o.Identity, target, log))
			select {
			case <-ctx.Done():
				return
			case <-time.After(o.Interval):
			}
		}
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	srv.Shutdown(sctx)
	hsrv.Shutdown(sctx)
	return err
}

func serve(s *http.Server, useTLS bool) error {
	l, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return err
	}
	if useTLS {
		err = s.ServeTLS(l, "", "")
	} else {
		err = s.Serve(l)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// readiness loads the certificate and says why the replica is not ready ("" when it is).
func readiness(ctx context.Context, cs kubernetes.Interface, l *certs.Loader, id certs.Identity, t cainject.Target, log *slog.Logger) string {
	bundles, err := cainject.Bundles(ctx, cs, t)
	if err != nil {
		return fmt.Sprintf("reading the webhook configurations: %v", err)
	}
	trusted := func(ca []byte) bool {
		for _, b := range bundles {
			if !certs.Trusts(b, ca) {
				return false
			}
		}
		return len(bundles) > 0
	}
	changed, err := l.Load(ctx, cs, id, trusted)
	if err != nil {
		return err.Error()
	}
	if changed {
		log.Info("serving a new certificate", "secret", id.Namespace+"/"+id.Secret)
	}
	if len(bundles) == 0 {
		return fmt.Sprintf("no webhook configuration %s calls service %s/%s", t.Configuration, t.Namespace, t.Service)
	}
	if !trusted(l.Issuer()) {
		if id.External {
			return fmt.Sprintf("the webhook configurations do not trust the served certificate yet (cert-manager's cainjector injects %s of secret %s/%s where the annotation cert-manager.io/inject-ca-from names the Certificate)",
				certs.KeyCA, id.Namespace, id.Secret)
		}
		return "the webhook configurations do not trust the served certificate yet"
	}
	return ""
}

// lead runs the leader's work while this replica holds the Lease; it returns when ctx ends, or
// with an error when the Lease is lost (the process restarts rather than run the work twice).
func lead(ctx context.Context, cs kubernetes.Interface, o Options, t cainject.Target, log *slog.Logger) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.Identity.Namespace, Name: o.Lease},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.Holder},
	}
	lost := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, ReleaseOnCancel: true, Name: o.Lease,
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				log.Info("leading", "lease", o.Identity.Namespace+"/"+o.Lease)
				leaderWork(ctx, cs, o, t, log)
			},
			OnStoppedLeading: func() { close(lost) },
		},
	})
	if err != nil {
		return err
	}
	le.Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	<-lost
	return errors.New("lost the leader lease")
}

func leaderWork(ctx context.Context, cs kubernetes.Interface, o Options, t cainject.Target, log *slog.Logger) {
	bc := record.NewBroadcaster(record.WithContext(ctx))
	bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	defer bc.Shutdown()
	ex := &explain.Explainer{Client: cs, Log: log,
		Recorder: bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "memifnet-webhook"})}
	if o.Identity.External {
		ex.Loop(ctx, o.Interval)
		return
	}
	go ex.Loop(ctx, o.Interval)
	for {
		certPass(ctx, cs, o.Identity, t, log)
		select {
		case <-ctx.Done():
			return
		case <-time.After(o.Interval):
		}
	}
}

// certPass issues or renews the certificate and injects its bundle (self-managed mode only).
func certPass(ctx context.Context, cs kubernetes.Interface, id certs.Identity, t cainject.Target, log *slog.Logger) {
	bundle, changed, err := certs.Issue(ctx, cs, id, time.Now())
	if err != nil {
		log.Error("certificate", "err", err)
		return
	}
	if changed {
		log.Info("issued a serving certificate", "secret", id.Namespace+"/"+id.Secret)
	}
	if n, err := cainject.Inject(ctx, cs, t, bundle); err != nil {
		log.Error("injecting the CA bundle", "err", err)
	} else if n > 0 {
		log.Info("injected the CA bundle", "configurations", n)
	}
}
