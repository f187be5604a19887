package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/testutil"
)

// TestAddFromAnotherMountNamespace runs memif-cni as the Multus thick daemon does: in a mount
// namespace of its own (unshare -m), where the node's state dir is a shared mount (the node
// agent's Bidirectional mount). Where that namespace is a slave of the node's (Multus's own
// DaemonSet: the host root mounted HostToContainer), a link mounted there would never reach the
// pod: ADD must fail with code 5 and say so (before the fix ADD succeeded and the node saw no
// link in the slot). Where it keeps the state dir shared (the daemon mounts it Bidirectional,
// docs/install.md), ADD succeeds and the link's mount is in the slot as the node sees it.
func TestAddFromAnotherMountNamespace(t *testing.T) {
	for _, tc := range []struct {
		propagation string
		wantErr     bool
	}{{"slave", true}, {"unchanged", false}} {
		t.Run(tc.propagation, func(t *testing.T) {
			n := newNode(t, 0)
			// The node's state dir on a shared mount, as the node agent's Bidirectional mount
			// leaves it (the temp dir bound onto itself: the node's own / may be private).
			if err := unix.Mount(n.root, n.root, "", unix.MS_BIND, ""); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = unix.Unmount(n.root, unix.MNT_DETACH) })
			if err := unix.Mount("", n.root, "", unix.MS_SHARED, ""); err != nil {
				t.Fatal(err)
			}
			n.mountSlot("slot-000")
			n.cni = newCNI([]string{daemonNamespace(t, tc.propagation), pluginDir(t)}, filepath.Join(n.root, "cache"))
			a := n.newPod(`[{"name":"east","link":"l","role":"server"}]`, "slot-000")
			_, err := n.add(a)
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("ADD from a namespace that shares the state dir: %v", err)
				}
				if !linkMountedInSlot(t, n.slotDir("slot-000")) {
					t.Fatal("ADD succeeded but the node sees no link mount in the slot")
				}
				n.mustDel(a)
				n.assertClean()
				return
			}
			if err == nil {
				t.Fatalf("ADD from a slave mount namespace succeeded; the node sees a link mount in the slot: %v",
					linkMountedInSlot(t, n.slotDir("slot-000")))
			}
			e := cniError(t, err)
			if e.Code != 5 || !strings.Contains(e.Msg, "link mounts would not reach the pod") ||
				!strings.Contains(e.Details, "mountPropagation: Bidirectional") {
				t.Fatalf("ADD error %d %q (%s), want code 5 naming the fix", e.Code, e.Msg, e.Details)
			}
			n.assertClean()
		})
	}
}

// daemonNamespace starts a process in a mount namespace of its own (unshare -m
// --propagation=propagation), as a daemon running CNI plugins holds one, and returns a
// directory holding a memif-cni that runs the real one inside that namespace (nsenter).
func daemonNamespace(t *testing.T, propagation string) string {
	t.Helper()
	for _, tool := range []string{"unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s (util-linux): %v", tool, err)
		}
	}
	holder := exec.Command("unshare", "-m", "--propagation="+propagation, "sleep", "600")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	own, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(holder.Process.Pid)
	testutil.Eventually(t, 10*time.Second, "the holder's own mount namespace", func() bool {
		ns, err := os.Readlink("/proc/" + pid + "/ns/mnt")
		return err == nil && ns != own
	})
	dir := t.TempDir()
	script := "#!/bin/sh\nexec nsenter -t " + pid + " -m " + filepath.Join(pluginDir(t), "memif-cni") + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "memif-cni"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// linkMountedInSlot reports whether this process's mount namespace has a mount on <slot>/link.
func linkMountedInSlot(t *testing.T, slot string) bool {
	t.Helper()
	ms, err := safefs.ReadMountinfo()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Point == filepath.Join(slot, names.LinkSubdir) {
			return true
		}
	}
	return false
}
