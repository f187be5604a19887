package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/testutil"
)

// Cluster down detaches memifnet's slot, link and pool mounts in a state dir that stays, and
// nothing else mounted there.
func TestUnmountAgentMounts(t *testing.T) {
	testutil.RequireRoot(t, "mounts tmpfs")
	state := t.TempDir()
	t.Cleanup(func() { _ = testutil.UnmountAll(state) })
	mount := func(rel, source string) {
		t.Helper()
		p := filepath.Join(state, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(source, p, "tmpfs", 0, "size=64k"); err != nil {
			t.Fatal(err)
		}
	}
	mount("sockets/slot-000", "memifnet-slot")
	mount("sockets/slot-000/link", "memifnet-link") // stands in for memif-cni's bind
	mount("links/default/l1", "memifnet-link")
	mount("other", "someone-else")
	if err := unmountAgentMounts(state); err != nil {
		t.Fatal(err)
	}
	if got := testutil.MountsUnder(t, state); !slices.Equal(got, []string{filepath.Join(state, "other")}) {
		t.Errorf("mounts left: %q, want only the one that is not memifnet's", got)
	}
}
