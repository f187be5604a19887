//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// snapshot reads the host state (for nodeAsBefore).
func (x *tier3) snapshot(t *testing.T) cluster.Snapshot {
	t.Helper()
	s, err := cluster.TakeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// nodeAsBefore waits (30 s at most: the agent cleans as it stops, HugePages_Free is the
// machine's) until the node is as the snapshot before the install had it: no mount and no file
// under the state dir, the CNI bin and conf dirs as they were (memif-cni's binaries and its
// conflist entry gone), and at least as many free hugepages. The state dir itself may stay,
// empty: it is the agent's hostPath volume, a mount point in its container, so the agent cannot
// remove it (the kubelet made it; docs/deviceplugin.md).
func (x *tier3) nodeAsBefore(ctx context.Context, t *testing.T, before cluster.Snapshot, what string) {
	t.Helper()
	var changed []string
	var after cluster.Snapshot
	err := node.Poll(ctx, 30*time.Second, "the node as before the install", func() (bool, error) {
		s, err := cluster.TakeSnapshot()
		if err != nil {
			return false, err
		}
		after = s
		changed = slices.DeleteFunc(before.ChangedUnder(after, t3StateDir, cluster.CNIBinDir, cluster.CNIConfDir),
			func(d string) bool { return d == "+path "+t3StateDir })
		return len(changed) == 0 && after.HugepagesFree >= before.HugepagesFree, nil
	})
	if err != nil {
		t.Fatalf("%s: %v: HugePages_Free %d (before the install %d); changed under %s, %s, %s:\n  %s", what, err,
			after.HugepagesFree, before.HugepagesFree, t3StateDir, cluster.CNIBinDir, cluster.CNIConfDir, strings.Join(changed, "\n  "))
	}
	x.logf("uninstall: %s the node is as before the install: no mount or file under %s, %s and %s as they were, HugePages_Free %d (before %d)",
		what, t3StateDir, cluster.CNIBinDir, cluster.CNIConfDir, after.HugepagesFree, before.HugepagesFree)
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
