package cluster

import (
	"slices"
	"strings"
	"testing"
)

// A node's view of its state dir: its own mounts below it count, node 1's (propagated into the
// node's namespace beneath the node's /var/lib bind) do not; on the machine every mount below
// it counts.
func TestVisibleUnder(t *testing.T) {
	node := []MountEntry{
		{ID: 1, Parent: 0, Point: "/"},
		{ID: 2, Parent: 1, Point: "/var/lib"},                               // the node's own /var/lib
		{ID: 3, Parent: 1, Point: "/var/lib/memifnet/pools/node1-pool"},     // node 1's, hidden
		{ID: 4, Parent: 2, Point: "/var/lib/memifnet/pools/node2-pool"},     // the node's
		{ID: 5, Parent: 4, Point: "/var/lib/memifnet/pools/node2-pool/sub"}, // below the node's
		{ID: 6, Parent: 2, Point: "/var/lib/kubelet/pods/x"},                // not below the dir
	}
	points := func(ms []MountEntry) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Point)
		}
		return out
	}
	if got, want := points(VisibleUnder(node, "/var/lib/memifnet")), []string{"/var/lib/memifnet/pools/node2-pool", "/var/lib/memifnet/pools/node2-pool/sub"}; !slices.Equal(got, want) {
		t.Errorf("node 2's view: %q, want %q", got, want)
	}
	machine := []MountEntry{{ID: 1, Parent: 0, Point: "/"}, {ID: 3, Parent: 1, Point: "/var/lib/memifnet/pools/node1-pool"}}
	if got := points(VisibleUnder(machine, "/var/lib/memifnet")); !slices.Equal(got, []string{"/var/lib/memifnet/pools/node1-pool"}) {
		t.Errorf("the machine's view: %q", got)
	}
	// A bind on the dir itself covers it: what node 1 has beneath that bind is hidden.
	bound := append(node[:1:1], MountEntry{ID: 7, Parent: 1, Point: "/var/lib/memifnet"},
		MountEntry{ID: 8, Parent: 1, Point: "/var/lib/memifnet/a"}, MountEntry{ID: 9, Parent: 7, Point: "/var/lib/memifnet/b"})
	if got := points(VisibleUnder(bound, "/var/lib/memifnet")); !slices.Equal(got, []string{"/var/lib/memifnet/b"}) {
		t.Errorf("a bind on the dir: %q", got)
	}
}

// A node's state dir is a plain directory in its own /var/lib, not a mount point: an uninstall
// removes it as on a real node, and node 1's removing the machine's cannot take it away.
func TestNodeStateDirNotAMountPoint(t *testing.T) {
	c := New("/repo", "/run/b", Inputs{}, nil)
	s := c.holderScript(Layout(3)[1])
	if !strings.Contains(s, `mount --bind "/run/b/nodes/2/root/var/lib" "/var/lib"`) {
		t.Errorf("node 2 does not bind its own /var/lib:\n%s", s)
	}
	if strings.Contains(s, `"/var/lib/memifnet"`) {
		t.Errorf("node 2 mounts something on /var/lib/memifnet:\n%s", s)
	}
}
