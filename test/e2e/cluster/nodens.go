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
	"time"

	"github.com/memifnet/memifnet/test/e2e/node"
)

// A node after the first is a network namespace and a mount namespace, made by one holder
// process that keeps them for the node's life: `unshare --net --mount --propagation slave`
// running holderScript, which mounts the node's own view and then sleeps. The node's containerd
// and kubelet enter both (nsenter -t <holder> -m -n), and its pods inherit them, so a hostPath
// volume resolves to the node's own directories. Nothing the holder mounts reaches the machine
// (slave propagation), and nothing of the namespaces outlives the node's processes: the network
// namespace has no name under /run/netns, its veth and bridge and iptables rules go with it.

// holderScript mounts node s's view, in its new namespaces:
//   - a sysfs of its own network namespace (the kubelet and the CNI plugins read its devices
//     there), with the machine's cgroup tree moved back under it;
//   - the hugepages its kubelet reports (a tmpfs over /sys/kernel/mm/hugepages holding only the
//     node's share: every kubelet would otherwise report all of the machine's), and a hugetlbfs
//     on /dev/hugepages sized to them (none on a node without hugepages);
//   - its own directory over each node-local path, each bind then made shared one by one
//     (Bidirectional volumes need that; `--make-rshared /` would duplicate the machine's mounts).
func (c *Cluster) holderScript(s NodeSpec) string {
	var b strings.Builder
	stage := filepath.Join(c.NodeDir(s.Index), "cgroup-stage")
	fmt.Fprintf(&b, "set -eu\nmkdir -p %[1]q\nmount --rbind /sys/fs/cgroup %[1]q\nmount -t sysfs sysfs /sys\nmount --move %[1]q /sys/fs/cgroup\n", stage)
	hp := "/sys/kernel/mm/hugepages"
	fmt.Fprintf(&b, "mount -t tmpfs -o size=64k,mode=0755 memifnet-node%d-hugepages %s\n", s.Index, hp)
	if s.HugepagePages > 0 {
		dir := hp + "/hugepages-2048kB"
		fmt.Fprintf(&b, "mkdir %s\n", dir)
		for f, v := range map[string]int{"nr_hugepages": s.HugepagePages, "free_hugepages": s.HugepagePages,
			"resv_hugepages": 0, "surplus_hugepages": 0, "nr_overcommit_hugepages": 0} {
			fmt.Fprintf(&b, "echo %d > %s/%s\n", v, dir, f)
		}
		fmt.Fprintf(&b, "mount -t hugetlbfs -o pagesize=2M,size=%d memifnet-node%d /dev/hugepages\n", s.HugepagePages<<21, s.Index)
	} else {
		fmt.Fprintf(&b, "mount -t tmpfs -o size=4k,mode=0755 memifnet-node%d-nohugepages /dev/hugepages\n", s.Index)
	}
	for _, p := range c.NodePaths() {
		fmt.Fprintf(&b, "mount --bind %q %q\nmount --make-shared %q\n", c.NodeRoot(s.Index, p), p, p)
	}
	fmt.Fprintf(&b, "touch %q\nexec sleep infinity\n", c.holderReady(s.Index))
	return b.String()
}

func (c *Cluster) holderReady(i int) string { return filepath.Join(c.NodeDir(i), "holder-ready") }

// startHolder starts node s's holder and waits until its mounts are made.
func (c *Cluster) startHolder(ctx context.Context, s NodeSpec) (*Daemon, error) {
	script := filepath.Join(c.NodeDir(s.Index), "holder.sh")
	if err := os.WriteFile(script, []byte(c.holderScript(s)), 0o644); err != nil {
		return nil, err
	}
	d, err := c.start(daemonName(s.Index, "holder"), nil,
		"unshare", "--net", "--mount", "--propagation", "slave", "--", "/bin/sh", script)
	if err != nil {
		return nil, err
	}
	err = node.Poll(ctx, 30*time.Second, "node namespaces mounted", func() (bool, error) {
		if !d.Alive() {
			return false, fmt.Errorf("holder exited (see %s)", d.Log)
		}
		_, err := os.Stat(c.holderReady(s.Index))
		return err == nil, nil
	})
	return d, err
}

