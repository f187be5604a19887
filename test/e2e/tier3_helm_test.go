//go:build e2e

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// mnHelm: memifnet through its Helm chart (charts/memifnet, the helm CLI of hack/build-tools.sh)
// on the nodes as `kubectl delete -k manifests/` left them. `helm install` brings the agents back
// with their slots and units and a link passes verified traffic; `helm upgrade` with a value that
// changes the agent's pod template rolls the agents while a link on node 1 keeps passing verified
// traffic, and a new link after it does too; `helm uninstall` leaves every node as `kubectl
// delete -k` did (each node's own view compared; node 1's with the host snapshot).
func (x *tier3) mnHelm(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	helm, err := cluster.Helm(ctx, x.repo, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := x.c.HelmCmd(ctx, helm, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// After the Ops step memifnet is uninstalled already; run right after Install, it goes here.
	if _, err := x.cs.CoreV1().Namespaces().Get(ctx, t3Namespace, metav1.GetOptions{}); err == nil {
		x.deleteK(ctx, t, "manifests/")
		x.namespaceGone(ctx, t)
	}
	// No pod's attachment is left; the agent's own state may leave a trace (a memif-cni DEL of a
	// memifnet pod racing the uninstall makes state/attachments again), which the snapshot keeps.
	deleted := map[int]cluster.Snapshot{}
	for _, n := range nodes {
		x.mnNoLeftovers(ctx, t, n, false)
		s, err := x.c.NodeSnapshot(n.Index)
		if err != nil {
			t.Fatal(err)
		}
		deleted[n.Index] = s
	}
	x.logf("helm: memifnet uninstalled (kubectl delete -k manifests/); every node's snapshot taken")

	x.logf("helm: %s", firstLine(run("install", "memifnet", "charts/memifnet")))
	x.mnHelmReady(ctx, t, nodes)
	x.mnHelmLink(ctx, t, "hi")

	x.mnHelmPinnedPair(ctx, t, nodes[0].Name, "hu")
	_, uid := x.mnAgent(ctx, t, nodes[0].Name)
	x.logf("helm: %s", firstLine(run("upgrade", "memifnet", "charts/memifnet", "--set", "agent.resources.limits.memory=160Mi")))
	x.mnHelmReady(ctx, t, nodes)
	name2, uid2 := x.mnAgent(ctx, t, nodes[0].Name)
	if uid2 == uid {
		t.Fatalf("helm upgrade did not roll node 1's agent (%s)", name2)
	}
	x.trafficFlows(ctx, t, "hu-rx", "after helm upgrade rolled node 1's agent to "+name2)
	x.mnHelmLink(ctx, t, "hn")
	x.kubectl(ctx, t, "delete", "pods", "--all", "-n", "default", "--wait=true")

	x.logf("helm: %s", firstLine(run("uninstall", "memifnet")))
	if err := node.Poll(ctx, 90*time.Second, "memifnet's pods gone", func() (bool, error) {
		pods, err := x.cs.CoreV1().Pods(t3Namespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	}); err != nil {
		t.Fatal(err)
	}
	x.namespaceGone(ctx, t)
	x.nodeAsBefore(ctx, t, deleted[1], "after helm uninstall, as after kubectl delete -k manifests/:")
	for _, n := range nodes[1:] {
		x.mnNodeAsBefore(ctx, t, n, deleted[n.Index], "after helm uninstall, as after kubectl delete -k manifests/:")
	}
	x.logf("helm: helm uninstall left every node as kubectl delete -k does")
}

// mnHelmReady waits until both agent DaemonSets and the webhook are rolled out and both
// memifnet nodes offer their profiles' slots and units.
func (x *tier3) mnHelmReady(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	t.Helper()
	for _, ds := range []string{t3DaemonSet, t3DaemonSet + "-small"} {
		x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", ds, "--timeout=3m")
	}
	x.webhookReady(ctx, t)
	x.allocatable(ctx, t, nodes[0].Name, 64, 4)
	x.allocatable(ctx, t, nodes[1].Name, 32, 2)
}

// mnHelmLink runs one link (annotation-only pods, placed by the webhook) to its verified end.
func (x *tier3) mnHelmLink(ctx context.Context, t *testing.T, link string) {
	t.Helper()
	x.kubectlIn(ctx, t, mnPod(link+"-rx", "east", "east@"+link, "--mode=rx", "--verify", "--size=1500", "--duration=4s", "--rx-mode=interrupt", "--connect-timeout=2m")+
		"---\n"+mnPod(link+"-tx", "west", "west@"+link, "--mode=tx", "--verify", "--size=1500", "--duration=2s", "--connect-timeout=2m"),
		"apply", "-f", "-")
	for _, p := range []string{link + "-rx", link + "-tx"} {
		x.podSucceeded(ctx, t, "default", p, 3*time.Minute)
		x.verified(ctx, t, "default", p)
	}
}

// mnHelmPinnedPair starts a link pair on node nodeName that passes verified traffic until
// deleted.
func (x *tier3) mnHelmPinnedPair(ctx context.Context, t *testing.T, nodeName, name string) {
	t.Helper()
	rx, tx := name+"-rx", name+"-tx"
	x.kubectlIn(ctx, t, pinned(mnPod(rx, "east", "east@"+name, "--mode=rx", "--verify", "--size=1500", "--duration=0", "--connect-timeout=2m"), nodeName)+
		"---\n"+pinned(mnPod(tx, "west", "west@"+name, "--mode=tx", "--verify", "--size=1500", "--duration=0", "--connect-timeout=2m"), nodeName),
		"apply", "-f", "-")
	x.receiving(ctx, t, rx)
}

// mnAgent is the name and UID of the running agent pod on node nodeName.
func (x *tier3) mnAgent(ctx context.Context, t *testing.T, nodeName string) (string, string) {
	t.Helper()
	x.waitAgents(ctx, t, nodeName, 1)
	pods, err := x.cs.CoreV1().Pods(t3Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=memifnet-node", FieldSelector: "spec.nodeName=" + nodeName})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("agent pods on %s: %v, %v", nodeName, pods, err)
	}
	return pods.Items[0].Name, string(pods.Items[0].UID)
}

// namespaceGone waits until memifnet's namespace is deleted (not just terminating).
func (x *tier3) namespaceGone(ctx context.Context, t *testing.T) {
	t.Helper()
	if err := node.Poll(ctx, 2*time.Minute, "namespace "+t3Namespace+" gone", func() (bool, error) {
		_, err := x.cs.CoreV1().Namespaces().Get(ctx, t3Namespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatal(err)
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
