//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
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

// Node loss (issue 33 part 3), a step of TestTier3MultiNode.

// outOfService is Kubernetes' non-graceful node shutdown taint: an operator sets it on a node
// known to be down, and the pod garbage collector force-deletes the node's terminating pods.
const outOfService = "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"

// lossToleration is how long the node loss step's pods stay bound to a node that stopped
// answering (the default, added by the API server, is 300 s).
const lossToleration = 10

// mnLossWorkloads is the drain step's workloads (mnDrainWorkloads) whose pods tolerate an
// unreachable or not-ready node for lossToleration seconds only.
func (x *tier3) mnLossWorkloads(t *testing.T) string {
	const at = "      automountServiceAccountToken: false\n"
	w := x.mnDrainWorkloads(t)
	if n := strings.Count(w, at); n != 4 {
		t.Fatalf("%d pod templates with %q, want 4", n, at)
	}
	var tol strings.Builder
	tol.WriteString("      tolerations:\n")
	for _, k := range []string{"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"} {
		fmt.Fprintf(&tol, "        - {key: %s, operator: Exists, effect: NoExecute, tolerationSeconds: %d}\n", k, lossToleration)
	}
	return strings.ReplaceAll(w, at, at+tol.String())
}

// mnNodeLoss: a Deployment pair and two StatefulSet pairs ({ordinal} links) run on node 2 with
// verified traffic (node 1 cordoned meanwhile). Node 2 is lost: its kubelet, containerd, shims
// and every container process in its cgroup SIGKILLed. It goes NotReady; after lossToleration
// the pods are Terminating, and stay so (nothing on the node can end them): the Deployment's
// replacements are refused by the webhook (the link's only placed pods are terminating),
// the StatefulSets wait for their pods to be gone. The operator's out-of-service taint has them
// force-deleted, and every pair comes back together on node 1 with verified traffic. Node 2
// returns (containerd, kubelet) and the taint is removed: its agent comes back, the node keeps
// nothing of the pods that left (no port file, link mount, store or device-info entry), a pod
// holding every slot and pool unit of node 2 runs there, and a new link on node 2 passes
// verified traffic.
func (x *tier3) mnNodeLoss(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	lost, to := nodes[1], nodes[0]
	workloads := x.mnLossWorkloads(t)
	x.kubectl(ctx, t, "cordon", to.Name)
	x.kubectlIn(ctx, t, workloads, "apply", "-f", "-")
	t0 := time.Now()
	old := x.mnPairsOn(ctx, t, lost.Name, nil)
	x.logf("node loss: %d pairs running on %s with verified traffic %.1fs after apply", len(mnDrainPairs), lost.Name, time.Since(t0).Seconds())
	left, err := x.mnLeftovers(lost, false)
	if err != nil || len(left) == 0 {
		t.Fatalf("node %s shows no attachment of the running pairs (%v): the leftover check sees nothing", lost.Name, err)
	}
	slots := heldSlots(left)
	if dirty, err := x.mnDirtyInLedger(lost, slots); err != nil || len(slots) != 2*len(mnDrainPairs) || len(dirty) != len(slots) {
		t.Fatalf("the pairs' slots %v, of which %v handed out in %s's agent's ledger (%v): the ledger check sees nothing", slots, dirty, lost.Name, err)
	}
	x.kubectl(ctx, t, "uncordon", to.Name)

	t0 = time.Now()
	if err := x.c.StopNode(lost.Index); err != nil {
		t.Fatal(err)
	}
	x.logf("node loss: %s lost: kubelet, containerd, shims and its cgroup's processes killed (%.1fs)", lost.Name, time.Since(t0).Seconds())
	x.nodeNotReady(ctx, t, lost.Name)
	x.logf("node loss: %s NotReady %.1fs after the loss", lost.Name, time.Since(t0).Seconds())
	x.mnTerminating(ctx, t, old)
	x.logf("node loss: every pod of the pairs Terminating %.1fs after the loss", time.Since(t0).Seconds())
	x.mnLeavingRefused(ctx, t, lost.Name, t0)

	t1 := time.Now()
	x.kubectl(ctx, t, "taint", "node", lost.Name, outOfService)
	x.mnPairsOn(ctx, t, to.Name, old)
	x.logf("node loss: every pair back together on %s with verified traffic %.1fs after the out-of-service taint, %.1fs after the loss",
		to.Name, time.Since(t1).Seconds(), time.Since(t0).Seconds())

	t1 = time.Now()
	if err := x.c.StartNode(ctx, lost.Index); err != nil {
		t.Fatal(err)
	}
	x.kubectl(ctx, t, "taint", "node", lost.Name, strings.SplitN(outOfService, "=", 2)[0]+"-")
	x.logf("node loss: %s back and Ready %.1fs after its containerd and kubelet started; taint removed", lost.Name, time.Since(t1).Seconds())
	held, err := x.mnLeftovers(lost, false)
	if err != nil {
		t.Fatal(err)
	}
	x.logf("node loss: %s back holding what the pods that left held: %s", lost.Name, leftoverKinds(held))
	x.waitAgents(ctx, t, lost.Name, 1)
	x.logf("node loss: %s's agent Running and ready %.1fs after the node came back", lost.Name, time.Since(t1).Seconds())
	// The dead pods' sandboxes are removed (CNI DEL: memif-cni drops its records) by the
	// kubelet's container garbage collection, which runs once a minute; the agent scrubs their
	// slots once PodResources no longer lists them.
	x.mnNoLeftoversWithin(ctx, t, lost, false, 3*time.Minute)
	x.logf("node loss: nothing left on %s of the pods that left, %.1fs after the node came back", lost.Name, time.Since(t1).Seconds())
	var dirty []string
	if err := node.Poll(ctx, 2*time.Minute, "the pairs' slots scrubbed by "+lost.Name+"'s agent", func() (bool, error) {
		dirty, err = x.mnDirtyInLedger(lost, slots)
		return err == nil && len(dirty) == 0, err
	}); err != nil {
		t.Fatalf("%v: %v still handed out", err, dirty)
	}
	x.logf("node loss: %s's agent scrubbed the %d slots the pods that left held (%v), %.1fs after the node came back", lost.Name, len(slots), slots, time.Since(t1).Seconds())
	x.mnAllFree(ctx, t, lost.Name)
	x.mnLossNewLink(ctx, t, lost.Name)
	x.logf("node loss: a new link on %s passed verified traffic %.1fs after the node came back", lost.Name, time.Since(t1).Seconds())

	x.kubectlIn(ctx, t, workloads, "delete", "-f", "-", "--cascade=foreground", "--wait=true", "--timeout=2m")
	x.kubectl(ctx, t, "delete", "pods", "--all", "-n", "default", "--wait=true")
	for _, n := range nodes[:2] {
		x.mnNoLeftovers(ctx, t, n, false)
	}
}

