// Package daemon wires the node agent together: the slot and pool providers, the device plugin
// (one resource and one kubelet server per resource, health checks, background reclaim through
// PodResources), the DRA driver when the config enables it, and the HTTP endpoints for metrics
// and probes.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/memifnet/memifnet/cmd/internal/devinfo"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/config"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device/cdi"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device/numa"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device/pools"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device/slots"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/deviceplugin/dpserver"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/deviceplugin/ledger"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/deviceplugin/podresources"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/deviceplugin/resource"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/dra"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/observe/events"
	"github.com/memifnet/memifnet/internal/names"
)

// Options are what the agent runs with: the config file (parsed by main), main's flags, and the
// DRA driver's API client (tests pass their own). Zero durations, SysfsRoot, DevinfoDir and Log
// take the defaults in defaults; Config is used as given.
type Options struct {
	Config     config.Config
	KubeletDir string // /var/lib/kubelet
	StateDir   string // /var/lib/memifnet
	SysfsRoot  string // /sys
	DevinfoDir string // devinfo.DefaultDir
	CDIDir     string // empty: no CDI, Allocate returns mounts
	// HTTPAddr is the node address of the HTTPS endpoints (/healthz, /readyz, and /metrics
	// when MetricsAuth); empty: none. TLSCertFile and TLSKeyFile are its certificate, empty: a
	// self-signed one made at start. LocalMetricsAddr is the loopback address of the plain HTTP
	// endpoints (/metrics too, unauthenticated); empty: none. http.go says why.
	HTTPAddr                string
	TLSCertFile, TLSKeyFile string
	MetricsAuth             bool // /metrics on HTTPAddr for authorized tokens; false: not there
	LocalMetricsAddr        string
	// NodeName is the node's name, for the DRA driver's ResourceSlices (config dra.enabled) and
	// to tell at a stop whether DaemonSet still selects the node (owner).
	NodeName string
	// KubeClient makes the DRA driver's API client (config dra.enabled), the one that watches
	// DaemonSet and the one that reviews the tokens of /metrics (MetricsAuth); nil: in-cluster
	// config.
	KubeClient func() (kubernetes.Interface, error)
	// DaemonSet is the agent's own DaemonSet, namespace/name: when it is deleted (memifnet is
	// uninstalled), the agent cleans the node as it stops (package owner). Empty: the agent never
	// cleans, every stop is a restart.
	DaemonSet string
	// CNIBinDir is the node's CNI bin directory: at an uninstall with no memif pod left on the
	// node, the agent removes memif-cni's binaries from it. Empty: they stay.
	CNIBinDir string
	// Version is the agent's build, the version label of memifnet_build_info.
	Version string
	// StateParentDir is the host directory holding StateDir (/var/lib), mounted apart from
	// StateDir's own volume: an uninstall removes the emptied state dir through it (from inside
	// its own volume it is a mount point). Empty: the empty state dir stays at an uninstall.
	StateParentDir string

	HealthInterval  time.Duration // device checks
	ReclaimInterval time.Duration // PodResources polls
	// ReclaimGrace keeps a device allocated less than this long ago from
	// being scrubbed in the background even if PodResources does not list
	// it yet.
	ReclaimGrace time.Duration
	Log          *slog.Logger
}

