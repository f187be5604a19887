// Package cluster runs a real one-node Kubernetes cluster on this machine, without a container
// engine or kind: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubelet
// (v1.34.4, one multi-call binary built by hack/build-kube.sh), containerd v2 with runc and CDI
// (hack/build-tools.sh), the CNI plugins, and the memifnet image imported under the names the
// manifests use, so that `kubectl apply -k manifests/` works unchanged with no registry.
//
// Everything listens on 127.0.0.1. The processes outlive `cluster up` and are remembered in
// <base>/state.json by PID and start time; every change made to the host outside <base> is
// written there before it is made. Down stops the processes by PID and undoes the changes in
// reverse order, so the machine is left as it was. Used by hack/cluster (make cluster-up,
// cluster-down), the e2e tier 3 and the demo.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/testutil"
)

// Fixed names and addresses of the cluster.
const (
	DefaultBase = "/run/memifnet-cluster"
	// NodeName is an IP address, as in Kubernetes's own hack/local-up-cluster.sh: a kubelet whose
	// hostname override is an IP reports it as the node's InternalIP, which is how the API server
	// reaches it (logs, exec). --node-ip cannot say 127.0.0.1 (the kubelet refuses loopback
	// there), and the kubelet listens on 127.0.0.1 only.
	NodeName    = "127.0.0.1"
	ServiceCIDR = "10.96.0.0/16"
	// ServiceIP is the ClusterIP of the `kubernetes` Service (the first of ServiceCIDR).
	ServiceIP = "10.96.0.1"
	PodSubnet = "10.244.88.0/24"
	// BridgeIP is the host's address on the pod network (the pods' route to the service range).
	BridgeIP      = "10.244.88.1"
	Bridge        = "memifcl0"
	APIServerPort = 6443
)

// hostPaths are the host paths a node's components create. Each one that does not exist when
// the cluster comes up is removed when it goes down (after unmounting what is below it); one
// that exists is left alone. The CNI dirs and the kubelet's kubeconfig are the cluster's Paths
// (makeDirs).
var hostPaths = []string{
	names.KubeletDir, "/var/log/pods", "/var/log/containers",
	names.StateDir, "/run/k8s.cni.cncf.io", "/run/containerd", "/var/lib/cni",
	"/etc/cdi", "/run/cdi", "/run/nri", "/run/multus", "/opt/containerd",
	"/var/lib/containerd",
}

// Inputs are the programs and the image a cluster runs (see Build).
type Inputs struct {
	KubeDir       string `json:"kubeDir"`       // hack/build-kube.sh: kube-apiserver, kubelet, kubectl, etcd, ...
	ContainerdDir string `json:"containerdDir"` // hack/build-tools.sh containerd
	MultusDir     string `json:"multusDir"`     // hack/build-tools.sh multus
	// MultusThickDir: hack/build-tools.sh multus-thick (multus-daemon, multus-shim, install_multus,
	// passthru-cni).
	MultusThickDir string `json:"multusThickDir"`
	Image          string `json:"image"`      // `make image` tarball
	PauseImage     string `json:"pauseImage"` // `make image`'s pause image tarball: the sandbox image
	DPDKImage      string `json:"dpdkImage"`  // `make image-dpdk`'s tarball, if built (imported as tagged)
}

// State is <base>/state.json.
type State struct {
	Inputs  Inputs    `json:"inputs"`
	Daemons []*Daemon `json:"daemons"`
	Changes []Change  `json:"changes"`
	// Chains are the iptables chains (table/chain, IPv4 and IPv6) present before the cluster
	// came up: the kubelet adds canary chains that Down removes.
	Chains []string `json:"chains"`
	// CNIEntries are the entries of the node's CNI directories (bin and conf) before the
	// cluster came up, when those directories existed: what workloads install there while it
	// runs (memif-cni, which `kubectl delete` leaves by design) goes with the cluster.
	CNIEntries []string `json:"cniEntries"`
	// Nodes is the cluster's layout (Layout), written before any node is started.
	Nodes []NodeSpec `json:"nodes"`
	// Paths are the node paths the cluster runs with (zero in a state file from before clusters
	// had them: Kubeadm).
	Paths Paths `json:"paths"`
}

