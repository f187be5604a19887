package cluster

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The nodes after the first. Node 1 is the machine itself (127.0.0.1, the host's network and
// mounts), as a one-node cluster has always been. Node n >= 2 lives in a network and a mount
// namespace of its own, held by a holder process (nodens.go), with its own containerd and kubelet:
// its address is 10.250.0.n on a bridge the cluster makes (NodeBridge), its pods are on
// 10.244.(87+n).0/24 behind a bridge of its own inside its namespace, and every node-local path
// (NodePaths) is a directory of its own under <base>/nodes/<n>/root.
const (
	NodeBridge  = "memifnd0"
	NodeGateway = "10.250.0.1"
	NodeNetBits = 24
	NodeNet     = "10.250.0.0/24"
	// LabelNode and LabelProfile are what an operator sets on a node to run memifnet there and
	// to pick its configuration profile (manifests/base/daemonset.yaml, docs/install.md).
	LabelNode    = "memifnet.io/node"
	LabelProfile = "memifnet.io/profile"
	// TaintControlPlane is kubeadm's taint (and label) of a control-plane node.
	TaintControlPlane = "node-role.kubernetes.io/control-plane"
	// MaxNodes bounds NODES: the addresses and subnets leave room for more, the machine does not.
	MaxNodes = 8
)

// NodePaths are the paths a node's components and memifnet use on a node, with the cluster's
// Paths (the CNI dirs, the kubelet kubeconfig's dir); every node after the first has its own
// directory bind-mounted over each one, in its own mount namespace, in this order. /var/lib is
// bound whole, not its kubelet, containerd, cni and memifnet dirs one by one: memifnet's state
// dir must be a plain directory in it, as on a real node, which the agent makes and an uninstall
// removes. A bind on /var/lib/memifnet itself would be a mount point only there (the agent leaves
// it, and says so), and node 1's uninstall removing the machine's /var/lib/memifnet would detach
// it from under the node (rmdir detaches the mounts other namespaces have on a directory). Paths
// under /var/lib (k3s's) come after it: their bind is then the node's own directory on itself.
func (c *Cluster) NodePaths() []string {
	return append([]string{
		"/var/lib", "/var/log/pods", "/var/log/containers", "/run/containerd", "/opt/containerd",
		"/etc/cdi", "/run/cdi", "/run/nri", "/run/k8s.cni.cncf.io", "/run/multus",
	}, c.Paths.Dirs()...)
}

// nodeVarLib are the directories of a node's own /var/lib its components use, made before they
// start; not memifnet's state dir, which the agent makes as on any node.
var nodeVarLib = []string{"/var/lib/kubelet", "/var/lib/containerd", "/var/lib/cni"}

// NodeSpec is one node of the cluster and the role it plays.
type NodeSpec struct {
	Index int    `json:"index"` // 1 for the machine itself
	Name  string `json:"name"`  // its address, as node 1's is 127.0.0.1
	// Memifnet: labelled LabelNode=true, so memifnet's agent runs there.
	Memifnet bool `json:"memifnet"`
	// Profile is its LabelProfile ("" for the default configuration).
	Profile string `json:"profile,omitempty"`
	// HugepagePages is the number of 2Mi hugepages the node has (its kubelet reports them, its
	// hugetlbfs is sized to them); 0: a node without hugepages. Node 1 reports the machine's.
	HugepagePages int `json:"hugepagePages"`
	// ControlPlane: labelled and tainted (NoSchedule) as kubeadm does a control-plane node.
	ControlPlane bool `json:"controlPlane,omitempty"`
}

// Pages of the memifnet profiles the cluster's nodes run (manifests/base and the profiles of
// manifests/overlays/profiles): what the agent's pools reserve, and a margin.
const (
	defaultProfilePages = 128 // 4 x 64Mi of 2Mi pages
	smallProfilePages   = 64  // 2 x 64Mi
	pageMargin          = 32
)

// Layout is the cluster of n nodes: node 1 as a one-node cluster has it (memifnet, default
// profile, untainted); the last node of three or more is a control-plane node without hugepages
// and without memifnet; the others are memifnet nodes with the "small" profile.
func Layout(n int) []NodeSpec {
	nodes := []NodeSpec{{Index: 1, Name: NodeName, Memifnet: true, HugepagePages: -1}}
	for i := 2; i <= n; i++ {
		s := NodeSpec{Index: i, Name: nodeIP(i)}
		if i == n && n >= 3 {
			s.ControlPlane = true
		} else {
			s.Memifnet, s.Profile, s.HugepagePages = true, "small", smallProfilePages+pageMargin
		}
		nodes = append(nodes, s)
	}
	return nodes
}

// HugepagesNeeded is what the memifnet nodes' pools of a layout reserve together, with a margin:
// every kubelet sees the machine's hugepages, so the cluster sizes each node's profile and
// raises vm.nr_hugepages so that their sum fits.
func HugepagesNeeded(nodes []NodeSpec) int {
	n := pageMargin
	for _, s := range nodes {
		switch {
		case !s.Memifnet:
		case s.Profile == "small":
			n += smallProfilePages
		default:
			n += defaultProfilePages
		}
	}
	return n
}

func nodeIP(i int) string { return "10.250.0." + strconv.Itoa(i) }

// nodePodSubnet is node i's pod subnet (node 1's is PodSubnet, 10.244.88.0/24).
func nodePodSubnet(i int) string { return fmt.Sprintf("10.244.%d.0/24", 87+i) }
func nodePodGateway(i int) string {
	return fmt.Sprintf("10.244.%d.1", 87+i)
}
func nodePodBridge(i int) string { return "memifcl" + strconv.Itoa(i-1) }
func nodeVeth(i int) string      { return "mnveth" + strconv.Itoa(i) }
func nodeCgroup(i int) string    { return "node" + strconv.Itoa(i) }

// NodeDir is node i's directory under Base: its root (the node-local paths), containerd's
// directories, its CNI leases.
func (c *Cluster) NodeDir(i int) string { return c.Path("nodes", strconv.Itoa(i)) }

// NodeRoot is where node i's node-local path p lives as seen from the machine.
func (c *Cluster) NodeRoot(i int, p string) string {
	return filepath.Join(c.NodeDir(i), "root", p)
}

// ContainerdSockOf is node i's CRI endpoint.
func (c *Cluster) ContainerdSockOf(i int) string {
	if i == 1 {
		return c.ContainerdSock()
	}
	return filepath.Join(c.NodeDir(i), "containerd", "containerd.sock")
}

// Nodes is the layout of the cluster that is up (or was asked for).
func (c *Cluster) Nodes() []NodeSpec {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.state.Nodes) > 0 {
		return append([]NodeSpec{}, c.state.Nodes...)
	}
	return Layout(max(c.NodeCount, 1))
}

