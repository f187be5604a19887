//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// thickNS is the application namespace of the Multus thick test: its pods name a
// NetworkAttachmentDefinition of their own namespace.
const thickNS = "memif-apps"

// Tier 3 with Multus 4.2.2 as its default install runs it: the thick plugin (multus-daemon as a
// DaemonSet running every pod's CNI chain chrooted into the host, multus-shim as the node's CNI
// plugin) with namespaceIsolation on. memifnet installed with `kubectl apply -k
// manifests/overlays/multus`, its NetworkAttachmentDefinition copied into the application's
// namespace (docs/install.md, "Multus"): two pods linked through it pass verified traffic; a pod
// naming memifnet-system/memif from another namespace is refused by Multus. The daemon mounts
// memifnet's state dir Bidirectional (docs/install.md, "Multus thick"): memif-cni's link mounts,
// made inside the daemon's mount namespace, must reach the pods. See docs/e2e.md.
func TestTier3MultusThick(t *testing.T) {
	testutil.RequireRoot(t, "the cluster tier (mounts, network namespaces, cgroups, iptables)")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	x := upCluster(ctx, t, "/run/memifnet-e2e-thick", 1)
	c := x.c
	// Before the cluster goes down: the pods attached through the daemon go while it still
	// runs their DEL.
	t.Cleanup(func() {
		ctx := context.Background()
		if t.Failed() { // before the namespace and the daemon go
			for _, args := range [][]string{{"get", "pods", "-A", "-o", "wide"}, {"get", "events", "-n", thickNS},
				{"describe", "pods", "-n", thickNS}, {"logs", "-n", "kube-system", "ds/multus-thick", "--tail=60"}} {
				out, _ := c.KubectlCmd(ctx, args...).CombinedOutput()
				t.Logf("--- kubectl %s:\n%s", strings.Join(args, " "), out)
			}
		}
		if out, err := c.KubectlCmd(ctx, "delete", "namespace", thickNS, "--ignore-not-found", "--wait=true").CombinedOutput(); err != nil {
			t.Errorf("deleting namespace %s: %v\n%s", thickNS, err, out)
		}
		if err := c.UninstallMultusThick(ctx); err != nil {
			t.Error(err)
		}
	})
	for _, st := range []struct {
		name string
		fn   func(context.Context, *testing.T)
	}{
		{"Install", x.thickInstall},
		{"Stock", x.thickStock},
		{"Link", x.thickLink},
		{"Isolation", x.thickIsolation},
	} {
		if !t.Run(st.name, func(t *testing.T) { st.fn(ctx, t) }) {
			t.FailNow()
		}
	}
}

