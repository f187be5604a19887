//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// mnOpsDaemonSets are the agent DaemonSets of `kubectl apply -k manifests/`: the default
// profile's and the small profile's.
var mnOpsDaemonSets = []string{t3DaemonSet, t3DaemonSet + "-small"}

// mnOps: operating memifnet on several nodes (issue 33 part 4). While a link on every memifnet
// node passes verified traffic, both agent DaemonSets are upgraded to the v2 image (kubectl set
// image) and roll; a new link on every node created during the rollout passes verified traffic
// too. Each old link keeps its containers, its receiver counts packets every second and every
// byte is verified (what the one-node Upgrade step asserts, on each node); every node's agent
// is a new pod, Ready, running v2, and its node was not taken for an uninstall. `kubectl memifnet
// links -A` and `kubectl memifnet node` show each link on its node, up, with rates read from
// that node's agent through the API server, and the node without memifnet says it runs no
// agent; each agent's HTTPS /metrics on its node address reports its own node's links and not
// the other's. Then `kubectl delete -k manifests/` leaves every node, seen from inside it, as it
// was before the Install step.
func (x *tier3) mnOps(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	var mem []cluster.NodeSpec
	for _, n := range nodes {
		if n.Memifnet {
			mem = append(mem, n)
		}
	}
	t0 := time.Now()
	x.buildUpgradeImage(ctx, t)
	containers := x.mnOpsUpgrade(ctx, t, mem)
	x.mnOpsKubectl(ctx, t, nodes)
	x.mnOpsMetrics(ctx, t, mem)
	x.mnOpsStopPairs(ctx, t, mem, containers)
	x.mnOpsUninstall(ctx, t, nodes)
	x.logf("ops: done in %.1fs", time.Since(t0).Seconds())
}

func opLink(n cluster.NodeSpec) string { return fmt.Sprintf("op%d", n.Index) }

// mnOpsUpgrade starts a pinned link on every memifnet node, upgrades both DaemonSets while a
// new link per node is created as Jobs, and checks every node's new agent and new link. It
// returns the old links' containers.
func (x *tier3) mnOpsUpgrade(ctx context.Context, t *testing.T, mem []cluster.NodeSpec) map[string][]string {
	containers, uids := map[string][]string{}, map[string]string{}
	for _, n := range mem {
		x.mnHelmPinnedPair(ctx, t, n.Name, opLink(n))
		containers[n.Name] = x.containerIDs(ctx, t, opLink(n)+"-rx", opLink(n)+"-tx")
		_, uids[n.Name] = x.mnAgent(ctx, t, n.Name)
	}
	x.logf("ops: a link on each of %d memifnet nodes passes verified traffic; upgrading both agent DaemonSets to %s", len(mem), t3UpgradeImage)
	start := time.Now()
	for _, ds := range mnOpsDaemonSets {
		x.kubectl(ctx, t, "-n", t3Namespace, "set", "image", ds, "deviceplugin="+t3UpgradeImage, "install-cni="+t3UpgradeImage)
	}
	for _, n := range mem {
		pin := "spec:\n  nodeSelector: {kubernetes.io/hostname: \"" + n.Name + "\"}\n"
		link := "opn" + strings.TrimPrefix(opLink(n), "op")
		x.linkJob(ctx, t, strings.Replace(mnPod(link+"-rx", "east", "east@"+link, "--mode=rx", "--verify", "--size=1500", "--duration=8s", "--connect-timeout=2m"), "spec:\n", pin, 1))
		x.linkJob(ctx, t, strings.Replace(mnPod(link+"-tx", "west", "west@"+link, "--mode=tx", "--verify", "--size=1500", "--duration=5s", "--connect-timeout=2m"), "spec:\n", pin, 1))
	}
	for _, ds := range mnOpsDaemonSets {
		x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", ds, "--timeout=4m")
	}
	rolled := time.Since(start)
	for _, n := range mem {
		name, uid := x.mnAgent(ctx, t, n.Name) // Running and Ready
		if uid == uids[n.Name] {
			t.Fatalf("the upgrade kept node %s's agent %s", n.Name, name)
		}
		x.mnUpgradedAgent(ctx, t, n, name)
		x.logf("ops: node %s: agent %s (new pod, Ready, %s)", n.Name, name, t3UpgradeImage)
	}
	x.logf("ops: both DaemonSets rolled in %.1fs", rolled.Seconds())
	for _, n := range mem {
		link := "opn" + strings.TrimPrefix(opLink(n), "op")
		x.jobDone(ctx, t, link+"-tx")
		x.verified(ctx, t, "default", x.jobDone(ctx, t, link+"-rx"))
		x.trafficFlows(ctx, t, opLink(n)+"-rx", "on "+n.Name+" after the upgrade")
	}
	x.logf("ops: on every memifnet node a link created during the rollout passed verified traffic")
	x.kubectl(ctx, t, "delete", "job", "--all", "-n", "default", "--cascade=foreground", "--wait=true", "--timeout=2m")
	return containers
}