// daemonName is node i's instance of a node component ("containerd", "kubelet", "holder").
func daemonName(i int, component string) string {
	if i == 1 {
		return component
	}
	return fmt.Sprintf("node%d-%s", i, component)
}

// startExtraNodes brings up every node after the first, one after the other.
func (c *Cluster) startExtraNodes(ctx context.Context) error {
	for _, s := range c.state.Nodes[1:] {
		t := time.Now()
		if err := c.startNode(ctx, s); err != nil {
			return fmt.Errorf("node %d (%s): %w", s.Index, s.Name, err)
		}
		c.Logf("node %d (%s) Ready (%.1fs)", s.Index, s.Name, time.Since(t).Seconds())
	}
	return nil
}

func (c *Cluster) startNode(ctx context.Context, s NodeSpec) error {
	if err := c.prepareNodeDirs(s); err != nil {
		return err
	}
	if err := c.makeNodeCgroups(s.Index); err != nil {
		return err
	}
	holder, err := c.startHolder(ctx, s)
	if err != nil {
		return err
	}
	if err := c.nodeNetwork(ctx, s, holder.PID); err != nil {
		return err
	}
	if err := c.startContainerdOn(ctx, s.Index, holder.PID); err != nil {
		return err
	}
	if err := c.importImagesInto(ctx, c.ContainerdSockOf(s.Index)); err != nil {
		return err
	}
	return c.startNodeKubelet(ctx, s, holder.PID)
}