// nodeNotReady waits until node nodeName's Ready condition is not True (the node lifecycle
// controller marks it Unknown when the kubelet stops reporting).
func (x *tier3) nodeNotReady(ctx context.Context, t *testing.T, nodeName string) {
	t.Helper()
	var last string
	if err := node.Poll(ctx, 3*time.Minute, "node "+nodeName+" NotReady", func() (bool, error) {
		n, err := x.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("%s: %s", c.Status, c.Message)
				return c.Status != corev1.ConditionTrue, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("%v: Ready %s", err, last)
	}
}

// mnTerminating waits until every pod of old is marked for deletion (its toleration of the
// unreachable node ran out) and checks that it is not gone: nothing on a lost node can end it.
func (x *tier3) mnTerminating(ctx context.Context, t *testing.T, old map[types.UID]bool) {
	t.Helper()
	var seen []string
	if err := node.Poll(ctx, 2*time.Minute, "the lost node's pods Terminating", func() (bool, error) {
		pods, err := x.cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		n := 0
		for _, p := range pods.Items {
			if old[p.UID] {
				seen = append(seen, fmt.Sprintf("%s deleting=%v", p.Name, p.DeletionTimestamp != nil))
				if p.DeletionTimestamp != nil {
					n++
				}
			}
		}
		if len(seen) < len(old) {
			return false, fmt.Errorf("only %d of the %d pods left: a pod of the lost node went before the out-of-service taint", len(seen), len(old))
		}
		return n == len(old), nil
	}); err != nil {
		t.Fatalf("%v: %s", err, strings.Join(seen, "; "))
	}
}

// mnLeavingRefused waits for the webhook's refusal of a Deployment pair's replacement (a
// ReplicaSet's FailedCreate naming a pod terminating on nodeName, since the loss), then checks
// that no pair has a live pod: nothing was placed while the link's pods were terminating.
func (x *tier3) mnLeavingRefused(ctx context.Context, t *testing.T, nodeName string, since time.Time) {
	t.Helper()
	want := "is terminating on node " + nodeName + " and no other pod of the link runs"
	var msg string
	if err := node.Poll(ctx, 2*time.Minute, "the webhook refusing mn-dep's replacements", func() (bool, error) {
		evs, err := x.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			when := e.LastTimestamp.Time
			if when.IsZero() {
				when = e.EventTime.Time
			}
			if e.InvolvedObject.Kind == "ReplicaSet" && strings.HasPrefix(e.InvolvedObject.Name, "mn-dep-") &&
				!when.Before(since.Truncate(time.Second)) && strings.Contains(e.Message, want) {
				msg = e.InvolvedObject.Name + ": " + e.Message
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
	x.logf("node loss: replacement refused: %s", msg)
	for _, p := range mnDrainPairs {
		for _, sel := range []string{p.rx, p.tx} {
			pods, err := x.cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range pods.Items {
				if q.DeletionTimestamp == nil {
					t.Errorf("link %s: pod %s live (%s on %q) while the link's pods terminate on the lost node", p.link, q.Name, q.Status.Phase, q.Spec.NodeName)
				}
			}
		}
	}
}

// mnAllFree checks that node nodeName offers all its slots and pool units again: a pod asking
// for every one runs there (the kubelet would refuse it while its device manager still counted
// a device as held by a pod that left).
func (x *tier3) mnAllFree(ctx context.Context, t *testing.T, nodeName string) {
	t.Helper()
	got := x.allocatable(ctx, t, nodeName, 32, 2)
	s, h := got[names.SocketResource], got["memifnet.io/hugepool"]
	fill := strings.Replace(mnFiller("mn-loss-fill", nodeName, int(s.Value())),
		fmt.Sprintf("%s: %d}", names.SocketResource, s.Value()), fmt.Sprintf("%s: %d, memifnet.io/hugepool: %d}", names.SocketResource, s.Value(), h.Value()), 1)
	x.kubectlIn(ctx, t, fill, "apply", "-f", "-")
	x.running(ctx, t, "mn-loss-fill")
	x.logf("node loss: a pod holding all %d slots and %d pool units of %s runs", s.Value(), h.Value(), nodeName)
	x.kubectl(ctx, t, "delete", "pod", "mn-loss-fill", "--wait=true")
}

// mnLossNewLink runs a new link on node nodeName to its verified end.
func (x *tier3) mnLossNewLink(ctx context.Context, t *testing.T, nodeName string) {
	t.Helper()
	x.kubectlIn(ctx, t, pinned(mnPod("mn-back-rx", "east", "east@mn-back", "--mode=rx", "--verify", "--size=1500", "--duration=4s", "--rx-mode=interrupt", "--connect-timeout=2m"), nodeName)+
		"---\n"+pinned(mnPod("mn-back-tx", "west", "west@mn-back", "--mode=tx", "--verify", "--size=1500", "--duration=2s", "--connect-timeout=2m"), nodeName),
		"apply", "-f", "-")
	for _, p := range []string{"mn-back-rx", "mn-back-tx"} {
		x.podSucceeded(ctx, t, "default", p, 3*time.Minute)
		x.verified(ctx, t, "default", p)
	}
}

// heldSlots is the slots of the port files among leftovers (mnLeftovers).
func heldSlots(left []string) []string {
	var out []string
	for _, l := range left {
		if p, ok := strings.CutPrefix(l, "file "); ok && filepath.Base(p) == names.PortFile {
			out = append(out, filepath.Base(filepath.Dir(p)))
		}
	}
	sort.Strings(out)
	return out
}

// leftoverKinds counts leftovers (mnLeftovers) by kind: port files, link mounts, link
// directories' files, store records, device-info files.
func leftoverKinds(left []string) string {
	kinds := map[string]int{}
	for _, l := range left {
		k := "other"
		switch {
		case strings.HasPrefix(l, "mount "):
			k = "link mounts"
		case strings.HasSuffix(l, "/"+names.PortFile):
			k = "port files"
		case strings.Contains(l, "/devinfo/"):
			k = "device-info files"
		case strings.Contains(l, "/"+names.StoreSubdir+"/"):
			k = "store files"
		case strings.Contains(l, "/"+names.LinksSubdir+"/"):
			k = "link directory files"
		}
		kinds[k]++
	}
	var parts []string
	for k, n := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// mnDirtyInLedger is which of slots node n's agent counts as handed out and not yet scrubbed:
// its ledger (docs/deviceplugin.md, "Scrubbing"), a journal of "a <nanos> <id>..." and
// "c <id>..." lines, read inside the node.
func (x *tier3) mnDirtyInLedger(n cluster.NodeSpec, slots []string) ([]string, error) {
	root, _, err := x.c.NodeView(n.Index)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(root, t3StateDir, "deviceplugin", strings.ReplaceAll(names.SocketResource, "/", "-")+".json"))
	if err != nil {
		return nil, err
	}
	dirty := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		switch f := strings.Fields(line); {
		case len(f) >= 2 && f[0] == "a":
			for _, id := range f[2:] {
				dirty[id] = true
			}
		case len(f) >= 1 && f[0] == "c":
			for _, id := range f[1:] {
				delete(dirty, id)
			}
		}
	}
	var out []string
	for _, s := range slots {
		if dirty[s] {
			out = append(out, s)
		}
	}
	return out, nil
}
