//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// mnLinks is how many links the multi-node step creates at once.
const mnLinks = 10

// Tier 3 on three nodes (cluster.Layout(3)): node 1 the machine (memifnet, default profile),
// node 2 a memifnet node with the small profile, node 3 a control-plane node without hugepages
// and without the memifnet label. memifnet installed with `kubectl apply -k manifests/` runs an
// agent on nodes 1 and 2 only, none Pending; ten links created at once through the webhook land
// each on one node, over both memifnet nodes, and pass verified traffic; `kubectl memifnet links
// -A` names each link's node, and shows a running link's state and rates on node 2, read
// from its agent through the API server; taking node 2's label away drains memifnet from it,
// labelling it again brings it back; a full node holds a link's second pod Pending with the
// webhook's reason (Full); `kubectl drain` brings Deployment and StatefulSet links back together
// on the other node (Drain); a lost node's Deployment and StatefulSet links come back together on
// the other node after the out-of-service taint, and the node, back, keeps nothing of them
// (NodeLoss); the chart installs, upgrades and uninstalls as `kubectl apply -k`
// does (Helm). See docs/e2e.md, "Several nodes".
func TestTier3MultiNode(t *testing.T) {
	testutil.RequireRoot(t, "the cluster tier (mounts, network namespaces, cgroups, iptables)")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	x := upCluster(ctx, t, "/run/memifnet-e2e-mn", 3)
	c := x.c
	nodes := c.Nodes()
	for _, st := range []struct {
		name string
		fn   func(context.Context, *testing.T, []cluster.NodeSpec)
	}{
		{"Install", x.mnInstall},
		{"Links", x.mnLinks},
		{"Rates", x.mnRates},
		{"Relabel", x.mnRelabel},
		{"Full", x.mnFull},
		{"Drain", x.mnDrain},
		{"NodeLoss", x.mnNodeLoss},
		{"DRA", x.mnDRA},
		{"Ops", x.mnOps},
		{"Helm", x.mnHelm},
	} {
		if !t.Run(st.name, func(t *testing.T) { st.fn(ctx, t, nodes) }) {
			t.FailNow()
		}
	}
}

