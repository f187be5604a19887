//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// Placement when the scheduler has a choice (issue 33 part 3), steps of TestTier3MultiNode: a
// full node, and a drained one.

// linkPeerNodeFull is the webhook's Event reason (cmd/internal/eventreason, which a test outside
// cmd/ cannot import; kubectl-memifnet passes it on as a finding of the same name).
const linkPeerNodeFull = "LinkPeerNodeFull"

// pinned puts a pod of mnPod or plainPod on one node by nodeSelector.
func pinned(pod, nodeName string) string {
	return strings.Replace(pod, "spec:\n", "spec:\n  nodeSelector: {kubernetes.io/hostname: \""+nodeName+"\"}\n", 1)
}

// mnFiller is a pod without memif ports that holds slots slots on a node: a cheap way to fill it.
func mnFiller(name, nodeName string, slots int) string {
	return pinned(strings.Replace(plainPod(name), "limits: {memory: 16Mi}",
		fmt.Sprintf("limits: {memory: 16Mi, %s: %d}", names.SocketResource, slots), 1), nodeName)
}

// mnFull: node 2 (small profile, 32 slots) made full by a filler holding 31 slots and the first
// pod of link mn-full. The link's second pod, created next with the annotation only, stays
// Pending, never bound to node 1 though node 1 has room: the webhook records LinkPeerNodeFull
// naming the link, the peer, the node and its 0 free slots, and `kubectl memifnet explain` passes
// it on. A new link created meanwhile lands on node 1 and passes verified traffic. With the
// filler gone, the Pending pod joins its peer on node 2 and the link passes verified traffic.
func (x *tier3) mnFull(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	full, other := nodes[1], nodes[0]
	rx := func(name, link string) string {
		return mnPod(name, "east", "east@"+link, "--mode=rx", "--verify", "--size=1500", "--duration=4s", "--rx-mode=interrupt", "--connect-timeout=3m")
	}
	tx := func(name, link string) string {
		return mnPod(name, "west", "west@"+link, "--mode=tx", "--verify", "--size=1500", "--duration=2s", "--connect-timeout=3m")
	}
	x.kubectlIn(ctx, t, mnFiller("mn-fill", full.Name, 31)+"---\n"+pinned(rx("mn-full-rx", "mn-full"), full.Name), "apply", "-f", "-")
	for _, p := range []string{"mn-fill", "mn-full-rx"} {
		if got := x.bound(ctx, t, p); got != full.Name {
			t.Fatalf("%s bound to %s, want %s", p, got, full.Name)
		}
	}
	t0 := time.Now()
	x.kubectlIn(ctx, t, tx("mn-full-tx", "mn-full")+"---\n"+rx("mn-new-rx", "mn-new")+"---\n"+tx("mn-new-tx", "mn-new"), "apply", "-f", "-")
	want := fmt.Sprintf("link mn-full: peer pod default/mn-full-rx runs on node %s, which has 0 free %s", full.Name, names.SocketResource)
	x.waitEventIn(ctx, t, "default", "mn-full-tx", linkPeerNodeFull, want)
	x.logf("full: mn-full-tx Pending, the webhook's %s after %.1fs", linkPeerNodeFull, time.Since(t0).Seconds())
	var ex struct{ Findings []kcFinding }
	x.memifnetJSON(ctx, t, x.c.Kubeconfig(), &ex, "explain", "mn-full-tx")
	if f := findReason(ex.Findings, linkPeerNodeFull); f == nil || !strings.Contains(f.Message, want) {
		t.Errorf("kubectl memifnet explain mn-full-tx: %+v; want %s saying %q", ex.Findings, linkPeerNodeFull, want)
	}
	text, _, _ := x.memifnetPlugin(ctx, t, x.c.Kubeconfig(), "explain", "mn-full-tx")
	x.logf("full: kubectl memifnet explain mn-full-tx:\n%s", text)
	for _, p := range []string{"mn-new-rx", "mn-new-tx"} {
		x.podSucceeded(ctx, t, "default", p, 3*time.Minute)
		x.verified(ctx, t, "default", p)
		if got := x.pod(ctx, t, p).Spec.NodeName; got != other.Name {
			t.Errorf("%s ran on %s, want %s (%s is full)", p, got, other.Name, full.Name)
		}
	}
	if got := x.pod(ctx, t, "mn-full-tx"); got.Spec.NodeName != "" || got.Status.Phase != corev1.PodPending {
		t.Fatalf("mn-full-tx is %s on %q, want Pending and unbound while %s is full", got.Status.Phase, got.Spec.NodeName, full.Name)
	}
	x.logf("full: new link mn-new passed verified traffic on %s %.1fs after it was created; mn-full-tx still Pending, unbound", other.Name, time.Since(t0).Seconds())
	t0 = time.Now()
	x.kubectl(ctx, t, "delete", "pod", "mn-fill", "--wait=true")
	for _, p := range []string{"mn-full-rx", "mn-full-tx"} {
		x.podSucceeded(ctx, t, "default", p, 3*time.Minute)
		x.verified(ctx, t, "default", p)
		if got := x.pod(ctx, t, p).Spec.NodeName; got != full.Name {
			t.Errorf("%s ran on %s, want %s (its link's node)", p, got, full.Name)
		}
	}
	x.logf("full: filler gone: mn-full-tx joined mn-full-rx on %s, verified traffic %.1fs later", full.Name, time.Since(t0).Seconds())
	x.kubectl(ctx, t, "delete", "pods", "--all", "-n", "default", "--wait=true")
	for _, n := range nodes[:2] {
		x.mnNoLeftovers(ctx, t, n, false)
	}
}