// Cluster is one cluster rooted at Base.
type Cluster struct {
	Repo string
	Base string
	In   Inputs
	Logf func(format string, a ...any)
	// NodeCount is how many nodes Up brings up (0 means 1): node 1 is the machine, the others
	// are namespaces of it (nodes.go).
	NodeCount int
	// Paths are the CNI dirs and the kubelet kubeconfig of every node (New: Kubeadm). Set before
	// Up; a cluster found up with other paths is taken down first. Up and Down set it to the
	// paths of the cluster at Base.
	Paths Paths

	mu         sync.Mutex
	state      State
	imageNames []string // manifestImages, once
}

// New returns a handle on the cluster at base (running or not).
func New(repo, base string, in Inputs, logf func(string, ...any)) *Cluster {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Cluster{Repo: repo, Base: base, In: in, Logf: logf, Paths: Kubeadm}
}

// Path joins elem under Base.
func (c *Cluster) Path(elem ...string) string {
	return filepath.Join(append([]string{c.Base}, elem...)...)
}

// Kubeconfig is the admin kubeconfig (system:masters).
func (c *Cluster) Kubeconfig() string { return c.Path("admin.kubeconfig") }

// Kubectl is the kubectl binary.
func (c *Cluster) Kubectl() string { return filepath.Join(c.In.KubeDir, "kubectl") }

// LogDir holds one log file per component.
func (c *Cluster) LogDir() string { return c.Path("logs") }

// ContainerdSock is the CRI endpoint.
func (c *Cluster) ContainerdSock() string { return c.Path("containerd", "containerd.sock") }

func (c *Cluster) statePath() string { return c.Path("state.json") }

// save writes the state file (atomically: a crash leaves the old or the new one).
func (c *Cluster) save() error {
	b, err := json.MarshalIndent(&c.state, "", "  ")
	if err != nil {
		return err
	}
	return safefs.WriteFile(c.statePath(), b, 0o600, safefs.WriteOptions{Durable: true})
}

func (c *Cluster) load() (bool, error) {
	b, err := os.ReadFile(c.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return false, fmt.Errorf("%s: %w", c.statePath(), err)
	}
	c.state = st
	return true, nil
}

// record writes ch to the state file; call it before making the change.
func (c *Cluster) record(ch Change) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state.Changes = append(c.state.Changes, ch)
	return c.save()
}

// addDaemon records d; a component started again (StartNode) replaces the record of its
// ended instance, so that Daemon and the health check see the one that runs.
func (c *Cluster) addDaemon(d *Daemon) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, old := range c.state.Daemons {
		if old.Name == d.Name && !old.Alive() {
			c.state.Daemons[k] = d
			return c.save()
		}
	}
	c.state.Daemons = append(c.state.Daemons, d)
	return c.save()
}

