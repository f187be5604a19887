//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
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

// snapshot reads the host state (for nodeAsBefore).
func (x *tier3) snapshot(t *testing.T) cluster.Snapshot {
	t.Helper()
	s, err := cluster.TakeSnapshot(x.c.Paths)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// nodeAsBefore waits (90 s at most: the agent cleans as it stops, the kubelet deletes a DRA
// driver's ResourceSlices 30 s after it unregisters, HugePages_Free is the machine's) until the
// node is as the snapshot before the install had it: no mount and no file under the state dir
// (nor the state dir itself, when it was not there), the CNI bin and conf dirs as they were
// (memif-cni's binaries and its conflist entry gone), no memifnet file left in the kubelet's
// device-plugins, plugins and plugins_registry, the CDI spec dirs and the device-info dirs, no
// ResourceSlice of memifnet.io for the node, and at least as many free hugepages.
func (x *tier3) nodeAsBefore(ctx context.Context, t *testing.T, before cluster.Snapshot, what string) {
	t.Helper()
	var changed []string
	var after cluster.Snapshot
	nSlices := 0
	err := node.Poll(ctx, 90*time.Second, "the node as before the install", func() (bool, error) {
		s, err := cluster.TakeSnapshot(x.c.Paths)
		if err != nil {
			return false, err
		}
		after = s
		// What the state dir held before the install (a reused machine's earlier run) may be
		// gone: the uninstall removes memifnet's state. Nothing may be added.
		changed = slices.DeleteFunc(before.ChangedUnder(after, append([]string{t3StateDir, x.c.Paths.CNIBinDir, x.c.Paths.CNIConfDir}, cluster.MemifnetFiles...)...),
			func(d string) bool { return d == "-path "+t3StateDir || strings.HasPrefix(d, "-path "+t3StateDir+"/") })
		rs, err := x.cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			FieldSelector: "spec.nodeName=" + cluster.NodeName + ",spec.driver=" + names.DRADriver})
		if err != nil {
			return false, err
		}
		nSlices = len(rs.Items)
		return len(changed) == 0 && nSlices == 0 && after.HugepagesFree >= before.HugepagesFree, nil
	})
	if err != nil {
		x.errorf(t, "%s: %v: HugePages_Free %d (before the install %d); %d ResourceSlices of %s; changed:\n  %s", what, err,
			after.HugepagesFree, before.HugepagesFree, nSlices, names.DRADriver, strings.Join(changed, "\n  "))
		t.FailNow()
	}
	x.logf("uninstall: %s the node is as before the install: no mount or file under %s (the dir: %s before the install, %s now), %s and %s as they were, no memifnet file in %q, no ResourceSlice of %s, HugePages_Free %d (before %d)",
		what, t3StateDir, presence(before, t3StateDir), presence(after, t3StateDir), x.c.Paths.CNIBinDir, x.c.Paths.CNIConfDir, cluster.MemifnetFiles, names.DRADriver, after.HugepagesFree, before.HugepagesFree)
}

// presence says whether the snapshot has path.
func presence(s cluster.Snapshot, path string) string {
	if slices.Contains(s.Paths, path) {
		return "present"
	}
	return "absent"
}

// ownDaemonSetRBAC: the node agent's one right outside the DRA overlay is reading its own
// DaemonSet in its namespace (to tell an uninstall from a restart).
func (x *tier3) ownDaemonSetRBAC(ctx context.Context, t *testing.T) {
	as := "--as=system:serviceaccount:" + t3Namespace + ":memifnet"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"watch", "daemonsets/memifnet-node"}, "yes"},
		{[]string{"get", "daemonsets/memifnet-node"}, "yes"},
		{[]string{"delete", "daemonsets/memifnet-node"}, "no"},
		{[]string{"get", "daemonsets/other"}, "no"},
		{[]string{"get", "pods"}, "no"},
	} {
		out, _ := x.c.KubectlCmd(ctx, append([]string{"auth", "can-i", "-n", t3Namespace, as}, c.args...)...).CombinedOutput()
		if got := strings.TrimSpace(string(out)); got != c.want {
			t.Errorf("can memifnet-system/memifnet %s in %s? %q, want %q", strings.Join(c.args, " "), t3Namespace, got, c.want)
		}
	}
	x.logf("rbac: in %s memifnet-system/memifnet may only get, list and watch daemonsets/memifnet-node", t3Namespace)
}