// defaults fills the zero fields that have a default (as main's flags do).
func (o *Options) defaults() {
	if o.HealthInterval == 0 {
		o.HealthInterval = 250 * time.Millisecond
	}
	if o.ReclaimInterval == 0 {
		o.ReclaimInterval = 5 * time.Second
	}
	if o.ReclaimGrace == 0 {
		o.ReclaimGrace = 30 * time.Second
	}
	if o.SysfsRoot == "" {
		o.SysfsRoot = "/sys"
	}
	if o.DevinfoDir == "" {
		o.DevinfoDir = devinfo.DefaultDir
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Daemon is a configured plugin.
type Daemon struct {
	opts      Options
	resources []*resource.Resource
	servers   []*dpserver.Server
	pools     []*pools.Provider
	dra       *dra.DeviceState
	draDriver atomic.Pointer[dra.Driver]
	running   sync.WaitGroup
	started   time.Time
	// the endpoints' bound addresses (HTTPAddrs)
	secureAddr, localAddr atomic.Pointer[string]
}

// New builds providers and resources: creates slot directories, mounts
// pools and faults their units in. It does not talk to the kubelet yet.
func New(opts Options) (*Daemon, error) {
	opts.defaults()
	if err := opts.Config.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := opts.checkHTTP(); err != nil {
		return nil, err
	}
	nodes, err := numa.Nodes(opts.SysfsRoot)
	if err != nil {
		return nil, err
	}
	d := &Daemon{opts: opts, started: time.Now()}
	var cdiW *cdi.Writer
	if opts.CDIDir != "" {
		cdiW = &cdi.Writer{Dir: opts.CDIDir}
	}
	var provs []resource.Provider
	sp, err := slots.New(opts.StateDir, opts.Config.SocketSlots, nodes, opts.Config.SlotLimits, devinfo.Writer{Dir: opts.DevinfoDir}, opts.Log)
	if err != nil {
		return nil, err
	}
	provs = append(provs, sp)
	for _, pc := range opts.Config.Pools {
		pp, err := pools.New(opts.StateDir, pc, nodes, opts.Log)
		if err != nil {
			return nil, err
		}
		d.pools = append(d.pools, pp)
		provs = append(provs, pp)
	}
	if opts.Config.DRA.Enabled {
		if d.dra, err = newDRA(opts, nodes); err != nil {
			return nil, err
		}
	}
	pluginDir := filepath.Join(opts.KubeletDir, "device-plugins")
	for _, p := range provs {
		var ids []string
		for _, u := range p.Units() {
			ids = append(ids, u.ID)
		}
		statePath := filepath.Join(opts.StateDir, "deviceplugin", strings.ReplaceAll(p.Resource(), "/", "-")+".json")
		led, reason := ledger.Open(statePath, ids)
		if reason != "" {
			opts.Log.Info("device state", "resource", p.Resource(), "note", reason)
		}
		r, err := resource.New(p, led, opts.Log, cdiW)
		if err != nil {
			return nil, err
		}
		d.resources = append(d.resources, r)
		d.servers = append(d.servers, dpserver.New(r, pluginDir, opts.Log))
	}
	return d, nil
}

// newDRA makes the DRA driver's own slots (dra-slot-NNN) and pools and loads its checkpoint.
func newDRA(opts Options, nodes []int) (*dra.DeviceState, error) {
	dc := opts.Config.DRA
	if opts.NodeName == "" {
		return nil, errors.New("config dra.enabled: the node name is needed for ResourceSlices (--node-name or $NODE_NAME)")
	}
	do := dra.Options{
		DriverName: dc.Driver(), NodeName: opts.NodeName, StateDir: opts.StateDir,
		SlotsDir: filepath.Join(opts.StateDir, names.SocketsSubdir), SlotBytes: int64(opts.Config.SlotLimits.Size),
		KubeletDir: opts.KubeletDir, RecheckInterval: opts.HealthInterval,
		LinkLimits: dc.Links(),
		CDI:        cdi.Writer{Dir: opts.CDIDir}, Log: opts.Log,
	}
	if opts.CDIDir == "" {
		do.CDI.Dir = cdi.DefaultDir
	}
	sp, err := slots.NewPrefixed(opts.StateDir, names.DRASlotPrefix, dc.SocketSlots, nodes, opts.Config.SlotLimits, devinfo.Writer{Dir: opts.DevinfoDir}, opts.Log)
	if err != nil {
		return nil, fmt.Errorf("dra: %w", err)
	}
	do.Slots = sp
	for _, pc := range dc.Pools {
		pp, err := pools.New(opts.StateDir, pc, nodes, opts.Log)
		if err != nil {
			return nil, fmt.Errorf("dra: %w", err)
		}
		do.Pools = append(do.Pools, dra.Pool{Name: pc.Name, PageSize: pc.PageSize.String(), UnitSize: pc.UnitSize.Bytes, Units: pp})
	}
	return dra.NewDeviceState(do)
}

// Resources are the served resources, in order: socket slots, then pools.
func (d *Daemon) Resources() []*resource.Resource { return d.resources }

// Servers are the kubelet servers, one per resource.
func (d *Daemon) Servers() []*dpserver.Server { return d.servers }

// Ready is true when every resource is registered with the kubelet.
func (d *Daemon) Ready() bool {
	if d.dra != nil {
		if p := d.draDriver.Load(); p == nil || !p.Registered() {
			return false
		}
	}
	for _, s := range d.servers {
		if !s.Registered() {
			return false
		}
	}
	return true
}

// Run serves until ctx ends, then stops everything and returns. On a restart pools stay
// mounted and slots keep their contents: running pods keep using them and the next start picks
// them up. When the agent's DaemonSet was deleted (an uninstall), it cleans the node instead.
func (d *Daemon) Run(ctx context.Context) error {
	owned := d.watchOwner(ctx)
	err := d.serve(ctx)
	if owned != nil && err == nil {
		if gone, why := owned.Uninstalling(context.Background()); !gone {
			d.opts.Log.Info("stopping as a restart: slots and pools stay", "why", why)
		} else {
			d.opts.Log.Info("uninstall: cleaning the node", "why", why)
			return d.uninstall()
		}
	}
	return err
}

// serve runs the endpoints, the device plugin and the DRA driver until ctx ends.
func (d *Daemon) serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopHTTP, err := d.startHTTP()
	defer stopHTTP()
	if err != nil {
		return err
	}
	var rcl []podresources.Reclaimer
	for i, r := range d.resources {
		srv := d.servers[i]
		d.goRun(func() { r.WatchHealth(ctx, d.opts.HealthInterval) })
		d.goRun(func() { _ = srv.Run(ctx) })
		rcl = append(rcl, r)
	}
	pr, err := podresources.New(filepath.Join(d.opts.KubeletDir, names.PodResourcesSocket), d.opts.Log)
	if err != nil {
		return err
	}
	defer pr.Close()
	d.goRun(func() { pr.Run(ctx, rcl, d.opts.ReclaimInterval, d.opts.ReclaimGrace) })
	if d.dra != nil {
		if err := d.startDRA(ctx); err != nil {
			return err
		}
		defer d.draDriver.Load().Stop()
	}

	<-ctx.Done()
	stopHTTP()
	d.running.Wait()
	d.opts.Log.Info("stopped")
	return nil
}

// startDRA registers the DRA driver with the kubelet and publishes the node's slices.
func (d *Daemon) startDRA(ctx context.Context) error {
	mk := d.opts.KubeClient
	if mk == nil {
		mk = inClusterClient
	}
	client, err := mk()
	if err != nil {
		return fmt.Errorf("dra: kubernetes client: %w", err)
	}
	p, err := dra.Start(ctx, d.dra, client)
	if err != nil {
		return err
	}
	d.draDriver.Store(p)
	rec := events.NewRecorder(client, d.opts.NodeName, d.opts.Config.DRA.Driver(), d.opts.Log)
	d.goRun(func() { defer rec.Shutdown(); d.reportDevices(ctx, rec) })
	d.opts.Log.Info("dra: kubelet plugin started", "driver", d.opts.Config.DRA.Driver(), "node", d.opts.NodeName)
	return nil
}

// reportDevices records an Event per transition of the device plugin's devices (a unit withheld
// or back, a device out of service for a failed scrub or back; the DRA driver records its own),
// checking every health interval until ctx ends.
func (d *Daemon) reportDevices(ctx context.Context, rec *events.Recorder) {
	t := time.NewTicker(d.opts.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, r := range d.resources {
			rec.Transitions(r.Tracker().Drain())
		}
	}
}

func inClusterClient() (kubernetes.Interface, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func (d *Daemon) goRun(fn func()) {
	d.running.Add(1)
	go func() {
		defer d.running.Done()
		fn()
	}()
}
