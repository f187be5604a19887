package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/testutil"
)

// prepareHost makes the host changes a node needs, recording each first: the host paths the
// components will create, enough hugepages, the mount of the agent's state directory shared, the
// `kubernetes` Service address routed to the API server, the cluster's Paths (CNI directories,
// the kubelet kubeconfig's) and the node's primary network.
func (c *Cluster) prepareHost(ctx context.Context) error {
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			if err := c.record(Change{Kind: "path", Path: p}); err != nil {
				return err
			}
		}
	}
	if err := c.ensureHugepages(HugepagesNeeded(c.state.Nodes)); err != nil {
		return err
	}
	before, err := sharedMountFor(names.StateDir)
	if err != nil {
		return err
	}
	if err := c.record(Change{Kind: "propagation", Mounts: []MountProp{before}}); err != nil {
		return err
	}
	if err := makeShared(before.Path); err != nil {
		return fmt.Errorf("mount --make-shared %s (the node agent's state directory is on it): %w", before.Path, err)
	}
	// No kube-proxy runs here. Host-network pods (the node agent's installer) and memif-cni on
	// the node reach the API server as in-cluster clients do, at the `kubernetes` Service
	// (KUBERNETES_SERVICE_HOST=10.96.0.1, port 443). This one rule is what kube-proxy would
	// install for that Service, pointing at where the API server listens.
	spec := []string{"-d", ServiceIP + "/32", "-p", "tcp", "--dport", "443",
		"-m", "comment", "--comment", "memifnet-cluster: kubernetes Service -> kube-apiserver",
		"-j", "DNAT", "--to-destination", "127.0.0.1:" + strconv.Itoa(APIServerPort)}
	if err := c.record(Change{Kind: "iptables", Args: append([]string{"nat", "OUTPUT"}, spec...)}); err != nil {
		return err
	}
	rule := append([]string{"-t", "nat", "-A", "OUTPUT"}, spec...)
	if out, err := exec.CommandContext(ctx, "iptables", rule...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(rule, " "), err, out)
	}
	if err := c.makeDirs(c.Paths.Dirs()...); err != nil {
		return err
	}
	plugins, _ := filepath.Glob("/usr/lib/cni/*")
	for _, p := range plugins {
		dst := filepath.Join(c.Paths.CNIBinDir, filepath.Base(p))
		if _, err := os.Lstat(dst); err == nil {
			continue // the machine's own
		}
		if err := c.record(Change{Kind: "path", Path: dst}); err != nil {
			return err
		}
		if err := os.Symlink(p, dst); err != nil {
			return err
		}
	}
	if err := c.record(Change{Kind: "link", Path: Bridge}); err != nil {
		return err
	}
	if err := c.podNetworkToAPIServer(ctx); err != nil {
		return err
	}
	if err := c.record(Change{Kind: "path", Path: c.Paths.Conflist()}); err != nil {
		return err
	}
	return writeJSON(c.Paths.Conflist(), c.primaryNetwork())
}

// podNetworkToAPIServer connects the pod network and the API server both ways, for pods that
// are API clients or webhooks (memif-webhook), without kube-proxy and without the API server
// leaving 127.0.0.1:
//   - the bridge is made here (the bridge plugin takes an existing one) with BridgeIP, so the
//     host, and the API server calling a webhook at its endpoint's pod IP
//     (--enable-aggregator-routing), reaches the pods over the connected route;
//   - pods route the service range to BridgeIP (primaryNetwork), and this PREROUTING rule sends
//     the `kubernetes` Service (10.96.0.1:443, KUBERNETES_SERVICE_HOST) to 127.0.0.1:6443, like
//     kube-proxy's rule for it. DNAT to a loopback address needs route_localnet on the bridge
//     (only there; the setting goes with the bridge when Down deletes it).
//
// The bridge plugin keeps isGateway false, so it does not switch on IP forwarding host-wide:
// nothing is forwarded, everything here is delivered to the host.
func (c *Cluster) podNetworkToAPIServer(ctx context.Context) error {
	run := func(args ...string) error {
		if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", Bridge)); err != nil {
		if err := run("ip", "link", "add", Bridge, "type", "bridge"); err != nil {
			return err
		}
	}
	if err := run("ip", "addr", "replace", BridgeIP+"/"+strings.SplitN(PodSubnet, "/", 2)[1], "dev", Bridge); err != nil {
		return err
	}
	if err := run("ip", "link", "set", Bridge, "up"); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join("/proc/sys/net/ipv4/conf", Bridge, "route_localnet"), []byte("1"), 0o644); err != nil {
		return err
	}
	spec := []string{"-i", Bridge, "-s", PodSubnet, "-d", ServiceIP + "/32", "-p", "tcp", "--dport", "443",
		"-m", "comment", "--comment", "memifnet-cluster: kubernetes Service from pods -> kube-apiserver",
		"-j", "DNAT", "--to-destination", "127.0.0.1:" + strconv.Itoa(APIServerPort)}
	if err := c.record(Change{Kind: "iptables", Args: append([]string{"nat", "PREROUTING"}, spec...)}); err != nil {
		return err
	}
	if err := run(append([]string{"iptables", "-t", "nat", "-A", "PREROUTING"}, spec...)...); err != nil {
		return err
	}
	// route_localnet also lets a pod address 127.0.0.1 itself (a route via the bridge): it would
	// reach etcd, the kubelet and every other loopback-only port of the node. Only the rule above
	// may bring pod traffic to loopback (kube-proxy guards its own route_localnet the same way,
	// CVE-2020-8558).
	guard := []string{"-i", Bridge, "-d", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate", "DNAT",
		"-m", "comment", "--comment", "memifnet-cluster: pods reach loopback only through the kubernetes Service",
		"-j", "DROP"}
	if err := c.record(Change{Kind: "iptables", Args: append([]string{"filter", "INPUT"}, guard...)}); err != nil {
		return err
	}
	return run(append([]string{"iptables", "-t", "filter", "-I", "INPUT"}, guard...)...)
}