// uninstall: `kubectl delete -k manifests/` while a link pair passes traffic takes memif-cni out
// of the node's conflist and cleans the node under the pair, which keeps passing traffic on its
// slots and pool units; when the pair goes only memif-cni's binaries and its device-info files
// of the pair are left (for their DELs; docs/deviceplugin.md says so). Then the DRA overlay,
// installed and deleted with no memif pod on the node, leaves the node as before the install.
func (x *tier3) uninstall(ctx context.Context, t *testing.T) {
	x.noLeftovers(ctx, t, "before the uninstall")
	x.startVerifiedPair(ctx, t, "uninst")
	x.deleteK(ctx, t, "manifests/")
	if types := x.conflistTypes(t); !slices.Equal(types, []string{"bridge"}) {
		x.errorf(t, "after kubectl delete -k manifests/ the conflist chains %q, want only bridge", types)
		t.FailNow()
	}
	x.logf("uninstall: memif-cni is out of %s", x.c.Paths.Conflist())
	x.trafficFlows(ctx, t, "uninst-rx", "after kubectl delete -k manifests/ (the pair keeps its slots and units)")
	if ms, err := testutil.Mounts(t3StateDir); err != nil || len(ms) != 0 {
		x.errorf(t, "after kubectl delete -k manifests/ the node still has mounts under %s: %q %v", t3StateDir, ms, err)
	}
	x.kubectl(ctx, t, "delete", "pod", "uninst-rx", "uninst-tx", "--wait=true")
	// What the pair's DELs need stays: memif-cni's binaries, exactly these, which docs/install.md
	// says to remove by hand; the DRA overlay's uninstall below removes them itself. The pair's
	// device-info files went at the uninstall (memif-cni, out of the conflist, did not run at
	// their DELs).
	left := x.installed.ChangedUnder(x.snapshot(t), x.c.Paths.CNIBinDir)
	want := []string{"+path " + x.c.Paths.CNIBinDir + "/memif-cni", "+path " + x.c.Paths.CNIBinDir + "/" + names.PodInfoHelper}
	if slices.Sort(left); !slices.Equal(left, want) {
		x.errorf(t, "after the pair went, changed under %s: %q, want %q", x.c.Paths.CNIBinDir, left, want)
	}
	if devinfo, _ := filepath.Glob(filepath.Join(t3DevInfoDir, "*", "memifnet*")); len(devinfo) != 0 {
		x.errorf(t, "after the pair went, device-info files are left: %q", devinfo)
	}
	x.logf("uninstall: the pair passed traffic to the end; after it went, only memif-cni's binaries were left")

	x.kubectl(ctx, t, "apply", "-k", "manifests/overlays/dra/")
	x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", t3DaemonSet, "--timeout=3m")
	x.deleteK(ctx, t, "manifests/overlays/dra/")
	x.nodeAsBefore(ctx, t, x.installed, "after kubectl delete -k manifests/overlays/dra/")
}

// errorf fails the test with a message that the test's last line says again (tier3.failure).
func (x *tier3) errorf(t *testing.T, format string, a ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, a...)
	x.failure += msg + "\n"
	t.Error(msg)
}

// deleteK runs `kubectl delete -k dir` and waits until the node agent's pod is gone.
func (x *tier3) deleteK(ctx context.Context, t *testing.T, dir string) {
	t.Helper()
	x.kubectl(ctx, t, "delete", "-k", dir, "--wait=true")
	if err := node.Poll(ctx, 90*time.Second, "node agent gone", func() (bool, error) {
		pods, err := x.cs.CoreV1().Pods(t3Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0, nil
	}); err != nil {
		t.Fatal(err)
	}
}
