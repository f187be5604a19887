//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// Tier 3 on k3s's node paths (cluster.K3s): containerd's CNI conf dir is
// /var/lib/rancher/k3s/agent/etc/cni/net.d, its bin dir /var/lib/rancher/k3s/data/cni, the
// kubelet's kubeconfig /var/lib/rancher/k3s/agent/kubelet.kubeconfig, and /etc/cni, /opt/cni and
// /etc/kubernetes are not there. memifnet installed as a k3s user would: the chained overlay with
// manifests/components/cni-paths/k3s through kubectl apply -k, then the Helm chart with
// cni.preset=k3s under Multus. Each passes a link with verified traffic and its uninstall leaves
// the k3s dirs as they were; nothing is written to kubeadm's paths. See docs/e2e.md.
func TestTier3K3sPaths(t *testing.T) {
	testutil.RequireRoot(t, "the cluster tier (mounts, network namespaces, cgroups, iptables)")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	x := upClusterWith(ctx, t, "/run/memifnet-e2e-k3s", 1, cluster.K3s)
	for _, st := range []struct {
		name string
		fn   func(context.Context, *testing.T)
	}{
		{"Chained", x.k3sChained},
		{"HelmMultus", x.k3sHelmMultus},
	} {
		if !t.Run(st.name, func(t *testing.T) { st.fn(ctx, t) }) {
			t.FailNow()
		}
	}
}

// k3sChained: `kubectl apply -k` of a kustomization listing overlays/chained and
// components/cni-paths/k3s: memif-cni and its helper land in k3s's bin dir, the sidecar chains
// memif-cni into the conflist in k3s's conf dir, a link pair passes verified traffic;
// `kubectl delete -k` leaves both dirs as they were, the conflist as it was.
func (x *tier3) k3sChained(ctx context.Context, t *testing.T) {
	p := x.c.Paths
	orig := readJSON(t, p.Conflist())
	x.installed = x.snapshot(t)
	dir := x.k3sKustomization(t, "manifests/overlays/chained")
	x.kubectl(ctx, t, "apply", "-k", dir)
	x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", t3DaemonSet, "--timeout=3m")
	x.webhookReady(ctx, t)
	var types []string
	if err := node.Poll(ctx, 60*time.Second, "memif-cni chained into "+p.Conflist(), func() (bool, error) {
		types = x.conflistTypes(t)
		return slices.Equal(types, []string{"bridge", "memif-cni"}), nil
	}); err != nil {
		t.Fatalf("%v: plugins %q", err, types)
	}
	for _, b := range []string{"memif-cni", names.PodInfoHelper} {
		if _, err := os.Stat(filepath.Join(p.CNIBinDir, b)); err != nil {
			t.Fatalf("the installer did not put %s in k3s's bin dir: %v", b, err)
		}
	}
	// The installer names the file it chains into (as its container sees k3s's conf dir).
	if log := x.kubectl(ctx, t, "-n", t3Namespace, "logs", t3DaemonSet, "-c", "install-cni"); !strings.Contains(log, `"file":"/host/etc/cni/net.d/`+filepath.Base(p.Conflist())+`"`) {
		t.Errorf("the installer's log does not name the conflist it chains into:\n%s", log)
	}
	x.kubeadmUntouched(t, "after the chained install")
	x.logf("chained: %s chains %q, memif-cni and %s in %s", p.Conflist(), types, names.PodInfoHelper, p.CNIBinDir)
	x.newPairPasses(ctx, t, "k3s", nil)
	x.noLeftovers(ctx, t, "after the chained pair")
	x.deleteK(ctx, t, dir)
	x.namespaceGone(ctx, t)
	x.nodeAsBefore(ctx, t, x.installed, "after kubectl delete -k (chained, cni-paths/k3s):")
	if now := readJSON(t, p.Conflist()); !reflect.DeepEqual(now, orig) {
		t.Errorf("after the uninstall %s is %v, before the install %v", p.Conflist(), now, orig)
	}
	x.kubeadmUntouched(t, "after the chained uninstall")
}

// k3sHelmMultus: Multus thin on k3s's paths (its configuration first in k3s's conf dir, its
// binary in k3s's bin dir), `helm install --set cni.mode=multus,cni.preset=k3s`: the chart's
// NetworkAttachmentDefinition names k3s's kubelet kubeconfig, with which memif-cni reads both
// pods from the API server (audit log), and they pass verified traffic; `helm uninstall` leaves
// the node as before the install.
func (x *tier3) k3sHelmMultus(ctx context.Context, t *testing.T) {
	helm, err := cluster.Helm(ctx, x.repo, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	helmRun := func(args ...string) {
		t.Helper()
		out, err := x.c.HelmCmd(ctx, helm, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		x.logf("helm: %s", firstLine(string(out)))
	}
	if err := x.c.InstallMultus(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := x.c.UninstallMultus(context.Background()); err != nil {
			t.Error(err)
		}
	})
	before := x.snapshot(t)
	helmRun("install", "memifnet", "charts/memifnet", "--set", "cni.mode=multus", "--set", "cni.preset=k3s")
	x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", t3DaemonSet, "--timeout=3m")
	x.webhookReady(ctx, t)
	x.logf("helm: memif-cni reads pods with %s", x.nadKubeconfig(ctx, t))
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
		if status := got.Annotations["k8s.v1.cni.cncf.io/network-status"]; !strings.Contains(status, `"memifnet-system/memif"`) {
			t.Errorf("%s: Multus network-status %q names no memifnet-system/memif attachment", p, status)
		}
		if !x.audited(t, "system:node:"+cluster.NodeName, names.PodInfoHelper, "get", "pods", "default", p) {
			t.Errorf("no successful get of pod %s by %s as system:node:%s in %s", p, names.PodInfoHelper, cluster.NodeName, x.c.AuditLog())
		}
	}
	x.kubeadmUntouched(t, "with the chart under Multus")
	x.logf("helm: both pods attached through Multus, memif-cni read them with %s", x.c.Paths.KubeletKubeconfig)
	x.kubectl(ctx, t, "delete", "-f", "manifests/examples/multus-pod.yaml", "--wait=true")
	x.noLeftovers(ctx, t, "after the Multus pods")
	helmRun("uninstall", "memifnet")
	x.namespaceGone(ctx, t)
	x.nodeAsBefore(ctx, t, before, "after helm uninstall (cni.preset=k3s, Multus):")
}

// k3sKustomization writes a kustomization as a k3s user would (overlay plus
// components/cni-paths/k3s, from their checkout) under the cluster's directory and returns it.
func (x *tier3) k3sKustomization(t *testing.T, overlay string) string {
	t.Helper()
	dir := x.c.Path("kustomize-k3s")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// kustomize takes no absolute roots: reach the checkout relatively.
	rel, err := filepath.Rel(dir, x.repo)
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [" + filepath.Join(rel, overlay) +
		"]\ncomponents: [" + filepath.Join(rel, "manifests/components/cni-paths/k3s") + "]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// kubeadmUntouched fails the test unless kubeadm's CNI dirs and kubeconfig dir (and the
// directories above them) are as before the cluster came up: a cluster on other paths must
// write nothing there.
func (x *tier3) kubeadmUntouched(t *testing.T, when string) {
	t.Helper()
	if d := x.up.ChangedUnder(x.snapshot(t), "/etc/cni", "/opt/cni", "/etc/kubernetes"); len(d) != 0 {
		x.errorf(t, "%s, kubeadm's paths changed on a cluster with k3s's: %q", when, d)
	}
}

// readJSON decodes the JSON file path.
func readJSON(t *testing.T, path string) any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}