// labelNodes gives every node its labels and taints, as an operator would.
func (c *Cluster) labelNodes(ctx context.Context) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	for _, s := range c.state.Nodes {
		n, err := cs.CoreV1().Nodes().Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Memifnet {
			n.Labels[LabelNode] = "true"
		}
		if s.Profile != "" {
			n.Labels[LabelProfile] = s.Profile
		}
		if s.ControlPlane {
			n.Labels[TaintControlPlane] = ""
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintControlPlane, Effect: corev1.TaintEffectNoSchedule})
		}
		if _, err := cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("label node %s: %w", s.Name, err)
		}
	}
	return nil
}

// prepareNodeDirs makes node s's directories under Base: one per node-local path, the CNI
// plugins (links to the machine's), its primary network and its kubelet's kubeconfig; and the
// mount points on the machine the node's directories are mounted over (recorded: node 1 made
// most of them already).
func (c *Cluster) prepareNodeDirs(s NodeSpec) error {
	for _, p := range c.NodePaths() {
		if err := c.makeDirs(p); err != nil {
			return err
		}
		if err := os.MkdirAll(c.NodeRoot(s.Index, p), 0o755); err != nil {
			return err
		}
	}
	for _, p := range nodeVarLib {
		if err := os.MkdirAll(c.NodeRoot(s.Index, p), 0o755); err != nil {
			return err
		}
	}
	plugins, _ := filepath.Glob("/usr/lib/cni/*")
	for _, p := range plugins {
		if err := os.Symlink(p, c.NodeRoot(s.Index, filepath.Join(c.Paths.CNIBinDir, filepath.Base(p)))); err != nil {
			return err
		}
	}
	if err := writeJSON(c.NodeRoot(s.Index, c.Paths.Conflist()), c.nodePrimaryNetwork(s.Index)); err != nil {
		return err
	}
	return c.writeNodeCredentials(s)
}

// nodePrimaryNetwork is node i's primary network, as node 1's (primaryNetwork) on its own bridge and
// subnet; its pods also route the node network (the API server calling a webhook pod there
// comes from NodeGateway).
func (c *Cluster) nodePrimaryNetwork(i int) map[string]any {
	return map[string]any{
		"cniVersion": "1.0.0",
		"name":       "memifnet-cluster",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": nodePodBridge(i), "isGateway": false, "ipMasq": false,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": nodePodSubnet(i), "gateway": nodePodGateway(i)}}},
					"routes":  []map[string]string{{"dst": ServiceCIDR}, {"dst": NodeNet}},
					"dataDir": filepath.Join(c.NodeDir(i), "cni", "ipam"),
				},
			},
		},
	}
}

// waitNodesReady waits for every node of the layout to be Ready.
func (c *Cluster) waitNodesReady(ctx context.Context, timeout time.Duration) error {
	for _, s := range c.Nodes() {
		if err := c.waitNodeReady(ctx, s.Name, daemonName(s.Index, "kubelet"), timeout); err != nil {
			return err
		}
	}
	return nil
}

// nodeSummary is one line per node for the log.
func nodeSummary(nodes []NodeSpec) string {
	var parts []string
	for _, s := range nodes {
		var roles []string
		if s.Memifnet {
			roles = append(roles, "memifnet profile "+cmp.Or(s.Profile, "default"))
		}
		if s.ControlPlane {
			roles = append(roles, "control-plane (NoSchedule)")
		}
		switch {
		case s.HugepagePages < 0:
			roles = append(roles, "the machine's hugepages")
		case s.HugepagePages == 0:
			roles = append(roles, "no hugepages")
		default:
			roles = append(roles, fmt.Sprintf("%d hugepages", s.HugepagePages))
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", s.Name, strings.Join(roles, ", ")))
	}
	return strings.Join(parts, "; ")
}

// NodeView is where node i's own view of its paths and mounts can be read from the machine: the
// root and mountinfo of its holder (through /proc), or the machine's for node 1.
func (c *Cluster) NodeView(i int) (root, mountinfo string, err error) {
	if i == 1 {
		return "/", "/proc/self/mountinfo", nil
	}
	d := c.Daemon(daemonName(i, "holder"))
	if d == nil || !d.Alive() {
		return "", "", fmt.Errorf("node %d: no holder running", i)
	}
	p := "/proc/" + strconv.Itoa(d.PID)
	return p + "/root", p + "/mountinfo", nil
}