// mnUpgradedAgent checks node n's new agent pod as upgradedAgent does node 1's: every
// container from the v2 image, its log naming v2, and the node, seen from inside it, kept as
// on a restart (memif-cni still chained and installed).
func (x *tier3) mnUpgradedAgent(ctx context.Context, t *testing.T, n cluster.NodeSpec, name string) {
	t.Helper()
	p, err := x.cs.CoreV1().Pods(t3Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		if c.Image != t3UpgradeImage {
			t.Errorf("node %s: agent %s's container %s runs %s, want %s", n.Name, name, c.Name, c.Image, t3UpgradeImage)
		}
	}
	if log := x.logs(ctx, t3Namespace, name); !strings.Contains(log, `"version":"`+t3UpgradeVersion+`"`) {
		t.Errorf("node %s: agent %s does not log version %s:\n%s", n.Name, name, t3UpgradeVersion, log)
	}
	root, _, err := x.c.NodeView(n.Index)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, x.c.Paths.Conflist()))
	var conf struct{ Plugins []struct{ Type string } }
	if err == nil {
		err = json.Unmarshal(b, &conf)
	}
	if err != nil || len(conf.Plugins) != 2 || conf.Plugins[1].Type != "memif-cni" {
		t.Errorf("node %s: after the upgrade its conflist is %s (%v): taken for an uninstall?", n.Name, b, err)
	}
	if _, err := os.Stat(filepath.Join(root, x.c.Paths.CNIBinDir, "memif-cni")); err != nil {
		t.Errorf("node %s: after the upgrade: %v: taken for an uninstall?", n.Name, err)
	}
}