// mnInstall: `kubectl apply -k manifests/` runs one agent on each memifnet node, with its
// profile's resources, and nothing of memifnet on the other node; no memifnet pod is Pending.
func (x *tier3) mnInstall(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	x.mnSnapshotNodes(t, nodes) // for Ops's uninstall
	x.logf("install: %s", strings.TrimSpace(x.kubectl(ctx, t, "apply", "-k", "manifests/")))
	for _, ds := range []string{t3DaemonSet, t3DaemonSet + "-small"} {
		x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", ds, "--timeout=3m")
	}
	want := map[string][2]int64{nodes[0].Name: {64, 4}, nodes[1].Name: {32, 2}}
	for _, n := range nodes {
		got := x.allocatable(ctx, t, n.Name, want[n.Name][0], want[n.Name][1])
		hp := got["hugepages-2Mi"]
		if n.HugepagePages >= 0 && hp.Value() != int64(n.HugepagePages)<<21 {
			t.Errorf("node %s reports hugepages-2Mi %s, want its %d pages", n.Name, hp.String(), n.HugepagePages)
		}
		x.logf("install: node %s allocatable memifnet.io/socket=%d hugepool=%d hugepages-2Mi=%s", n.Name, want[n.Name][0], want[n.Name][1], hp.String())
	}
	x.webhookReady(ctx, t)
	pods, err := x.cs.CoreV1().Pods(t3Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	perNode := map[string]int{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("memifnet pod %s is %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
		if strings.HasPrefix(p.Name, "memifnet-node") {
			perNode[p.Spec.NodeName]++
		}
	}
	for _, n := range nodes {
		if want := map[bool]int{true: 1, false: 0}[n.Memifnet]; perNode[n.Name] != want {
			t.Errorf("node %s runs %d memifnet agents, want %d", n.Name, perNode[n.Name], want)
		}
	}
	x.logf("install: agents per node %v; no memifnet pod Pending", perNode)
}

// mnLinks: ten links created at once (annotation + webhook): each link's two pods on one node,
// links on both memifnet nodes, none on the other, every end's traffic verified, and `kubectl
// memifnet links -A` names each link's node.
func (x *tier3) mnLinks(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	var y strings.Builder
	for i := range mnLinks {
		link := fmt.Sprintf("mn-l%d", i)
		fmt.Fprintf(&y, "%s---\n%s---\n",
			mnPod(link+"-rx", "east", "east@"+link, "--mode=rx", "--verify", "--size=1500", "--duration=4s", "--rx-mode=interrupt", "--connect-timeout=3m"),
			mnPod(link+"-tx", "west", `[{"name":"west","link":"`+link+`","role":"client","zeroCopy":true}]`,
				"--mode=tx", "--verify", "--size=1500", "--duration=2s", "--connect-timeout=3m"))
	}
	x.kubectlIn(ctx, t, y.String(), "apply", "-f", "-")
	t0 := time.Now()
	where, perNode := x.mnPairsTogether(ctx, t, "mn-l", 4*time.Minute)
	x.logf("links: %d links, 20 pods Succeeded with verified traffic in %.1fs; links per node %v", mnLinks, time.Since(t0).Seconds(), perNode)
	mnSpread(t, nodes, perNode)
	var links struct{ Links []kcLink }
	x.memifnetJSON(ctx, t, x.c.Kubeconfig(), &links, "links", "-A")
	for link, n := range where {
		if l := findLink(links.Links, "default", link); l == nil || l.Node != n || len(l.Ends) != 2 {
			t.Errorf("kubectl memifnet links -A: %s is %+v, want its two ends on node %s", link, l, n)
		}
	}
	// kubectl's JSONPath printer over the same report.
	names, errs, err := x.memifnetPlugin(ctx, t, x.c.Kubeconfig(), "links", "-A", "-o", `jsonpath={range .links[*]}{.namespace}/{.link}{"\n"}{end}`)
	for link := range where {
		if err != nil || !slices.Contains(strings.Split(names, "\n"), "default/"+link) {
			t.Errorf("kubectl memifnet links -A -o jsonpath: no default/%s (%v)\n%s%s", link, err, names, errs)
		}
	}
	table, _, err := x.memifnetPlugin(ctx, t, x.c.Kubeconfig(), "links", "-A", "-o", "wide")
	if err != nil || !strings.HasPrefix(table, "NAMESPACE") || !strings.Contains(strings.SplitN(table, "\n", 2)[0], "PHASES") {
		t.Fatalf("kubectl memifnet links -A -o wide: %v\n%s", err, table)
	}
	x.logf("links: kubectl memifnet links -A -o wide:\n%s", table)
	x.kubectl(ctx, t, "delete", "pods", "--all", "-n", "default", "--wait=true")
	for _, n := range nodes {
		x.mnNoLeftovers(ctx, t, n, false)
	}
}

// mnPairsTogether waits for the mnLinks links <prefix>0.. (pods <link>-rx and <link>-tx in
// default) to Succeed with verified traffic, and returns each link's node and the links per
// node; a link whose two pods ran on two nodes is an error.
func (x *tier3) mnPairsTogether(ctx context.Context, t *testing.T, prefix string, timeout time.Duration) (map[string]string, map[string]int) {
	where, perNode := map[string]string{}, map[string]int{}
	for i := range mnLinks {
		link := fmt.Sprintf("%s%d", prefix, i)
		for _, p := range []string{link + "-rx", link + "-tx"} {
			x.podSucceeded(ctx, t, "default", p, timeout)
			x.verified(ctx, t, "default", p)
		}
		rx, tx := x.pod(ctx, t, link+"-rx").Spec.NodeName, x.pod(ctx, t, link+"-tx").Spec.NodeName
		if rx != tx {
			t.Errorf("link %s split: %s-rx on %s, %s-tx on %s", link, link, rx, link, tx)
		}
		where[link] = rx
		perNode[rx]++
	}
	return where, perNode
}

// mnSpread: links on every memifnet node, none on the others.
func mnSpread(t *testing.T, nodes []cluster.NodeSpec, perNode map[string]int) {
	t.Helper()
	for _, n := range nodes {
		if n.Memifnet && perNode[n.Name] == 0 {
			t.Errorf("no link on memifnet node %s: links per node %v", n.Name, perNode)
		}
		if !n.Memifnet && perNode[n.Name] != 0 {
			t.Errorf("%d links on node %s, which runs no memifnet", perNode[n.Name], n.Name)
		}
	}
}

// mnRates: a link running on node 2 shows its state and rates in `kubectl memifnet links -A`,
// read from node 2's agent through the API server (node 2's address is not loopback, which the
// API server refuses to proxy to: node 1's links show "-").
func (x *tier3) mnRates(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	n := nodes[1]
	pin := "spec:\n  nodeSelector: {kubernetes.io/hostname: \"" + n.Name + "\"}\n"
	x.kubectlIn(ctx, t, strings.Replace(mnPod("mn-rate-rx", "east", "east@mn-rate", "--mode=rx", "--rx-mode=interrupt", "--duration=0", "--connect-timeout=2m"), "spec:\n", pin, 1)+"---\n"+
		strings.Replace(mnPod("mn-rate-tx", "west", "west@mn-rate", "--mode=tx", "--duration=0", "--connect-timeout=2m"), "spec:\n", pin, 1),
		"apply", "-f", "-")
	defer x.kubectl(ctx, t, "delete", "pod", "mn-rate-rx", "mn-rate-tx", "--wait=true")
	var l *kcLink
	if err := node.Poll(ctx, 2*time.Minute, "mn-rate up in kubectl memifnet links -A", func() (bool, error) {
		var links struct{ Links []kcLink }
		x.memifnetJSON(ctx, t, x.c.Kubeconfig(), &links, "links", "-A")
		l = findLink(links.Links, "default", "mn-rate")
		return l != nil && l.Node == n.Name && l.State == "up", nil
	}); err != nil {
		t.Fatalf("%v: %+v", err, l)
	}
	table, _, _ := x.memifnetPlugin(ctx, t, x.c.Kubeconfig(), "links", "-A")
	x.logf("rates: a link on %s, read through the API server from its agent:\n%s", n.Name, table)
}

// mnNoLeftovers waits until node n, seen from inside it, keeps no pod's attachment (its own
// slots and pools may stay) or, with all, nothing of memifnet (mnLeftovers).
func (x *tier3) mnNoLeftovers(ctx context.Context, t *testing.T, n cluster.NodeSpec, all bool) {
	t.Helper()
	x.mnNoLeftoversWithin(ctx, t, n, all, 90*time.Second)
}

// mnNoLeftoversWithin is mnNoLeftovers waiting up to timeout.
func (x *tier3) mnNoLeftoversWithin(ctx context.Context, t *testing.T, n cluster.NodeSpec, all bool, timeout time.Duration) {
	t.Helper()
	var left []string
	err := node.Poll(ctx, timeout, "node "+n.Name+" clean", func() (bool, error) {
		var err error
		left, err = x.mnLeftovers(n, all)
		return len(left) == 0, err
	})
	if err != nil {
		sort.Strings(left)
		t.Errorf("node %s keeps:\n  %s", n.Name, strings.Join(left, "\n  "))
	}
}

// mnLeftovers is what node n, seen from inside it, keeps of pods' attachments (a port file, a
// link mount, a store or device-info entry) or, with all, of memifnet: any memifnet mount under
// the state dir, any file in it.
func (x *tier3) mnLeftovers(n cluster.NodeSpec, all bool) ([]string, error) {
	root, mountinfo, err := x.c.NodeView(n.Index)
	if err != nil {
		return nil, err
	}
	state := filepath.Join(root, t3StateDir)
	// /var/run is a link to /run, which a path through /proc/<pid>/root would take on the
	// machine's root.
	devinfo := filepath.Join(root, strings.Replace(t3DevInfoDir, "/var/run/", "/run/", 1))
	left, err := node.LeftoversIn(state, devinfo)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ms, err := safefs.ParseMountinfo(f)
	if err != nil {
		return nil, err
	}
	for _, m := range visibleUnder(ms, t3StateDir) {
		if names.IsMemifnetMount(m.FSType, m.Source) && (all || m.Source == names.LinkMountSource) {
			left = append(left, "mount "+m.Point+" "+m.Source)
		}
	}
	if all {
		ents, _ := os.ReadDir(state)
		for _, e := range ents {
			left = append(left, "entry "+filepath.Join(t3StateDir, e.Name()))
		}
	}
	return left, nil
}

// mnRelabel: taking node 2's memifnet.io/node label away drains memifnet from it (its agent
// goes, and cleans the node as it goes: no pool or slot mount, an empty state dir, memif-cni out
// of its conflist, nothing to allocate); labelling it again brings the agent back with its
// profile's resources.
func (x *tier3) mnRelabel(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	n := nodes[1]
	x.kubectl(ctx, t, "label", "node", n.Name, cluster.LabelNode+"-")
	x.waitAgents(ctx, t, n.Name, 0)
	x.mnNoLeftovers(ctx, t, n, true)
	root, _, err := x.c.NodeView(n.Index)
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(root, x.c.Paths.Conflist())
	if b, err := os.ReadFile(conf); err != nil || strings.Contains(string(b), "memif-cni") {
		t.Errorf("node %s's conflist after the unlabel (%v):\n%s", n.Name, err, b)
	}
	x.logf("relabel: %s unlabelled: no agent, no memifnet mount, empty state dir, memif-cni out of its conflist", n.Name)
	x.kubectl(ctx, t, "label", "node", n.Name, cluster.LabelNode+"=true")
	x.waitAgents(ctx, t, n.Name, 1)
	x.allocatable(ctx, t, n.Name, 32, 2)
	x.logf("relabel: %s labelled again: its agent is back with 32 slots and 2 pool units", n.Name)
}

// waitAgents waits until node runs want memifnet agents (Running and ready for want 1).
func (x *tier3) waitAgents(ctx context.Context, t *testing.T, nodeName string, want int) {
	t.Helper()
	var got int
	if err := node.Poll(ctx, 2*time.Minute, fmt.Sprintf("%d agents on %s", want, nodeName), func() (bool, error) {
		pods, err := x.cs.CoreV1().Pods(t3Namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName})
		if err != nil {
			return false, err
		}
		got = 0
		for _, p := range pods.Items {
			if !strings.HasPrefix(p.Name, "memifnet-node") {
				continue
			}
			got++
			if want > 0 && (p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || !podReady(&p)) {
				return false, nil
			}
		}
		return got == want, nil
	}); err != nil {
		t.Fatalf("%v: %d", err, got)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// allocatable waits until node offers socket slots and pool units.
func (x *tier3) allocatable(ctx context.Context, t *testing.T, nodeName string, socket, pool int64) corev1.ResourceList {
	t.Helper()
	var got corev1.ResourceList
	if err := node.Poll(ctx, 90*time.Second, "node "+nodeName+" allocatable", func() (bool, error) {
		o, err := x.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = o.Status.Allocatable
		s, h := got[names.SocketResource], got["memifnet.io/hugepool"]
		return s.Value() == socket && h.Value() == pool, nil
	}); err != nil {
		t.Fatalf("%v: %v", err, got)
	}
	return got
}

// mnPod is an annotation-only memif-perf pod (the webhook adds its slot and affinity), small:
// twenty of them run at once on two cores shared with the cluster.
func mnPod(name, port, annotation string, args ...string) string {
	y := strings.Replace(cluster.PerfPod(name, port, "placeholder", "20m", args...),
		", memifnet.io/socket: 1, memifnet.io/hugepool: 1", "", 1)
	y = strings.Replace(y, `limits: {cpu: "1"`, `limits: {cpu: 250m`, 1)
	return strings.Replace(y, `'[{"name":"`+port+`","link":"placeholder"}]'`, "'"+annotation+"'", 1)
}

// visibleUnder is the mounts below dir that a path reaches in a node's own view
// (cluster.VisibleUnder).
func visibleUnder(ms []safefs.MountEntry, dir string) []safefs.MountEntry {
	return cluster.VisibleUnder(ms, dir)
}