// thickInstall: the multus overlay rolls out; the Multus thick daemon rolls out and writes its
// configuration in front of the node's primary network; the overlay's NetworkAttachmentDefinition is
// copied into the application namespace.
func (x *tier3) thickInstall(ctx context.Context, t *testing.T) {
	if err := x.c.InstallNADCRD(ctx); err != nil {
		t.Fatal(err)
	}
	x.kubectl(ctx, t, "apply", "-k", "manifests/overlays/multus/")
	x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", t3DaemonSet, "--timeout=3m")
	x.webhookReady(ctx, t)
	if err := x.c.InstallMultusThick(ctx, cluster.ThickOptions{NamespaceIsolation: true}); err != nil {
		t.Fatal(err)
	}
	x.logf("install: Multus thick daemon running as Multus ships it, multus-shim the node's CNI plugin (namespaceIsolation on)")
	x.kubectl(ctx, t, "create", "namespace", thickNS)
	nad, err := os.ReadFile(filepath.Join(x.repo, "manifests/overlays/multus/network-attachment-definition.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	x.kubectlIn(ctx, t, strings.Replace(string(nad), "namespace: "+t3Namespace, "namespace: "+thickNS, 1), "apply", "-f", "-")
	x.logf("install: memifnet multus overlay rolled out; namespace %s with the overlay's NetworkAttachmentDefinition", thickNS)
}

// thickStock: with the daemon as Multus ships it (the host's root seen HostToContainer), the
// chain runs in a mount namespace whose mounts never reach the host: memif-cni refuses the link
// port with code 5 naming the fix, instead of mounting a link no pod sees. Then the daemon is
// reconfigured with memifnet's state dir mounted Bidirectional (docs/install.md).
func (x *tier3) thickStock(ctx context.Context, t *testing.T) {
	x.kubectlIn(ctx, t, thickPods(t, x.repo, "memif"), "apply", "-n", thickNS, "-f", "-")
	msg := x.sandboxRefused(ctx, t, "memif-multus-rx", "link mounts would not reach the pod")
	if !strings.Contains(msg, "is a slave mount that is not shared") || !strings.Contains(msg, "mountPropagation: Bidirectional") {
		t.Errorf("the refusal does not say why and what to do: %s", msg)
	}
	x.logf("stock: memif-cni inside the stock daemon refuses the link port: %s", msg)
	x.kubectl(ctx, t, "delete", "pods", "--all", "-n", thickNS, "--wait=true")
	x.noLeftovers(ctx, t, "after the refused pods")
	if err := x.c.ConfigureMultusThick(ctx, cluster.ThickOptions{StateBidirectional: true, NamespaceIsolation: true}); err != nil {
		t.Fatal(err)
	}
	x.logf("stock: the daemon rolled out again with %s mounted Bidirectional", t3StateDir)
}

// sandboxRefused waits for a FailedCreatePodSandBox event of pod (namespace thickNS) whose
// message holds want, and returns the message.
func (x *tier3) sandboxRefused(ctx context.Context, t *testing.T, pod, want string) string {
	t.Helper()
	var msgs []string
	var found string
	if err := node.Poll(ctx, 2*time.Minute, "FailedCreatePodSandBox of "+pod+" naming "+want, func() (bool, error) {
		evs, err := x.cs.CoreV1().Events(thickNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return false, err
		}
		msgs = msgs[:0]
		for _, e := range evs.Items {
			msgs = append(msgs, e.Reason+": "+e.Message)
			if e.Reason == "FailedCreatePodSandBox" && strings.Contains(e.Message, want) {
				found = e.Message
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("%v; events of the pod:\n  %s", err, strings.Join(msgs, "\n  "))
	}
	p, err := x.cs.CoreV1().Pods(thickNS).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != "Pending" {
		t.Errorf("pod %s, refused at its sandbox, is %s, want Pending", pod, p.Status.Phase)
	}
	return found
}

// thickLink: manifests/examples/multus-pod.yaml in the application namespace, naming the
// NetworkAttachmentDefinition there: both pods attach through
// the Multus daemon and pass verified traffic, and the node keeps nothing after they go.
func (x *tier3) thickLink(ctx context.Context, t *testing.T) {
	x.kubectlIn(ctx, t, thickPods(t, x.repo, "memif"), "apply", "-n", thickNS, "-f", "-")
	pods := []string{"memif-multus-tx", "memif-multus-rx"}
	for _, p := range pods {
		x.podSucceeded(ctx, t, thickNS, p, 3*time.Minute)
	}
	x.verified(ctx, t, thickNS, "memif-multus-rx")
	for _, p := range pods {
		got, err := x.cs.CoreV1().Pods(thickNS).Get(ctx, p, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if status := got.Annotations["k8s.v1.cni.cncf.io/network-status"]; !strings.Contains(status, `"`+thickNS+`/memif"`) {
			t.Errorf("%s: Multus network-status %q names no %s/memif attachment", p, status, thickNS)
		}
	}
	x.logf("link: both pods attached %s/memif through the Multus thick daemon, traffic verified", thickNS)
	x.kubectl(ctx, t, "delete", "pods", "--all", "-n", thickNS, "--wait=true")
	x.noLeftovers(ctx, t, "after the Multus thick pods")
}

// thickIsolation: with namespaceIsolation on, Multus refuses a pod that names the
// NetworkAttachmentDefinition in memifnet-system from another namespace: its sandbox is never
// created, and the event says why.
func (x *tier3) thickIsolation(ctx context.Context, t *testing.T) {
	y := thickPods(t, x.repo, t3Namespace+"/memif")
	y = y[strings.Index(y, "---\n")+4:] // the client pod only
	x.kubectlIn(ctx, t, y, "apply", "-n", thickNS, "-f", "-")
	const want = "namespace isolation enabled, annotation violates permission"
	x.sandboxRefused(ctx, t, "memif-multus-tx", want)
	x.logf("isolation: %s/memif-multus-tx naming %s/memif is refused by Multus (%s)", thickNS, t3Namespace, want)
	x.kubectl(ctx, t, "delete", "pods", "--all", "-n", thickNS, "--wait=true")
	x.noLeftovers(ctx, t, "after the refused pod")
}

// thickPods is manifests/examples/multus-pod.yaml with both pods naming network.
func thickPods(t *testing.T, repo, network string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "manifests/examples/multus-pod.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	y := strings.ReplaceAll(string(b), "k8s.v1.cni.cncf.io/networks: memifnet-system/memif", "k8s.v1.cni.cncf.io/networks: "+network)
	if strings.Count(y, "networks: "+network) != 2 {
		t.Fatalf("manifests/examples/multus-pod.yaml: want two pods naming memifnet-system/memif")
	}
	return y
}