// nodeBridge is the node network on the machine: a bridge with NodeGateway, where the nodes'
// veths meet, and the API server reachable at NodeGateway:6443 (it listens on 127.0.0.1 only:
// the DNAT needs route_localnet on the bridge, and the guard keeps everything else from the
// bridge off loopback, as podNetworkToAPIServer does for node 1's pods).
func (c *Cluster) nodeBridge(ctx context.Context) error {
	if len(c.state.Nodes) < 2 {
		return nil
	}
	if err := c.record(Change{Kind: "link", Path: NodeBridge}); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"ip", "link", "add", NodeBridge, "type", "bridge"},
		{"ip", "addr", "add", NodeGateway + "/" + strconv.Itoa(NodeNetBits), "dev", NodeBridge},
		{"ip", "link", "set", NodeBridge, "up"},
	} {
		if err := run(ctx, args...); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join("/proc/sys/net/ipv4/conf", NodeBridge, "route_localnet"), []byte("1"), 0o644); err != nil {
		return err
	}
	dnat := []string{"nat", "PREROUTING", "-i", NodeBridge, "-d", NodeGateway + "/32", "-p", "tcp", "--dport", strconv.Itoa(APIServerPort),
		"-m", "comment", "--comment", "memifnet-cluster: nodes -> kube-apiserver",
		"-j", "DNAT", "--to-destination", "127.0.0.1:" + strconv.Itoa(APIServerPort)}
	guard := []string{"filter", "INPUT", "-i", NodeBridge, "-d", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate", "DNAT",
		"-m", "comment", "--comment", "memifnet-cluster: nodes reach loopback only through the API server's DNAT",
		"-j", "DROP"}
	for _, r := range [][]string{dnat, guard} {
		if err := c.record(Change{Kind: "iptables", Args: r}); err != nil {
			return err
		}
		if err := run(ctx, append([]string{"iptables", "-t", r[0], "-I", r[1]}, r[2:]...)...); err != nil {
			return err
		}
	}
	return nil
}

// nodeNetwork connects node s (its holder's network namespace) to the node network: a veth
// (eth0 inside, at the node's address), a default route to the machine, the route of its pod
// subnet on the machine, its pod bridge, and inside it what kube-proxy would do for the
// `kubernetes` Service: 10.96.0.1:443 to the API server at NodeGateway:6443, for the node's
// daemons (OUTPUT) and its pods (PREROUTING). Forwarding is on inside the node only.
func (c *Cluster) nodeNetwork(ctx context.Context, s NodeSpec, holder int) error {
	veth := nodeVeth(s.Index)
	if err := c.record(Change{Kind: "link", Path: veth}); err != nil {
		return err
	}
	if err := run(ctx, "ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(holder)); err != nil {
		return err
	}
	if err := run(ctx, "ip", "link", "set", veth, "master", NodeBridge, "up"); err != nil {
		return err
	}
	br, gw := nodePodBridge(s.Index), nodePodGateway(s.Index)
	api := NodeGateway + ":" + strconv.Itoa(APIServerPort)
	svc := "-d " + ServiceIP + "/32 -p tcp --dport 443 -j DNAT --to-destination " + api
	script := strings.Join([]string{
		"set -eu",
		"ip link set lo up",
		"ip addr add " + s.Name + "/" + strconv.Itoa(NodeNetBits) + " dev eth0",
		"ip link set eth0 up",
		"ip route add default via " + NodeGateway,
		"echo 1 > /proc/sys/net/ipv4/ip_forward",
		"ip link add " + br + " type bridge",
		"ip addr add " + gw + "/24 dev " + br,
		"ip link set " + br + " up",
		"iptables -t nat -A OUTPUT " + svc,
		"iptables -t nat -A PREROUTING -i " + br + " " + svc,
	}, "\n")
	if err := run(ctx, "nsenter", "-t", strconv.Itoa(holder), "-n", "--", "/bin/sh", "-c", script); err != nil {
		return err
	}
	subnet := nodePodSubnet(s.Index)
	if err := c.record(Change{Kind: "route", Path: subnet}); err != nil {
		return err
	}
	return run(ctx, "ip", "route", "add", subnet, "via", s.Name)
}

// cgroupHierarchies are the machine's cgroup hierarchies (v1: one directory each; symlinks
// such as cpu,cpuacct are aliases and skipped).
func cgroupHierarchies() []string {
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	for _, e := range ents {
		if e.IsDir() && e.Type()&os.ModeSymlink == 0 {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return out
}

// makeNodeCgroups makes node i's cgroup root (cgroupRoot /node<i> of its kubelet) in every
// hierarchy, as the kubelet wants it there before it starts; cpuset's must hold CPUs and memory
// nodes before anything can join it.
func (c *Cluster) makeNodeCgroups(i int) error {
	name := nodeCgroup(i)
	if err := c.record(Change{Kind: "cgroup", Path: name}); err != nil {
		return err
	}
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if filepath.Base(h) != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
			}
		}
	}
	return nil
}

// removeNodeCgroups removes node cgroup root name (and the kubelet's empty cgroups below it)
// from every hierarchy.
func removeNodeCgroups(name string) error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, name)
		removeEmptyTree(dir)
		if _, err := os.Stat(dir); err == nil {
			errs = append(errs, fmt.Errorf("cgroup %s still there (processes left in it?)", dir))
		}
	}
	return errors.Join(errs...)
}

func run(ctx context.Context, args ...string) error {
	if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