// mnDrainPairs is the drain step's links: a Deployment pair and two StatefulSet pairs.
var mnDrainPairs = []struct{ link, rx, tx string }{
	{"mn-dep", "app=mn-dep-rx", "app=mn-dep-tx"},
	{"nf-0", "app=nf-a,apps.kubernetes.io/pod-index=0", "app=nf-b,apps.kubernetes.io/pod-index=0"},
	{"nf-1", "app=nf-a,apps.kubernetes.io/pod-index=1", "app=nf-b,apps.kubernetes.io/pod-index=1"},
}

// mnDrainWorkloads is manifests/examples/statefulset-link.yaml with 2 replicas a set, and the
// same two pod templates as Deployments of 1 (mn-dep-rx, mn-dep-tx) on link mn-dep.
func (x *tier3) mnDrainWorkloads(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(x.repo, statefulSetExample))
	if err != nil {
		t.Fatal(err)
	}
	sets := strings.ReplaceAll(string(b), "replicas: 3", "replicas: 2")
	stsOnly := regexp.MustCompile(`(?m)^\s*(serviceName|podManagementPolicy):.*\n`)
	var deps []string
	for _, d := range strings.Split(sets, "\n---\n") {
		from, to := "nf-a", "mn-dep-rx"
		if strings.Contains(d, "name: nf-b") {
			from, to = "nf-b", "mn-dep-tx"
		}
		d = stsOnly.ReplaceAllString(d, "")
		d = strings.NewReplacer("kind: StatefulSet", "kind: Deployment", "replicas: 2", "replicas: 1",
			"name: "+from+"\n", "name: "+to+"\n", "app: "+from+"}", "app: "+to+"}", "nf-{ordinal}", "mn-dep").Replace(d)
		deps = append(deps, d)
	}
	return sets + "\n---\n" + strings.Join(deps, "\n---\n")
}

// mnDrain: with node 1 cordoned, a Deployment pair and two StatefulSet pairs ({ordinal} links)
// run on node 2 with verified traffic; node 1 uncordoned, `kubectl drain` node 2 evicts them and
// they come back, each pair together, on node 1 with verified traffic; node 2 keeps nothing of
// them (no port file, link mount, store or device-info entry: its agent freed the slots).
func (x *tier3) mnDrain(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	from, to := nodes[1], nodes[0]
	workloads := x.mnDrainWorkloads(t)
	x.kubectl(ctx, t, "cordon", to.Name)
	x.kubectlIn(ctx, t, workloads, "apply", "-f", "-")
	t0 := time.Now()
	old := x.mnPairsOn(ctx, t, from.Name, nil)
	x.logf("drain: %d pairs running on %s with verified traffic %.1fs after apply", len(mnDrainPairs), from.Name, time.Since(t0).Seconds())
	if left, err := x.mnLeftovers(from, false); err != nil || len(left) == 0 {
		t.Fatalf("node %s shows no attachment of the running pairs (%v): the leftover check sees nothing", from.Name, err)
	}
	x.kubectl(ctx, t, "uncordon", to.Name)
	t0 = time.Now()
	out := x.kubectl(ctx, t, "drain", from.Name, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=3m")
	x.logf("drain: kubectl drain %s took %.1fs:\n%s", from.Name, time.Since(t0).Seconds(), strings.TrimSpace(out))
	x.mnPairsOn(ctx, t, to.Name, old)
	x.logf("drain: every pair back together on %s with verified traffic %.1fs after the drain began", to.Name, time.Since(t0).Seconds())
	x.mnNoLeftovers(ctx, t, from, false)
	x.kubectl(ctx, t, "uncordon", from.Name)
	x.kubectlIn(ctx, t, workloads, "delete", "-f", "-", "--cascade=foreground", "--wait=true", "--timeout=2m")
	x.mnNoLeftovers(ctx, t, to, false)
}

// mnPairsOn waits until each of mnDrainPairs has one live pod per end, Running on nodeName and
// none of old, then checks its traffic: the receiver's verified count rising, the sender
// sending. It returns the pods' UIDs.
func (x *tier3) mnPairsOn(ctx context.Context, t *testing.T, nodeName string, old map[types.UID]bool) map[types.UID]bool {
	t.Helper()
	uids := map[types.UID]bool{}
	for _, p := range mnDrainPairs {
		var ends [2]string
		for i, sel := range []string{p.rx, p.tx} {
			var seen []string
			err := node.Poll(ctx, 3*time.Minute, p.link+" "+sel+" on "+nodeName, func() (bool, error) {
				pods, err := x.cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
				if err != nil {
					return false, err
				}
				seen = seen[:0]
				var live []corev1.Pod
				for _, q := range pods.Items {
					seen = append(seen, fmt.Sprintf("%s %s on %q deleting=%v", q.Name, q.Status.Phase, q.Spec.NodeName, q.DeletionTimestamp != nil))
					if q.DeletionTimestamp == nil {
						live = append(live, q)
					}
				}
				if len(live) != 1 || old[live[0].UID] || live[0].Spec.NodeName != nodeName || live[0].Status.Phase != corev1.PodRunning {
					return false, nil
				}
				ends[i] = live[0].Name
				uids[live[0].UID] = true
				return true, nil
			})
			if err != nil {
				t.Fatalf("%v: %s", err, strings.Join(seen, "; "))
			}
		}
		first := x.perfCounter(ctx, t, ends[0], "rx_pkts", 1)
		then := x.perfCounter(ctx, t, ends[0], "rx_pkts", first+1)
		sent := x.perfCounter(ctx, t, ends[1], "tx_pkts", 1)
		x.logf("link %s on %s: %s verified rx_pkts=%d (rising from %d, verify_errors=0), %s tx_pkts=%d", p.link, nodeName, ends[0], then, first, ends[1], sent)
	}
	return uids
}