// Daemon returns the running component name (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, containerd, kubelet), or nil.
func (c *Cluster) Daemon(name string) *Daemon {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.state.Daemons {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// Up brings the cluster up, or checks that the one already up at Base is healthy (and imports
// the image again, which may have been rebuilt). A cluster found unhealthy is taken down first.
func (c *Cluster) Up(ctx context.Context) error {
	start := time.Now()
	want, paths := max(c.NodeCount, 1), c.Paths.orDefault()
	done, err := c.reuse(ctx, want, paths)
	c.Paths = paths
	if err != nil || done {
		return err
	}
	if err := preflight(c.In); err != nil {
		return err
	}
	if err := os.MkdirAll(c.Base, 0o755); err != nil {
		return err
	}
	c.state = State{Inputs: c.In, Nodes: Layout(want), Paths: paths}
	if c.state.Chains, err = iptablesChains(); err != nil {
		return err
	}
	for _, d := range []string{paths.CNIBinDir, paths.CNIConfDir} {
		ents, _ := filepath.Glob(filepath.Join(d, "*"))
		c.state.CNIEntries = append(c.state.CNIEntries, ents...)
	}
	if err := c.save(); err != nil {
		return err
	}
	steps := []struct {
		what string
		fn   func(context.Context) error
	}{
		{"host", c.prepareHost},
		{"certificates", c.writePKI},
		{"etcd", c.startEtcd},
		{"kube-apiserver", c.startAPIServer},
		{"kube-controller-manager", c.startControllerManager},
		{"kube-scheduler", c.startScheduler},
		{"containerd", c.startContainerd},
		{"images", c.importImages},
		{"kubelet", c.startKubelet},
		{"node network", c.nodeBridge},
		{"nodes", c.startExtraNodes},
		{"node labels", c.labelNodes},
	}
	for _, s := range steps {
		t := time.Now()
		if err := s.fn(ctx); err != nil {
			return fmt.Errorf("cluster up: %s: %w (logs in %s)", s.what, err, c.LogDir())
		}
		c.Logf("%s ready (%.1fs)", s.what, time.Since(t).Seconds())
	}
	c.Logf("cluster up in %.1fs: %s; component logs in %s", time.Since(start).Seconds(), nodeSummary(c.state.Nodes), c.LogDir())
	return nil
}

// reuse looks at the cluster at Base, if any: a healthy one of want nodes (or any number, when
// NodeCount is 0) on paths is reused, its images imported again (done); any other is taken down.
func (c *Cluster) reuse(ctx context.Context, want int, paths Paths) (done bool, err error) {
	found, err := c.load()
	if err != nil || !found {
		return false, err
	}
	why := ""
	switch {
	case len(c.state.Nodes) != want && c.NodeCount != 0:
		why = fmt.Sprintf("has %d nodes, %d asked for", len(c.state.Nodes), want)
	case c.state.Paths.orDefault() != paths:
		why = fmt.Sprintf("runs with paths %+v, %+v asked for", c.state.Paths.orDefault(), paths)
	default:
		if err := c.healthy(ctx); err != nil {
			why = fmt.Sprintf("is not healthy (%v)", err)
		}
	}
	if why == "" {
		c.Logf("cluster at %s is up and healthy", c.Base)
		return true, c.importImages(ctx)
	}
	c.Logf("cluster at %s %s: taking it down first", c.Base, why)
	return false, c.Down()
}

// preflight refuses to start where a cluster component would fight another one.
func preflight(in Inputs) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (mounts, network namespaces, cgroups, iptables)")
	}
	for _, f := range []string{
		filepath.Join(in.KubeDir, "kubelet"), filepath.Join(in.KubeDir, "etcd"),
		filepath.Join(in.ContainerdDir, "containerd"), filepath.Join(in.ContainerdDir, "containerd-shim-runc-v2"),
		in.Image, in.PauseImage,
	} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("missing input: %w", err)
		}
	}
	for _, p := range []string{"runc", "iptables", "ip"} {
		if _, err := lookPath(p); err != nil {
			return fmt.Errorf("%s not found (apt-get install runc iptables iproute2): %w", p, err)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		return errors.New("no CNI plugins in /usr/lib/cni: apt-get install containernetworking-plugins")
	}
	if _, err := os.Stat(names.KubeletDir); err == nil {
		return fmt.Errorf("%s exists: a kubelet runs or ran on this machine (the e2e tier 2, or another cluster); stop it or remove the directory", names.KubeletDir)
	}
	for _, port := range []int{2379, 2380, APIServerPort, 10248, 10250, 10257, 10259} {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("127.0.0.1:%d is in use (another cluster or kubelet?): %w", port, err)
		}
		l.Close()
	}
	return nil
}