// mnOpsStopPairs ends each node's old link as the Upgrade step does: its containers are those
// it had before the upgrade, its receiver counted packets in every progress second but at most
// one, and after SIGINT both ends report every byte verified.
func (x *tier3) mnOpsStopPairs(ctx context.Context, t *testing.T, mem []cluster.NodeSpec, containers map[string][]string) {
	for _, n := range mem {
		rx, tx := opLink(n)+"-rx", opLink(n)+"-tx"
		x.trafficFlows(ctx, t, rx, "on "+n.Name+" before it is stopped")
		// Read before the sender stops (the receiver then counts nothing until it is stopped too).
		stall, seconds := longestStall(x.logs(ctx, "default", rx))
		if got := x.containerIDs(ctx, t, rx, tx); !slices.Equal(got, containers[n.Name]) {
			t.Errorf("node %s: the old link's containers changed: %q, before %q", n.Name, got, containers[n.Name])
		}
		for _, p := range []string{tx, rx} {
			if err := syscall.Kill(x.mnContainerPID(ctx, t, n, p), syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			x.podSucceeded(ctx, t, "default", p, time.Minute)
		}
		sum := x.verified(ctx, t, "default", rx)
		x.verified(ctx, t, "default", tx)
		if stall > 1 {
			t.Errorf("node %s: the old link's receiver counted no packet for %d consecutive seconds (of %d)", n.Name, stall, seconds)
		}
		x.logf("ops: node %s: the old link passed %.0f verified packets through the upgrade; longest stall %ds of %d progress seconds",
			n.Name, sum["rx_pkts"], stall, seconds)
	}
}

// mnContainerPID is the host PID of pod's container, from the containerd of the pod's node (the
// nodes share the machine's PID namespace).
func (x *tier3) mnContainerPID(ctx context.Context, t *testing.T, n cluster.NodeSpec, pod string) int {
	t.Helper()
	id := strings.TrimPrefix(x.containerIDs(ctx, t, pod)[0], "containerd://")
	cr, err := node.DialCRI(ctx, x.c.ContainerdSockOf(n.Index))
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	st, err := cr.Runtime.ContainerStatus(ctx, &cri.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.PID == 0 {
		t.Fatalf("container of %s on %s: no pid: %v", pod, n.Name, err)
	}
	return info.PID
}

// mnOpsUninstall: with the links gone, `kubectl delete -k manifests/` leaves every node, seen
// from inside it, as the Install step found it (mnNodeAsBefore).
func (x *tier3) mnOpsUninstall(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	x.kubectl(ctx, t, "delete", "pods", "--all", "-n", "default", "--wait=true", "--timeout=2m")
	for _, n := range nodes {
		x.mnNoLeftovers(ctx, t, n, false)
	}
	x.deleteK(ctx, t, "manifests/")
	x.namespaceGone(ctx, t)
	for _, n := range nodes {
		x.mnNodeAsBefore(ctx, t, n, x.nodesBefore[n.Index], "after kubectl delete -k manifests/")
	}
}

// mnSnapshotNodes takes every node's snapshot (its own view) before the Install step, for
// mnOpsUninstall.
func (x *tier3) mnSnapshotNodes(t *testing.T, nodes []cluster.NodeSpec) {
	t.Helper()
	x.nodesBefore = map[int]cluster.Snapshot{}
	for _, n := range nodes {
		s, err := x.c.NodeSnapshot(n.Index)
		if err != nil {
			t.Fatal(err)
		}
		x.nodesBefore[n.Index] = s
	}
}

// mnNodeAsBefore waits (90 s at most) until node n, seen from inside it, is as the snapshot
// before had it: no mount and no path added under its state dir, its CNI bin and conf dirs, and
// of memifnet's files in the directories it shares (cluster.MemifnetFiles, matched as globs:
// the kubelet's plugin sockets and registrations, CDI specs, device-info files); no ResourceSlice
// of memifnet.io for the node; on node 1, at least as many free hugepages. What the state dir
// held before may be gone (an uninstall removes memifnet's state).
func (x *tier3) mnNodeAsBefore(ctx context.Context, t *testing.T, n cluster.NodeSpec, before cluster.Snapshot, what string) {
	t.Helper()
	var changed []string
	var after cluster.Snapshot
	nSlices := 0
	err := node.Poll(ctx, 90*time.Second, "node "+n.Name+" as before the install", func() (bool, error) {
		var err error
		if after, err = x.c.NodeSnapshot(n.Index); err != nil {
			return false, err
		}
		changed = mnChanged(x.c.Paths, before, after)
		rs, err := x.cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			FieldSelector: "spec.nodeName=" + n.Name + ",spec.driver=" + names.DRADriver})
		if err != nil {
			return false, err
		}
		nSlices = len(rs.Items)
		return len(changed) == 0 && nSlices == 0 && (n.Index != 1 || after.HugepagesFree >= before.HugepagesFree), nil
	})
	if err != nil {
		x.errorf(t, "%s: node %s: %v: %d ResourceSlices of %s; HugePages_Free %d (before %d); changed:\n  %s", what, n.Name, err,
			nSlices, names.DRADriver, after.HugepagesFree, before.HugepagesFree, strings.Join(changed, "\n  "))
		t.FailNow()
	}
	x.logf("ops: %s node %s is as before the install: nothing added under %s, %s, %s or as %q; the state dir %s before, %s now",
		what, n.Name, t3StateDir, x.c.Paths.CNIBinDir, x.c.Paths.CNIConfDir, cluster.MemifnetFiles, presence(before, t3StateDir), presence(after, t3StateDir))
}

// mnChanged is how after differs from before in the mounts and paths memifnet may touch (on p); a
// path of the state dir that went away is not a change (an uninstall removes it).
func mnChanged(p cluster.Paths, before, after cluster.Snapshot) []string {
	var out []string
	for _, d := range before.Diff(after) {
		kind, what, _ := strings.Cut(d[1:], " ")
		if kind == "mount" {
			what = what[:strings.LastIndexByte(what, ' ')]
		} else if kind != "path" {
			continue
		}
		if d[0] == '-' && (what == t3StateDir || strings.HasPrefix(what, t3StateDir+"/")) {
			continue
		}
		ours := false
		for _, dir := range []string{t3StateDir, p.CNIBinDir, p.CNIConfDir} {
			ours = ours || what == dir || strings.HasPrefix(what, dir+"/")
		}
		for _, g := range cluster.MemifnetFiles {
			ok, _ := filepath.Match(strings.Replace(g, "/var/run/", "/run/", 1), what)
			ours = ours || ok
		}
		if ours {
			out = append(out, d)
		}
	}
	return out
}
