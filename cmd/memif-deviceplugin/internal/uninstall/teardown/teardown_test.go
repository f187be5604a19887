package teardown

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/internal/tmpfs"
)

// mountSlot mounts a tmpfs with source at stateDir/rel, as the agent (memifnet-slot) or memif-cni
// (memifnet-link) does, and writes a file in it.
func mountSlot(t *testing.T, stateDir, rel, source string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(stateDir, rel), 0o755); err != nil {
		t.Fatal(err)
	}
	parent, err := safefs.Open(filepath.Join(stateDir, filepath.Dir(rel)))
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	if _, err := parent.MountTmpfs(filepath.Base(rel), safefs.TmpfsOptions{Source: source, Mode: 0o777, Limits: tmpfs.Limits{Size: 1 << 20, Inodes: 64}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stateDir, rel, "memif.sock"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// bind bind-mounts src (recursively) on dst (made as a directory) and unmounts it at the end of the test.
func bind(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil { // as a container runtime does
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dst, unix.MNT_DETACH) })
	// The CRI's default propagation for a container's mounts: private (runc's "rprivate"), so
	// that nothing unmounted on the host reaches the container's copy.
	if err := unix.Mount("", dst, "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
}

func hugepagesFree(t *testing.T) int {
	t.Helper()
	h, err := testutil.Hugepages()
	if err != nil {
		t.Fatal(err)
	}
	return h.Free
}

// An uninstall while a pod still runs: its container holds its own mounts of its slot and pool
// unit (here bind mounts outside the state dir). Clean takes every mount and file of the state
// dir away, the pod keeps reading its slot, and the hugepages come back when the pod's mounts go.
func TestCleanKeepsRunningPodsAndFreesWhenTheyGo(t *testing.T) {
	testutil.RequireRoot(t, "mounts tmpfs and hugetlbfs")
	testutil.NeedHugepages(t, 4)
	stateDir, pod := filepath.Join(t.TempDir(), "state"), t.TempDir()
	t.Cleanup(func() { _ = testutil.UnmountAll(stateDir) })
	mountSlot(t, stateDir, "sockets/slot-000", "memifnet-slot")
	mountSlot(t, stateDir, "sockets/dra-slot-000", "memifnet-slot")
	mountSlot(t, stateDir, "links/default/l1", "memifnet-link")
	bind(t, filepath.Join(stateDir, "links/default/l1"), filepath.Join(stateDir, "sockets/slot-000/link"))
	free := hugepagesFree(t)
	pool := filepath.Join(stateDir, "pools/hugepool")
	if err := os.MkdirAll(pool, 0o755); err != nil {
		t.Fatal(err)
	}
	const page = 2 << 20
	if err := unix.Mount("memifnet-hugepool", pool, "hugetlbfs", unix.MS_NOSUID|unix.MS_NODEV, "pagesize=2M,size=8M,min_size=4M"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(pool, "unit-0-0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, 2*page); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(stateDir, "deviceplugin.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The pod's container: its slot and its unit.
	bind(t, filepath.Join(stateDir, "sockets/slot-000"), filepath.Join(pod, "slot"))
	unit := filepath.Join(pod, "unit")
	if err := os.WriteFile(unit, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(filepath.Join(pool, "unit-0-0"), unit, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}

	if err := Clean(stateDir, slog.Default()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir after Clean: %v, want it gone", err)
	}
	if ms := testutil.MountsUnder(t, stateDir); len(ms) != 0 {
		t.Errorf("mounts left under the state dir: %q", ms)
	}
	if b, err := os.ReadFile(filepath.Join(pod, "slot/memif.sock")); err != nil || string(b) != "x" {
		t.Errorf("the running pod's slot after Clean: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(pod, "slot/link/memif.sock")); err != nil || string(b) != "x" {
		t.Errorf("the running pod's link after Clean: %q, %v", b, err)
	}
	// HugePages_Free is the machine's: tests of other packages, run in parallel, take and give
	// pages meanwhile, so one reading after the pod's going can be short by theirs. Their
	// pages are taken for moments; the unit's 2 pages, if leaked, would never come back, so
	// the count must reach held+2 within a deadline.
	held := hugepagesFree(t)
	if err := unix.Unmount(unit, 0); err != nil { // the pod goes
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("HugePages_Free back to %d (held %d, %d before the pool): the unit's 2 pages after the last pod went", held+2, held, free),
		func() bool { return hugepagesFree(t) >= held+2 })
}

// A hostile pod plants, in its slot, a symlink to a host directory and a bind mount of it; and
// something not memifnet's is mounted on another slot. Clean deletes and unmounts nothing of the
// host directory, leaves the foreign mount (and the directories above it), and says so.
func TestCleanHostile(t *testing.T) {
	testutil.RequireRoot(t, "mounts tmpfs")
	stateDir, host := filepath.Join(t.TempDir(), "state"), t.TempDir()
	t.Cleanup(func() { _ = testutil.UnmountAll(stateDir) })
	if err := os.WriteFile(filepath.Join(host, "passwd"), []byte("root"), 0o644); err != nil {
		t.Fatal(err)
	}
	mountSlot(t, stateDir, "sockets/slot-000", "memifnet-slot")
	slot := filepath.Join(stateDir, "sockets/slot-000")
	if err := os.Symlink(host, filepath.Join(slot, "escape")); err != nil {
		t.Fatal(err)
	}
	bind(t, host, filepath.Join(slot, "planted"))
	// A symlink where the agent's own file would be, and a foreign mount on a slot.
	if err := os.Symlink(host, filepath.Join(stateDir, "deviceplugin")); err != nil {
		t.Fatal(err)
	}
	bind(t, host, filepath.Join(stateDir, "sockets/slot-001"))

	err := Clean(stateDir, slog.Default())
	if err == nil || !strings.Contains(err.Error(), "slot-001") {
		t.Errorf("Clean: %v, want it to name the foreign mount on slot-001", err)
	}
	if b, err := os.ReadFile(filepath.Join(host, "passwd")); err != nil || string(b) != "root" {
		t.Errorf("host file after Clean: %q, %v", b, err)
	}
	if ents, _ := os.ReadDir(host); len(ents) != 1 {
		t.Errorf("host dir after Clean has %d entries, want 1", len(ents))
	}
	if ms := testutil.MountsUnder(t, stateDir); !slices.Equal(ms, []string{filepath.Join(stateDir, "sockets/slot-001")}) {
		t.Errorf("mounts under the state dir after Clean: %q, want only the foreign one", ms)
	}
	if _, err := os.Lstat(filepath.Join(stateDir, "deviceplugin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the planted symlink: %v, want it removed", err)
	}
	if _, err := os.Lstat(slot); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("slot-000: %v, want it removed", err)
	}
}

// The agent's device-info files go (those of devices pods still hold); others' stay.
func TestRemoveDevinfo(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"memifnet.io-socket-slot-000-device.json", "memifnet.io-hugepool-unit-0-0-device.json", "other-device.json"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveDevinfo(dir); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "other-device.json" {
		t.Errorf("left %v, want only other-device.json", ents)
	}
	if err := RemoveDevinfo(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("a missing dir: %v", err)
	}
}

// containerView bind-mounts the host's state dir on a directory of its own in a read-only
// directory, as the kubelet mounts the agent's state volume in its read-only root file system:
// there the state dir is a mount point that cannot be removed (rmdir says EROFS before EBUSY).
func containerView(t *testing.T, hostState string) string {
	t.Helper()
	rootfs := t.TempDir()
	ctr := filepath.Join(rootfs, filepath.Base(hostState))
	if err := os.Mkdir(ctr, 0o755); err != nil {
		t.Fatal(err)
	}
	bind(t, rootfs, rootfs)
	if err := unix.Mount("", rootfs, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	bind(t, hostState, ctr)
	return ctr
}

// The state dir, a mount point in the agent's container, goes through its parent once Clean
// emptied it; a second uninstall finds nothing to do.
func TestRemoveStateDir(t *testing.T) {
	testutil.RequireRoot(t, "bind mounts")
	parent := t.TempDir()
	hostState := filepath.Join(parent, "memifnet")
	if err := os.MkdirAll(filepath.Join(hostState, "sockets/slot-000"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctr := containerView(t, hostState)
	t.Cleanup(func() { _ = testutil.UnmountAll(ctr) })
	mountSlot(t, ctr, "sockets/slot-001", "memifnet-slot")
	if err := Clean(ctr, slog.Default()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(hostState); err != nil {
		t.Fatalf("the state dir after Clean: %v, want it there (a mount point of the container)", err)
	}
	if err := RemoveStateDir(ctr, parent, slog.Default()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(hostState); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the state dir on the host: %v, want it removed", err)
	}
	if err := RemoveStateDir(ctr, parent, slog.Default()); err != nil {
		t.Errorf("again, with the state dir gone: %v", err)
	}
}

// What RemoveStateDir must leave: a state dir Clean could not empty, one that is a mount point
// on the host, a symlink in the parent where the state dir is, and a parent that does not hold
// this state dir. Each one stays, and the error says why.
func TestRemoveStateDirLeaves(t *testing.T) {
	testutil.RequireRoot(t, "bind mounts")
	setup := func(t *testing.T) (parent, hostState, ctr string) {
		parent = t.TempDir()
		hostState = filepath.Join(parent, "memifnet")
		if err := os.Mkdir(hostState, 0o755); err != nil {
			t.Fatal(err)
		}
		return parent, hostState, containerView(t, hostState)
	}
	t.Run("not empty", func(t *testing.T) {
		parent, hostState, ctr := setup(t)
		if err := os.WriteFile(filepath.Join(hostState, "left"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := RemoveStateDir(ctr, parent, slog.Default()); !errors.Is(err, unix.ENOTEMPTY) {
			t.Errorf("RemoveStateDir: %v, want ENOTEMPTY", err)
		}
		if _, err := os.Stat(filepath.Join(hostState, "left")); err != nil {
			t.Error(err)
		}
	})
	t.Run("a mount on the host", func(t *testing.T) {
		parent, hostState, _ := setup(t)
		// The state dir existed before memifnet, as a mount of its own (then the container's
		// volume is a bind of that mount).
		if err := unix.Mount("tmpfs", hostState, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Unmount(hostState, unix.MNT_DETACH) })
		ctr := containerView(t, hostState)
		if err := RemoveStateDir(ctr, parent, slog.Default()); err == nil || !strings.Contains(err.Error(), "mount point") {
			t.Errorf("RemoveStateDir: %v, want it to refuse a mount point", err)
		}
		if ms := testutil.MountsUnder(t, parent); !slices.Contains(ms, hostState) {
			t.Errorf("mounts under the parent %q, want %s still mounted", ms, hostState)
		}
	})
	t.Run("a symlink", func(t *testing.T) {
		_, hostState, ctr := setup(t)
		other := t.TempDir()
		if err := os.Symlink(hostState, filepath.Join(other, "memifnet")); err != nil {
			t.Fatal(err)
		}
		if err := RemoveStateDir(ctr, other, slog.Default()); !errors.Is(err, safefs.ErrRefused) {
			t.Errorf("RemoveStateDir: %v, want it refused", err)
		}
		if _, err := os.Stat(hostState); err != nil {
			t.Errorf("the state dir behind the symlink: %v", err)
		}
	})
	t.Run("another directory", func(t *testing.T) {
		_, hostState, ctr := setup(t)
		other := t.TempDir()
		if err := os.Mkdir(filepath.Join(other, "memifnet"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := RemoveStateDir(ctr, other, slog.Default()); err == nil || !strings.Contains(err.Error(), "is not the state dir") {
			t.Errorf("RemoveStateDir: %v, want it to say it is not the state dir", err)
		}
		for _, d := range []string{hostState, filepath.Join(other, "memifnet")} {
			if _, err := os.Stat(d); err != nil {
				t.Error(err)
			}
		}
	})
}

// The DRA driver's socket directory goes when the library emptied it, and stays otherwise.
func TestRemovePluginDir(t *testing.T) {
	plugins := t.TempDir()
	if err := os.Mkdir(filepath.Join(plugins, "memifnet.io"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(plugins, "other.io"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := RemovePluginDir(plugins, "memifnet.io", slog.Default()); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(plugins); len(ents) != 1 || ents[0].Name() != "other.io" {
		t.Errorf("left %v, want only other.io", ents)
	}
	if err := RemovePluginDir(plugins, "memifnet.io", slog.Default()); err != nil {
		t.Errorf("again: %v", err)
	}
	if err := os.WriteFile(filepath.Join(plugins, "other.io", "dra.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RemovePluginDir(plugins, "other.io", slog.Default()); !errors.Is(err, unix.ENOTEMPTY) {
		t.Errorf("a directory holding a socket: %v, want ENOTEMPTY", err)
	}
}

// memifnet's CDI specs and memif-cni's device-info files go; others' files, and what a planted
// symlink points to, stay.
func TestRemoveCDISpecsAndCNIDevinfo(t *testing.T) {
	for _, c := range []struct {
		name   string
		remove func(string) error
		ours   []string
		others []string
	}{
		{"cdi", RemoveCDISpecs,
			[]string{"memifnet.io-socket.json", "memifnet.io-hugepool.json", "memifnet.io-claim_0b5e.json"},
			[]string{"nvidia.com-gpu.json", "memifnet.io-socket.yaml"}},
		{"cni devinfo", RemoveCNIDevinfo,
			[]string{"memifnet-abc123_net1-east-device.json"},
			[]string{"sriov-abc_net1-device.json", "memifnet.io-socket-slot-000-device.json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, target := t.TempDir(), filepath.Join(t.TempDir(), "keep")
			if err := os.WriteFile(target, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, n := range append(slices.Clone(c.ours[1:]), c.others...) {
				if err := os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(target, filepath.Join(dir, c.ours[0])); err != nil {
				t.Fatal(err)
			}
			if err := c.remove(dir); err != nil {
				t.Fatal(err)
			}
			var left []string
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				left = append(left, e.Name())
			}
			if want := slices.Sorted(slices.Values(c.others)); !slices.Equal(left, want) {
				t.Errorf("left %q, want %q", left, want)
			}
			if b, err := os.ReadFile(target); err != nil || string(b) != "x" {
				t.Errorf("the symlink's target: %q, %v", b, err)
			}
			if err := c.remove(filepath.Join(dir, "missing")); err != nil {
				t.Errorf("a missing dir: %v", err)
			}
		})
	}
}