// primaryNetwork is the node's pod network: a bridge not attached to any NIC, host-local IPAM
// with its leases under Base; pods route the service range to the host (podNetworkToAPIServer).
func (c *Cluster) primaryNetwork() map[string]any {
	return map[string]any{
		"cniVersion": "1.0.0",
		"name":       "memifnet-cluster",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": Bridge, "isGateway": false, "ipMasq": false,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": PodSubnet, "gateway": BridgeIP}}},
					"routes":  []map[string]string{{"dst": ServiceCIDR}},
					"dataDir": c.Path("cni", "ipam"),
				},
			},
		},
	}
}

// ensureHugepages raises vm.nr_hugepages so that n 2Mi pages are free; Down puts the old value
// back.
func (c *Cluster) ensureHugepages(n int) error {
	_, _, err := testutil.RaiseHugepages(n, func(old int) error {
		return c.record(Change{Kind: "sysctl", Path: "/proc/sys/vm/nr_hugepages", Args: []string{strconv.Itoa(old)}})
	})
	return err
}

// iptablesChains lists every chain as "<family>/<table>/<chain>".
func iptablesChains() ([]string, error) {
	var out []string
	for _, fam := range []string{"iptables", "ip6tables"} {
		b, err := exec.Command(fam + "-save").Output()
		if err != nil {
			return nil, fmt.Errorf("%s-save: %w", fam, err)
		}
		table := ""
		for _, l := range strings.Split(string(b), "\n") {
			switch {
			case strings.HasPrefix(l, "*"):
				table = l[1:]
			case strings.HasPrefix(l, ":"):
				out = append(out, fam+"/"+table+"/"+strings.Fields(l[1:])[0])
			}
		}
	}
	return out, nil
}

// removeNewChains removes the chains the kubelet (KUBE-*) or CNI plugins (CNI-*) added since
// before was taken, with the rules that jump to them.
func removeNewChains(before []string) error {
	now, err := iptablesChains()
	if err != nil {
		return err
	}
	had := map[string]bool{}
	for _, ch := range before {
		had[ch] = true
	}
	var errs []error
	for _, ch := range now {
		parts := strings.SplitN(ch, "/", 3)
		fam, table, chain := parts[0], parts[1], parts[2]
		if had[ch] || !(strings.HasPrefix(chain, "KUBE-") || strings.HasPrefix(chain, "CNI-")) {
			continue
		}
		// Rules elsewhere that jump to it go first.
		b, _ := exec.Command(fam+"-save", "-t", table).Output()
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) > 2 && f[0] == "-A" && strings.Contains(l, "-j "+chain) && f[1] != chain {
				args := append([]string{"-t", table, "-D"}, f[1:]...)
				if out, err := exec.Command(fam, args...).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s %s: %v: %s", fam, strings.Join(args, " "), err, out))
				}
			}
		}
		for _, op := range []string{"-F", "-X"} {
			if out, err := exec.Command(fam, "-t", table, op, chain).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s -t %s %s %s: %v: %s", fam, table, op, chain, err, out))
			}
		}
	}
	return errors.Join(errs...)
}

// removeKubeCgroups removes the kubelet's (now empty) cgroup trees.
func removeKubeCgroups() {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	for _, r := range roots {
		removeEmptyTree(r)
	}
}

func removeEmptyTree(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			removeEmptyTree(filepath.Join(dir, e.Name()))
		}
	}
	_ = os.Remove(dir) // cgroupfs: rmdir of a cgroup without processes or children
}

func writeJSON(path string, v any) error {
	b, err := jsonIndent(v)
	if err != nil {
		return err
	}
	return safefs.WriteFile(path, b, 0o644, safefs.WriteOptions{})
}

func lookPath(name string) (string, error) { return exec.LookPath(name) }