// healthy checks that every component runs and the node is Ready.
func (c *Cluster) healthy(ctx context.Context) error {
	names := map[string]bool{}
	for _, d := range c.state.Daemons {
		if !d.Alive() {
			return fmt.Errorf("%s (pid %d) is not running", d.Name, d.PID)
		}
		names[d.Name] = true
	}
	want := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "containerd", "kubelet"}
	for _, s := range c.Nodes()[1:] {
		want = append(want, daemonName(s.Index, "holder"), daemonName(s.Index, "containerd"), daemonName(s.Index, "kubelet"))
	}
	for _, n := range want {
		if !names[n] {
			return fmt.Errorf("%s was never started", n)
		}
	}
	if c.In == (Inputs{}) {
		c.In = c.state.Inputs
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return c.waitNodesReady(ctx, 15*time.Second)
}

// Down stops the cluster at Base and undoes every change it made to the host, newest first. It
// works on a cluster that is up, half up or already down, and reports every failure.
func (c *Cluster) Down() error {
	found, err := c.load()
	if err != nil {
		return err
	}
	if !found {
		if _, err := os.Stat(c.Base); err == nil {
			return fmt.Errorf("%s exists but has no state.json: not a cluster this program made; remove it by hand", c.Base)
		}
		c.Logf("no cluster at %s", c.Base)
		return nil
	}
	c.Paths = c.state.Paths.orDefault()
	start := time.Now()
	var errs []error
	byName := map[string]*Daemon{}
	for _, d := range c.state.Daemons {
		byName[d.Name] = d
	}
	stop := func(name string, grace time.Duration) {
		if d := byName[name]; d != nil {
			if err := d.Stop(sigterm, grace); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// The nodes after the first (stopExtraNodes), then node 1: the kubelet first, so that it
	// does not restart what goes next; then every pod sandbox through the CRI (containerd runs
	// CNI DEL for each: memif-cni undoes its mounts), then containerd and any shim left, then
	// the control plane.
	errs = append(errs, c.stopExtraNodes(byName)...)
	stop("kubelet", 20*time.Second)
	if d := byName["containerd"]; d != nil && d.Alive() {
		if err := removeSandboxes(c.ContainerdSock()); err != nil {
			errs = append(errs, err)
		}
	}
	stop("containerd", 30*time.Second)
	for _, pid := range processesWith("containerd-shim", c.ContainerdSock()) {
		killPID(pid)
	}
	for _, n := range []string{"kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		stop(n, 20*time.Second)
	}
	if err := removeNewChains(c.state.Chains); err != nil {
		errs = append(errs, err)
	}
	if err := removeNewEntries(c.state.CNIEntries, c.Paths.CNIBinDir, c.Paths.CNIConfDir); err != nil {
		errs = append(errs, err)
	}
	removeKubeCgroups()
	if err := unmountAgentMounts(names.StateDir); err != nil {
		errs = append(errs, err)
	}
	for i := len(c.state.Changes) - 1; i >= 0; i-- {
		ch := c.state.Changes[i]
		if err := ch.undo(); err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", ch, err))
		}
	}
	if err := testutil.UnmountAll(c.Base); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		// Keep the state (and the logs): a second Down retries what failed.
		return fmt.Errorf("cluster down: %w", errors.Join(errs...))
	}
	if err := os.RemoveAll(c.Base); err != nil {
		return err
	}
	c.Logf("cluster down in %.1fs: processes stopped, host changes undone, %s removed", time.Since(start).Seconds(), c.Base)
	return nil
}

const sigterm = syscall.SIGTERM

// removeNewEntries removes the entries of dirs that are not in before.
func removeNewEntries(before []string, dirs ...string) error {
	had := map[string]bool{}
	for _, e := range before {
		had[e] = true
	}
	var errs []error
	for _, d := range dirs {
		ents, _ := filepath.Glob(filepath.Join(d, "*"))
		for _, e := range ents {
			if had[e] {
				continue
			}
			if err := testutil.UnmountAll(e); err != nil {
				errs = append(errs, err)
			}
			if err := os.RemoveAll(e); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
