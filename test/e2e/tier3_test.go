//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// The node paths of the manifests (manifests/base/daemonset.yaml).
const (
	t3StateDir   = "/var/lib/memifnet"
	t3DevInfoDir = "/var/run/k8s.cni.cncf.io/devinfo"
	t3Namespace  = "memifnet-system"
	t3DaemonSet  = "ds/memifnet-node"
)

// tier3 is the cluster under test and what the subtests share.
type tier3 struct {
	c    *cluster.Cluster
	cs   *kubernetes.Clientset
	repo string
	logf func(string, ...any)
	// installed is the host before the Install step, for the Uninstall step.
	installed cluster.Snapshot
	// up is the host before the cluster came up (upClusterWith).
	up cluster.Snapshot
	// nodesBefore is each node's own view before TestTier3MultiNode's Install, by index.
	nodesBefore map[int]cluster.Snapshot
	// failure is a failed check's message, said again as the test's last line: the cluster's
	// logs dumped after a failure would otherwise bury it (CI shows the end of the output).
	failure string
}

// Tier 3: a real one-node cluster (API server, etcd, scheduler, controller-manager, kubelet,
// containerd v2) where memifnet is installed the way users install it, `kubectl apply -k
// manifests/`, and proven: the DaemonSet, RBAC, the installer sidecar, every example, the
// scheduler's view of the resources, day-2 restarts and the Multus overlay with its API-server
// lookup. See docs/e2e.md.
func TestTier3Cluster(t *testing.T) {
	testutil.RequireRoot(t, "the cluster tier (mounts, network namespaces, cgroups, iptables)")
	for _, tool := range []string{"runc", "iptables", "ip", "/usr/lib/cni/bridge"} {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.SkipOrFail(t, "%s missing (apt-get install runc iptables iproute2 containernetworking-plugins): %v", tool, err)
		}
	}
	start := time.Now()
	logf := func(format string, a ...any) {
		t.Logf("[%6.1fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 35*time.Minute)
	defer cancel()
	repo := repoRoot(t)
	in, err := cluster.Build(ctx, repo, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	logf("built: kube %s, containerd %s, multus %s, image %s", in.KubeDir, in.ContainerdDir, in.MultusDir, in.Image)

	before, err := cluster.TakeSnapshot(cluster.Kubeadm)
	if err != nil {
		t.Fatal(err)
	}
	const base = "/run/memifnet-e2e-t3"
	c := cluster.New(repo, base, in, logf)
	var x *tier3
	t.Cleanup(func() {
		if x != nil && x.failure != "" {
			defer t.Logf("tier 3 failed:\n%s", x.failure)
		}
		downAndCompare(t, c, before, base)
	})
	if err := c.Up(ctx); err != nil {
		t.Fatal(err)
	}
	// Up is idempotent: on a healthy cluster it starts nothing (it imports the image again).
	pids := daemonPIDs(c)
	c2 := cluster.New(repo, base, in, logf)
	if err := c2.Up(ctx); err != nil {
		t.Fatalf("second Up: %v", err)
	}
	if again := daemonPIDs(c2); len(pids) != 6 || !slices.Equal(again, pids) {
		t.Fatalf("second Up changed the cluster's processes: %v, before %v", again, pids)
	}
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	x = &tier3{c: c, cs: cs, repo: repo, logf: logf}
	for _, st := range []struct {
		name string
		fn   func(context.Context, *testing.T)
	}{
		{"Install", x.install},
		{"RBAC", x.rbac},
		{"Examples", x.examples},
		{"DPDK", x.dpdk},
		{"Unschedulable", x.unschedulable},
		{"Kubectl", x.kubectlPlugin},
		{"Day2", x.day2},
		{"CDI", x.cdi},
		{"DRA", x.dra},
		{"Webhook", x.webhook},
		{"Ordinal", x.ordinal},
		{"Upgrade", x.upgrade}, // tier3_upgrade_test.go
		{"Uninstall", x.uninstall},
		{"Multus", x.multus},
	} {
		if !t.Run(st.name, func(t *testing.T) { st.fn(ctx, t) }) {
			x.failure += "step " + st.name + " failed (its messages are above the cluster's logs)\n"
			t.FailNow() // each step builds on the one before
		}
	}
}

// daemonPIDs lists the cluster's processes as "name pid", as its state file has them.
func daemonPIDs(c *cluster.Cluster) []string {
	var out []string
	for _, n := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "containerd", "kubelet"} {
		if d := c.Daemon(n); d != nil && d.Alive() {
			out = append(out, fmt.Sprintf("%s %d", n, d.PID))
		}
	}
	return out
}

func dumpClusterLogs(t *testing.T, c *cluster.Cluster) {
	logs, _ := filepath.Glob(filepath.Join(c.LogDir(), "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		if len(b) > 5000 {
			b = b[len(b)-5000:]
		}
		t.Logf("--- tail of %s:\n%s", l, b)
	}
	if out, err := c.KubectlCmd(context.Background(), "get", "pods", "-A", "-o", "wide").CombinedOutput(); err == nil {
		t.Logf("--- kubectl get pods -A:\n%s", out)
	}
	if out, err := c.KubectlCmd(context.Background(), "get", "events", "-A", "--sort-by=.lastTimestamp").CombinedOutput(); err == nil {
		t.Logf("--- kubectl get events -A:\n%s", out)
	}
}

// kubectl runs kubectl (admin) from the repository root and fails the test on an error.
func (x *tier3) kubectl(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	out, err := x.c.KubectlCmd(ctx, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kubectlIn is kubectl with stdin.
func (x *tier3) kubectlIn(ctx context.Context, t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := x.c.KubectlCmd(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// conflistTypes is the plugin types of the node's primary conflist, in order.
func (x *tier3) conflistTypes(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(x.c.Paths.Conflist())
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type string `json:"type"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatalf("%s: %v", x.c.Paths.Conflist(), err)
	}
	var types []string
	for _, p := range conf.Plugins {
		types = append(types, p.Type)
	}
	return types
}

// install: `kubectl apply -k manifests/` as shipped (chained overlay) rolls the DaemonSet out;
// its sidecar chains memif-cni into the node's conflist; the node offers the socket slots and the
// hugepage pool.
func (x *tier3) install(ctx context.Context, t *testing.T) {
	x.installed = x.snapshot(t)
	x.logf("install: %s", strings.TrimSpace(x.kubectl(ctx, t, "apply", "-k", "manifests/")))
	x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", t3DaemonSet, "--timeout=3m")
	x.logf("install: DaemonSet rolled out")
	var types []string
	if err := node.Poll(ctx, 60*time.Second, "memif-cni chained into "+x.c.Paths.Conflist(), func() (bool, error) {
		types = x.conflistTypes(t)
		return slices.Equal(types, []string{"bridge", "memif-cni"}), nil
	}); err != nil {
		t.Fatalf("%v: plugins %q", err, types)
	}
	x.logf("install: %s chains %q", x.c.Paths.Conflist(), types)
	var alloc corev1.ResourceList
	if err := node.Poll(ctx, 90*time.Second, "node allocatable with memifnet resources", func() (bool, error) {
		n, err := x.cs.CoreV1().Nodes().Get(ctx, cluster.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		alloc = n.Status.Allocatable
		s, h := alloc["memifnet.io/socket"], alloc["memifnet.io/hugepool"]
		return s.Value() == 64 && h.Value() == 4, nil
	}); err != nil {
		t.Fatalf("%v: allocatable %v", err, alloc)
	}
	s, h, hp := alloc["memifnet.io/socket"], alloc["memifnet.io/hugepool"], alloc["hugepages-2Mi"]
	x.logf("install: node allocatable memifnet.io/socket=%s memifnet.io/hugepool=%s hugepages-2Mi=%s", s.String(), h.String(), hp.String())
	x.webhookReady(ctx, t)
	x.logf("install: the admission webhook answers (tier3_webhook_test.go)")
}

// metricsReviewRules are system:auth-delegator's, which the agent holds to review the tokens of
// its /metrics callers (can-i --list rows).
var metricsReviewRules = []string{
	"subjectaccessreviews.authorization.k8s.io [] [] [create]",
	"tokenreviews.authentication.k8s.io [] [] [create]",
}

// rbac: `kubectl auth can-i --list` for the node agent's service account is what docs/install.md
// says: nothing beyond what every service account may do (the namespace's default service
// account is the baseline, itself only self-reviews and discovery URLs) but reading Nodes
// (whether its DaemonSet still selects its node, at a stop) and the token and access reviews of
// /metrics. memif-cni under Multus reads pods with the node's own credentials (the multus
// step); the DRA step checks the DRA overlay's rules.
func (x *tier3) rbac(ctx context.Context, t *testing.T) {
	// Get nodes, the review of /metrics callers.
	x.mayOnly(ctx, t, "", "memifnet", append([]string{"nodes [] [] [get]"}, metricsReviewRules...))
	for _, r := range x.canIRules(ctx, t, "", "default") {
		if f := strings.Fields(r); len(f) > 0 && !strings.HasPrefix(f[0], "selfsubject") && !strings.HasPrefix(f[0], "[") {
			t.Errorf("the baseline (default service account) may %q: more than self-reviews and discovery", r)
		}
	}
	x.logf("rbac: memifnet-system/memifnet may get nodes and %q, nothing else beyond self-reviews and discovery", metricsReviewRules)
	x.ownDaemonSetRBAC(ctx, t)
}

// podSucceeded waits for a pod to end: Succeeded passes, Failed (or the timeout) fails.
func (x *tier3) podSucceeded(ctx context.Context, t *testing.T, ns, name string, timeout time.Duration) {
	t.Helper()
	if err := x.c.WaitPodSucceeded(ctx, ns, name, timeout); err != nil {
		t.Fatalf("%v; logs:\n%s", err, x.logs(ctx, ns, name))
	}
}

func (x *tier3) logs(ctx context.Context, ns, name string) string {
	out, err := x.c.Logs(ctx, ns, name)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return out
}

// verified fails unless a finished memif-perf pod's log (read with kubectl logs) shows verified
// traffic.
func (x *tier3) verified(ctx context.Context, t *testing.T, ns, name string) map[string]float64 {
	t.Helper()
	log := x.logs(ctx, ns, name)
	sum, ok := node.Summary(log)
	if !ok || sum["verify_errors"] != 0 || !strings.Contains(log, "corrupt=0 lost=0 late=0") ||
		(sum["rx_pkts"] == 0 && sum["tx_pkts"] == 0) {
		t.Fatalf("%s/%s: want a verified run with verify_errors=0; kubectl logs:\n%s", ns, name, log)
	}
	x.logf("%s/%s: %s", ns, name, summaryLine(log))
	return sum
}

// hostPort waits for memif-cni's description of a host port of pod (namespace default).
func hostPort(ctx context.Context, t *testing.T, pod string) map[string]any {
	t.Helper()
	var found map[string]any
	err := node.Poll(ctx, 2*time.Minute, "host port of "+pod, func() (bool, error) {
		files, _ := filepath.Glob(filepath.Join(t3StateDir, "state", "host-ports", "*.json"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			var hp map[string]any
			if json.Unmarshal(b, &hp) == nil && hp["pod"] == pod && hp["namespace"] == "default" {
				found = hp
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// examples: every example of manifests/examples runs to Succeeded with verified traffic; the
// host-port example's data plane is played from the host by memif-perf, which reads what
// memif-cni wrote in state/host-ports/<slot>.json.
func (x *tier3) examples(ctx context.Context, t *testing.T) {
	x.logf("examples: %s", strings.TrimSpace(x.kubectl(ctx, t, "apply", "-k", "manifests/examples/")))
	hp := hostPort(ctx, t, "memif-host-port")
	x.logf("examples: host port %v: socket %v, host role %v, %v queue(s)", hp["port"], hp["socket"], hp["role"], hp["queues"])
	args := []string{"--role", fmt.Sprint(hp["role"]), "--socket", fmt.Sprint(hp["socket"]),
		"--id", fmt.Sprint(hp["id"]), "--queues", fmt.Sprint(hp["queues"]),
		"--mode", "txrx", "--verify", "--size", "1500", "--duration", "10s", "--connect-timeout", "2m"}
	if s, _ := hp["secret"].(string); s != "" {
		args = append(args, "--secret", s)
	}
	out, err := x.hostPerf(ctx, args...).CombinedOutput()
	sum, ok := node.Summary(string(out))
	if err != nil || !ok || sum["verify_errors"] != 0 || sum["rx_pkts"] == 0 {
		t.Fatalf("host data plane (memif-perf %s): %v\n%s", strings.Join(args, " "), err, out)
	}
	x.logf("examples: host data plane: %s", summaryLine(string(out)))
	for _, p := range []string{"memif-tx", "memif-rx", "memif-host-port"} {
		x.podSucceeded(ctx, t, "default", p, 3*time.Minute)
		x.verified(ctx, t, "default", p)
	}
	x.kubectl(ctx, t, "delete", "-k", "manifests/examples/", "--wait=true")
	x.noLeftovers(ctx, t, "after kubectl delete -k manifests/examples/")
}

// hostPerf is the host data plane: memif-perf (the build's) run on the node as root with umask 0,
// as a host data plane serving non-root pods must: the pod (uid 65532) connects to the socket
// this creates, which needs write permission on it.
func (x *tier3) hostPerf(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", `umask 0 && exec "$0" "$@"`,
		filepath.Join(x.repo, "hack", "_out", "bin", "memif-perf")}, args...)...)
}

// noLeftovers waits until no pod's attachment is left on the node (the last DEL may still run).
func (x *tier3) noLeftovers(ctx context.Context, t *testing.T, when string) {
	t.Helper()
	var left []string
	if err := node.Poll(ctx, 60*time.Second, "CNI DEL done", func() (bool, error) {
		var err error
		left, err = node.LeftoversIn(t3StateDir, t3DevInfoDir)
		return err == nil && len(left) == 0, err
	}); err != nil {
		t.Fatalf("%s, left behind:\n  %s", when, strings.Join(left, "\n  "))
	}
}

// perfPod is a test pod running memif-perf, small enough for several on 2 cores.
func perfPod(name, port, link string, args ...string) string {
	return cluster.PerfPod(name, port, link, "200m", args...)
}

// unschedulable: a pod asking for more slots than the node has stays Pending, and the scheduler
// says why.
func (x *tier3) unschedulable(ctx context.Context, t *testing.T) {
	pod := strings.Replace(perfPod("memif-too-many", "east", "none", "--mode=rx"),
		"memifnet.io/socket: 1", "memifnet.io/socket: 65", 1)
	x.kubectlIn(ctx, t, pod, "apply", "-f", "-")
	msg := x.unschedulableFor(ctx, t, "memif-too-many", "Insufficient memifnet.io/socket")
	x.logf("unschedulable: memif-too-many (65 slots) stays Pending: %s", msg)
	x.kubectl(ctx, t, "delete", "pod", "memif-too-many", "--wait=true")
}

// containerPID is the host PID of a pod's first container (from the runtime, through CRI).
func (x *tier3) containerPID(ctx context.Context, t *testing.T, ns, name string) int {
	t.Helper()
	var info struct {
		PID int `json:"pid"`
	}
	raw := x.containerInfo(ctx, t, ns, name)
	if err := json.Unmarshal([]byte(raw), &info); err != nil || info.PID == 0 {
		t.Fatalf("container of %s/%s: no pid in %q: %v", ns, name, raw, err)
	}
	return info.PID
}

// rxProgress is rx_pkts of a running memif-perf pod's newest progress line (kubectl logs).
func (x *tier3) rxProgress(ctx context.Context, name string) float64 {
	return node.LastProgressRx(x.logs(ctx, "default", name))
}

// trafficFlows waits until the receiving pod's counter passes its value now.
func (x *tier3) trafficFlows(ctx context.Context, t *testing.T, rx, when string) {
	t.Helper()
	from := x.rxProgress(ctx, rx)
	if err := node.Poll(ctx, 60*time.Second, "traffic "+when, func() (bool, error) {
		return x.rxProgress(ctx, rx) > from, nil
	}); err != nil {
		t.Fatal(err)
	}
	x.logf("day2: traffic flows %s (%s received %.0f -> %.0f verified packets)", when, rx, from, x.rxProgress(ctx, rx))
}

// slotsOf waits until PodResources reports the slot of each running pod (the kubelet reports a
// pod's devices only while it runs) and returns them in order.
func (x *tier3) slotsOf(ctx context.Context, t *testing.T, pods ...string) []string {
	t.Helper()
	var all []string
	for _, p := range pods {
		var ids []string
		if err := node.Poll(ctx, 2*time.Minute, "PodResources slot of "+p, func() (bool, error) {
			var err error
			ids, err = node.PodDevices(ctx, filepath.Join(names.KubeletDir, names.PodResourcesSocket),
				"default", p, names.SocketResource)
			return err == nil && len(ids) > 0, err
		}); err != nil || len(ids) != 1 {
			t.Fatalf("%v: %q; want one slot", err, ids)
		}
		all = append(all, ids[0])
	}
	return all
}

// agentPod is the running node agent pod (name, UID, deviceplugin restarts).
func (x *tier3) agentPod(ctx context.Context, t *testing.T) (string, string, int32) {
	t.Helper()
	pods, err := x.cs.CoreV1().Pods(t3Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=memifnet-node"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("node agent pods: %v, %v", pods, err)
	}
	p := pods.Items[0]
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "deviceplugin" {
			return p.Name, string(p.UID), cs.RestartCount
		}
	}
	return p.Name, string(p.UID), 0
}

// newPairPasses runs a short pair on a new link: both get slots other than busy, and pass
// verified traffic.
func (x *tier3) newPairPasses(ctx context.Context, t *testing.T, link string, busy []string) {
	t.Helper()
	rx, tx := link+"-rx", link+"-tx"
	x.kubectlIn(ctx, t, perfPod(rx, "east", link, "--mode=rx", "--verify", "--size=1500", "--duration=8s", "--connect-timeout=2m")+
		"---\n"+perfPod(tx, "west", link, "--mode=tx", "--verify", "--size=1500", "--duration=5s", "--connect-timeout=2m"),
		"apply", "-f", "-")
	got := x.slotsOf(ctx, t, rx, tx)
	x.podSucceeded(ctx, t, "default", tx, 3*time.Minute)
	x.podSucceeded(ctx, t, "default", rx, 3*time.Minute)
	for _, s := range got {
		if slices.Contains(busy, s) {
			t.Fatalf("new pod got slot %s, which a running pod holds (%q)", s, busy)
		}
	}
	x.verified(ctx, t, "default", rx)
	x.logf("new pair %s got slots %q (busy: %q), traffic verified", link, got, busy)
	x.kubectl(ctx, t, "delete", "pod", rx, tx, "--wait=true")
}

// startVerifiedPair starts <name>-rx (east, rx --verify) and <name>-tx (west, tx --verify) on
// the link <name>-link, 1500 B frames until stopped, and waits until the receiver counts packets.
func (x *tier3) startVerifiedPair(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	rx, tx, link := name+"-rx", name+"-tx", name+"-link"
	x.kubectlIn(ctx, t, perfPod(rx, "east", link, "--mode=rx", "--verify", "--size=1500", "--duration=0", "--connect-timeout=2m")+
		"---\n"+perfPod(tx, "west", link, "--mode=tx", "--verify", "--size=1500", "--duration=0", "--connect-timeout=2m"),
		"apply", "-f", "-")
	x.receiving(ctx, t, rx)
}

// day2: while a link pair passes verified traffic, the DaemonSet is restarted (kubectl rollout
// restart) and then its node agent is SIGKILLed; after each, the traffic still flows, the pair
// keeps its slots and new pods get other slots and pass traffic; the pair ends verified.
func (x *tier3) day2(ctx context.Context, t *testing.T) {
	x.startVerifiedPair(ctx, t, "day2")
	busy := x.slotsOf(ctx, t, "day2-rx", "day2-tx")
	x.logf("day2: day2-rx and day2-tx hold %q and pass traffic", busy)

	name, uid, _ := x.agentPod(ctx, t)
	x.logf("day2: %s", strings.TrimSpace(x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "restart", t3DaemonSet)))
	x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", t3DaemonSet, "--timeout=3m")
	name2, uid2, _ := x.agentPod(ctx, t)
	if uid2 == uid {
		t.Fatalf("rollout restart kept pod %s", name)
	}
	x.logf("day2: node agent %s replaced by %s", name, name2)
	x.trafficFlows(ctx, t, "day2-rx", "after the rollout restart")
	if got := x.slotsOf(ctx, t, "day2-rx", "day2-tx"); !slices.Equal(got, busy) {
		t.Fatalf("after the restart the pair holds %q, before %q", got, busy)
	}
	x.newPairPasses(ctx, t, "day2-after-restart", busy)

	_, _, restarts := x.agentPod(ctx, t)
	pids := agentPIDs(t)
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	x.logf("day2: node agent (memif-deviceplugin, pid %v) killed with SIGKILL", pids)
	if err := node.Poll(ctx, 2*time.Minute, "node agent restarted and ready", func() (bool, error) {
		_, _, r := x.agentPod(ctx, t)
		if r <= restarts {
			return false, nil
		}
		out, err := x.c.KubectlCmd(ctx, "-n", t3Namespace, "rollout", "status", t3DaemonSet, "--timeout=1s").CombinedOutput()
		return err == nil, fmt.Errorf("%v: %s", err, out)
	}); err != nil {
		t.Fatal(err)
	}
	x.trafficFlows(ctx, t, "day2-rx", "after the SIGKILL")
	x.newPairPasses(ctx, t, "day2-after-kill", busy)

	// End the long pair: the sender first, then the receiver, each with SIGINT (memif-perf prints
	// its summary and exits 0 when every byte checked).
	x.stopPerf(ctx, t, "day2-tx", "day2-rx")
	sum := x.verified(ctx, t, "default", "day2-rx")
	x.logf("day2: the pair passed %.0f verified packets across a rollout restart and a SIGKILL", sum["rx_pkts"])
	x.kubectl(ctx, t, "delete", "pod", "day2-rx", "day2-tx", "--wait=true")
	x.noLeftovers(ctx, t, "after the day-2 pods")
}

// cdi: the node agent switched to CDI (--cdi-dir=/var/run/cdi, as an operator would patch it in):
// containerd v2 injects the slots from the CDI spec the agent writes (recursive binds, so the
// link memif-cni mounts in the slot comes along), and a link pair passes verified traffic.
func (x *tier3) cdi(ctx context.Context, t *testing.T) {
	ds, err := x.cs.AppsV1().DaemonSets(t3Namespace).Get(ctx, "memifnet-node", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == "deviceplugin" {
			args = append(c.Args, "--cdi-dir=/var/run/cdi")
		}
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": "deviceplugin", "args": args,
			"volumeMounts": []any{map[string]any{"name": "cdi", "mountPath": "/var/run/cdi"}}}},
		"volumes": []any{map[string]any{"name": "cdi", "hostPath": map[string]any{"path": "/var/run/cdi", "type": "DirectoryOrCreate"}}},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.cs.AppsV1().DaemonSets(t3Namespace).Patch(ctx, "memifnet-node", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", t3DaemonSet, "--timeout=3m")
	x.logf("cdi: node agent rolled out with --cdi-dir=/var/run/cdi")
	x.kubectlIn(ctx, t, perfPod("cdi-rx", "east", "cdi-link", "--mode=rx", "--verify", "--size=1500", "--duration=8s", "--connect-timeout=2m")+
		"---\n"+perfPod("cdi-tx", "west", "cdi-link", "--mode=tx", "--verify", "--size=1500", "--duration=5s", "--connect-timeout=2m"),
		"apply", "-f", "-")
	slots := x.slotsOf(ctx, t, "cdi-rx", "cdi-tx")
	for i, p := range []string{"cdi-rx", "cdi-tx"} {
		// The kubelet passed the slot to containerd as a CDI device, and containerd ran the
		// container with it.
		info := x.containerInfo(ctx, t, "default", p)
		if dev := "memifnet.io/socket=" + slots[i]; !strings.Contains(info, dev) {
			t.Errorf("%s: the container was not created with CDI device %s", p, dev)
		}
	}
	spec, err := os.ReadFile("/var/run/cdi/memifnet.io-socket.json")
	if err != nil || !strings.Contains(string(spec), slots[0]) || !strings.Contains(string(spec), "rbind") {
		t.Errorf("CDI spec /var/run/cdi/memifnet.io-socket.json: %v\n%s", err, spec)
	}
	x.podSucceeded(ctx, t, "default", "cdi-tx", 3*time.Minute)
	x.podSucceeded(ctx, t, "default", "cdi-rx", 3*time.Minute)
	x.verified(ctx, t, "default", "cdi-rx")
	x.logf("cdi: slots %q reached the pods as CDI devices; the link pair passed verified traffic", slots)
	x.kubectl(ctx, t, "delete", "pod", "cdi-rx", "cdi-tx", "--wait=true")
	x.noLeftovers(ctx, t, "after the CDI pods")
}

// containerInfo is the runtime's verbose status of a pod's first container (CRI "info": its
// config and OCI spec, as JSON).
func (x *tier3) containerInfo(ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	var id string
	if err := node.Poll(ctx, time.Minute, name+" container created", func() (bool, error) {
		p, err := x.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, err
		}
		id = strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		return id != "", nil
	}); err != nil {
		t.Fatal(err)
	}
	cr, err := node.DialCRI(ctx, x.c.ContainerdSock())
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	st, err := cr.Runtime.ContainerStatus(ctx, &cri.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	return st.Info["info"]
}

// agentPIDs finds the node agent's memif-deviceplugin process on the host.
func agentPIDs(t *testing.T) []int {
	t.Helper()
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if args[0] == "/usr/local/bin/memif-deviceplugin" && slices.Contains(args, "--state-dir="+t3StateDir) {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("node agent processes: %v, want one", pids)
	}
	return pids
}

// multus: with the Multus thin plugin on the node and the NAD CRD, `kubectl apply -k
// manifests/overlays/multus` installs memif-cni as a NetworkAttachmentDefinition; pods attach
// through it and pass verified traffic. Multus does not pass pod annotations to its delegates, so
// memif-cni reads them from the API server with the node's own credentials (the kubelet's
// kubeconfig, which the NAD names), and those reach no pod of another node
// (tier3_multus_test.go).
func (x *tier3) multus(ctx context.Context, t *testing.T) {
	if err := x.c.InstallMultus(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := x.c.UninstallMultus(context.Background()); err != nil {
			t.Error(err)
		}
	})
	x.logf("multus: thin plugin installed (%s), NetworkAttachmentDefinition CRD established", x.c.Paths.MultusConf())
	before := x.snapshot(t)
	x.kubectl(ctx, t, "apply", "-k", "manifests/overlays/multus/")
	x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", t3DaemonSet, "--timeout=3m")
	x.webhookReady(ctx, t) // the overlay includes base: the webhook is back, and must answer
	x.logf("multus: overlay rolled out; memif-cni reads pods with %s", x.nadKubeconfig(ctx, t))
	x.kubectl(ctx, t, "apply", "-f", "manifests/examples/multus-pod.yaml")
	pods := []string{"memif-multus-tx", "memif-multus-rx"}
	for _, p := range pods {
		x.podSucceeded(ctx, t, "default", p, 3*time.Minute)
	}
	x.verified(ctx, t, "default", "memif-multus-rx")
	for _, p := range pods {
		got, err := x.cs.CoreV1().Pods("default").Get(ctx, p, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		status := got.Annotations["k8s.v1.cni.cncf.io/network-status"]
		if !strings.Contains(status, `"memifnet-system/memif"`) {
			t.Errorf("%s: Multus network-status %q names no memifnet-system/memif attachment", p, status)
		}
	}
	x.logf("multus: both pods attached memifnet-system/memif through Multus (network-status)")
	x.multusDeviceInfo(ctx, t) // the NPWG device-info of each port, roles as the spec means them
	// Multus passes no pod annotations to memif-cni (and the kubelet's Pods API refuses
	// anonymous clients here): memif-cni read each pod from the API server as the node, which
	// the audit log shows (its User-Agent tells it from the kubelet's own reads).
	for _, p := range pods {
		if !x.audited(t, "system:node:"+cluster.NodeName, names.PodInfoHelper, "get", "pods", "default", p) {
			t.Errorf("no successful get of pod %s by %s as system:node:%s in %s", p, names.PodInfoHelper, cluster.NodeName, x.c.AuditLog())
		}
	}
	x.logf("multus: memif-cni read both pods from the API server as system:node:%s (audit log, User-Agent %s)", cluster.NodeName, names.PodInfoHelper)
	x.multusLeastPrivilege(ctx, t)
	x.kubectl(ctx, t, "delete", "-f", "manifests/examples/multus-pod.yaml", "--wait=true")
	x.noLeftovers(ctx, t, "after the Multus pods")
	x.kubectl(ctx, t, "delete", "-k", "manifests/overlays/multus/", "--wait=true")
	x.nodeAsBefore(ctx, t, before, "after kubectl delete -k manifests/overlays/multus/")
}

// audited reports whether the API server's audit log holds a successful request of user (with
// that User-Agent, unless agent is "").
func (x *tier3) audited(t *testing.T, user, agent, verb, resource, ns, name string) bool {
	t.Helper()
	b, err := os.ReadFile(x.c.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		var ev struct {
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			User      struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource, Namespace, Name string
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if json.Unmarshal([]byte(l), &ev) != nil {
			continue
		}
		if ev.User.Username == user && (agent == "" || strings.HasPrefix(ev.UserAgent, agent)) && ev.Verb == verb && ev.ObjectRef.Resource == resource &&
			ev.ObjectRef.Namespace == ns && ev.ObjectRef.Name == name && ev.ResponseStatus.Code == 200 {
			return true
		}
	}
	return false
}

// upCluster is the start of a compact tier-3 test: it builds what a cluster runs (or reuses it),
// brings up a cluster of nodes under base, taken down at the test's end and the host compared
// with how it was before (downAndCompare), and returns the tier's handle with a logger that
// stamps each line with the time since the test began.
func upCluster(ctx context.Context, t *testing.T, base string, nodes int) *tier3 {
	t.Helper()
	return upClusterWith(ctx, t, base, nodes, cluster.Kubeadm)
}

// upClusterWith is upCluster with the node paths p (cluster.Paths).
func upClusterWith(ctx context.Context, t *testing.T, base string, nodes int, p cluster.Paths) *tier3 {
	t.Helper()
	start := time.Now()
	logf := func(format string, a ...any) {
		t.Logf("[%6.1fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	repo := repoRoot(t)
	in, err := cluster.Build(ctx, repo, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	before, err := cluster.TakeSnapshot(p)
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.New(repo, base, in, logf)
	c.NodeCount, c.Paths = nodes, p
	t.Cleanup(func() { downAndCompare(t, c, before, base) })
	if err := c.Up(ctx); err != nil {
		t.Fatal(err)
	}
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return &tier3{c: c, cs: cs, repo: repo, logf: logf, up: before}
}

// downAndCompare takes the cluster down (its logs first, when the test failed) and fails the test
// if the host is not as the snapshot before the cluster came up.
func downAndCompare(t *testing.T, c *cluster.Cluster, before cluster.Snapshot, base string) {
	t.Helper()
	if t.Failed() {
		dumpClusterLogs(t, c)
	}
	if err := c.Down(); err != nil {
		t.Error(err)
		return
	}
	after, err := cluster.TakeSnapshot(before.Distro)
	if err != nil {
		t.Error(err)
		return
	}
	if leaks := before.Leaks(after, base); len(leaks) > 0 {
		t.Errorf("cluster down left the host changed:\n  %s", strings.Join(leaks, "\n  "))
	}
}
