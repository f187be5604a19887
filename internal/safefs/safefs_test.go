package safefs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/tmpfs"
)

// eachMode runs f with openat2 and the new mount API, and again with the fallbacks that older
// kernels get (component walk, mount(2) on /proc/self/fd paths, mount ids compared).
func eachMode(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", f)
	t.Run("fallback", func(t *testing.T) {
		forceWalk, forceLegacyMount, forceMntIDCompare = true, true, true
		t.Cleanup(func() { forceWalk, forceLegacyMount, forceMntIDCompare = false, false, false })
		f(t)
	})
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root (mounts); CI=true forbids skipping")
		}
		t.Skip("needs root (mounts)")
	}
}

func openT(t *testing.T, path string) *Dir {
	t.Helper()
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tree makes <tmp>/root (the pod's directory) and <tmp>/victim (a host file outside it).
func tree(t *testing.T) (root, victim string) {
	t.Helper()
	tmp := t.TempDir()
	root, victim = filepath.Join(tmp, "root"), filepath.Join(tmp, "victim")
	if err := os.Mkdir(root, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return root, victim
}

func TestWriteFileReplacesPlantedSymlinks(t *testing.T) {
	eachMode(t, func(t *testing.T) {
		root, victim := tree(t)
		dangling := filepath.Join(filepath.Dir(root), "created-by-attack")
		// The target itself, and the temp name older code used, both point out of the tree.
		for name, to := range map[string]string{"port.json": victim, "port.json.tmp": victim, "other.json": dangling} {
			if err := os.Symlink(to, filepath.Join(root, name)); err != nil {
				t.Fatal(err)
			}
		}
		d := openT(t, root)
		for _, name := range []string{"port.json", "other.json"} {
			if err := d.WriteFile(name, []byte(`{"ok":true}`), 0o644, WriteOptions{Durable: true}); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(filepath.Join(root, name))
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
				t.Fatalf("%s: %v, %v: want a regular 0644 file", name, fi.Mode(), err)
			}
			if got := readString(t, filepath.Join(root, name)); got != `{"ok":true}` {
				t.Fatalf("%s holds %q", name, got)
			}
		}
		if got := readString(t, victim); got != "host secret\n" {
			t.Fatalf("victim file changed: %q", got)
		}
		if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("victim mode changed: %v %v", fi.Mode(), err)
		}
		if _, err := os.Lstat(dangling); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a dangling symlink created a file outside the tree: %v", err)
		}
		if fi, err := os.Lstat(filepath.Join(root, "port.json.tmp")); err != nil || fi.Mode().Type() != os.ModeSymlink {
			t.Fatalf("the planted port.json.tmp should be left alone: %v %v", fi, err)
		}
		assertNoTemps(t, root)
	})
}

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temp file %s left behind", e.Name())
		}
	}
}

func TestWriteFileRefusesDirectoryAndCleansUp(t *testing.T) {
	eachMode(t, func(t *testing.T) {
		root, _ := tree(t)
		if err := os.MkdirAll(filepath.Join(root, "port.json", "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		err := openT(t, root).WriteFile("port.json", []byte("x"), 0o644, WriteOptions{})
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "port.json: it is a directory") {
			t.Fatalf("err = %v, want a refusal naming the directory", err)
		}
		assertNoTemps(t, root)
	})
}

func TestWriteFileIgnoresUmaskAndSetsOwner(t *testing.T) {
	needRoot(t)
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	root, _ := tree(t)
	d := openT(t, root)
	if err := d.WriteFile("f", []byte("x"), 0o644, WriteOptions{Owner: &Owner{UID: 65532, GID: 65533}}); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(root, "f"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o777 != 0o644 || st.Uid != 65532 || st.Gid != 65533 {
		t.Fatalf("mode %o owner %d:%d, want 644 65532:65533", st.Mode&0o777, st.Uid, st.Gid)
	}
}

func TestPackageWriteFileCreatesParents(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a", "b", "c.json")
	if err := WriteFile(p, []byte("1"), 0o600, WriteOptions{Durable: true}); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("2"), 0o600, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, p); got != "2" {
		t.Fatalf("got %q", got)
	}
	t.Chdir(filepath.Dir(p))
	if err := WriteFile("rel.json", []byte("3"), 0o600, WriteOptions{}); err != nil {
		t.Fatalf("relative path: %v", err)
	}
	if got := readString(t, filepath.Join(filepath.Dir(p), "rel.json")); got != "3" {
		t.Fatalf("got %q", got)
	}
}

func TestResolutionRefusals(t *testing.T) {
	eachMode(t, func(t *testing.T) {
		root, victim := tree(t)
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.Symlink(filepath.Dir(victim), filepath.Join(root, "up")))
		must(os.Symlink("/proc/self/root", filepath.Join(root, "magic")))
		must(os.Mkdir(filepath.Join(root, "dir"), 0o755))
		must(os.Symlink("../victim", filepath.Join(root, "dir", "rel")))
		must(os.WriteFile(filepath.Join(root, "file"), []byte("x"), 0o644))
		d := openT(t, root)
		for _, tc := range []struct{ name, want string }{
			{"up", "symlink"},
			{"up/victim", "symlink"},
			{"magic/etc", "symlink"},
			{"dir/rel", "symlink"},
			{"file/x", "not a directory"},
		} {
			f, err := d.OpenFile(tc.name, unix.O_RDONLY, 0)
			if err == nil {
				f.Close()
				t.Errorf("%s: opened, want refused", tc.name)
				continue
			}
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want a refusal mentioning %q", tc.name, err, tc.want)
			}
		}
		for _, bad := range []string{"../victim", "/etc/passwd", "dir/../file", "./file", "", "dir//x"} {
			if f, err := d.OpenFile(bad, unix.O_RDONLY, 0); err == nil {
				f.Close()
				t.Errorf("%q: opened, want an error", bad)
			}
		}
		if _, err := d.OpenDir("up"); !errors.Is(err, ErrRefused) {
			t.Errorf("OpenDir through a symlink: %v", err)
		}
		if _, err := d.Mkdir("up", 0o755); !errors.Is(err, ErrRefused) {
			t.Errorf("Mkdir over a symlink: %v", err)
		}
		if _, err := d.MkdirAll("up/x/y", 0o755); !errors.Is(err, ErrRefused) {
			t.Errorf("MkdirAll through a symlink: %v", err)
		}
		if _, err := os.Lstat(filepath.Join(filepath.Dir(victim), "x")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("MkdirAll created a directory outside the tree")
		}
		if _, err := Open(filepath.Join(root, "up")); !errors.Is(err, ErrRefused) {
			t.Errorf("Open of a symlink: %v", err)
		}
	})
}

func TestMkdirAllAndRemove(t *testing.T) {
	eachMode(t, func(t *testing.T) {
		root, victim := tree(t)
		d := openT(t, root)
		sub, err := d.MkdirAll("a/b/c", 0o711)
		if err != nil {
			t.Fatal(err)
		}
		sub.Close()
		fi, err := os.Stat(filepath.Join(root, "a/b/c"))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o711 {
			t.Fatalf("a/b/c: %v %v", fi, err)
		}
		if err := os.Symlink(victim, filepath.Join(root, "ln")); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"ln", "missing"} {
			if err := d.Remove(n); err != nil {
				t.Fatalf("remove %s: %v", n, err)
			}
		}
		if got := readString(t, victim); got != "host secret\n" {
			t.Fatal("removing a symlink touched its target")
		}
		if err := d.Remove("a"); err == nil {
			t.Fatal("removed a non-empty directory")
		}
	})
}

func TestReadFile(t *testing.T) {
	eachMode(t, func(t *testing.T) {
		root, victim := tree(t)
		if err := os.Symlink(victim, filepath.Join(root, "ln")); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mkfifo(filepath.Join(root, "fifo"), 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "big"), bytes.Repeat([]byte("x"), 100), 0o644); err != nil {
			t.Fatal(err)
		}
		d := openT(t, root)
		if _, err := d.ReadFile("ln", 1<<20); !errors.Is(err, ErrRefused) {
			t.Errorf("read through a symlink: %v", err)
		}
		if _, err := d.ReadFile("fifo", 1<<20); !errors.Is(err, ErrRefused) {
			t.Errorf("read of a fifo: %v", err) // and it did not block
		}
		if _, err := d.ReadFile("big", 99); !errors.Is(err, ErrRefused) {
			t.Errorf("read over the limit: %v", err)
		}
		if b, err := d.ReadFile("big", 100); err != nil || len(b) != 100 {
			t.Errorf("read at the limit: %d bytes, %v", len(b), err)
		}
	})
}

// mountTmpfsAt mounts a plain tmpfs at path with mount(2), as a host mount the pod must not touch.
func mountTmpfsAt(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("victim", path, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(path, unix.MNT_DETACH) })
}

func isMounted(t *testing.T, path string) bool {
	t.Helper()
	d, err := Open(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, mounted, err := d.MountAt(filepath.Base(path))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return mounted
}

func TestMountTmpfsLimits(t *testing.T) {
	needRoot(t)
	eachMode(t, func(t *testing.T) {
		root, _ := tree(t)
		d := openT(t, root)
		if _, err := d.Mkdir("slot", 0o755); err != nil {
			t.Fatal(err)
		}
		id, err := d.MountTmpfs("slot", TmpfsOptions{Source: "safefs-test", Limits: tmpfs.Limits{Size: 64 << 10, Inodes: 8}, Mode: 0o777})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = d.Unmount("slot", id) })
		got, mounted, err := d.MountAt("slot")
		if err != nil || !mounted || got != id {
			t.Fatalf("MountAt = %v %v %v, want %v", got, mounted, err, id)
		}
		slot := filepath.Join(root, "slot")
		fi, err := os.Stat(slot)
		if err != nil || fi.Mode().Perm() != 0o777 {
			t.Fatalf("slot root: %v %v", fi, err)
		}
		var st unix.Statfs_t
		if err := unix.Statfs(slot, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
			t.Fatalf("statfs: %#x %v", st.Type, err)
		}
		// Size: a pod filling its slot hits ENOSPC at the limit, not the node's disk.
		err = os.WriteFile(filepath.Join(slot, "fill"), make([]byte, 128<<10), 0o644)
		if !errors.Is(err, unix.ENOSPC) {
			t.Fatalf("writing 128 KiB into a 64 KiB tmpfs: %v, want ENOSPC", err)
		}
		// Inodes: the root takes one.
		var created int
		for i := range 16 {
			if err := os.WriteFile(filepath.Join(slot, "f"+string(rune('a'+i))), nil, 0o644); err != nil {
				if !errors.Is(err, unix.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
			created++
		}
		if created >= 8 {
			t.Fatalf("created %d files in a tmpfs of 8 inodes", created)
		}
		if _, err := d.MountTmpfs("slot", TmpfsOptions{Limits: tmpfs.Limits{Size: 1, Inodes: 1}}); !errors.Is(err, ErrRefused) {
			t.Fatalf("mounting on a mount point: %v, want refused", err)
		}
		if _, err := d.OpenDir("slot"); !errors.Is(err, ErrRefused) {
			t.Fatalf("OpenDir across a mount: %v, want refused", err)
		}
		sd, err := d.OpenMountDir("slot")
		if err != nil {
			t.Fatal(err)
		}
		sd.Close()
		if _, err := d.OpenMountDir("missing"); err == nil {
			t.Fatal("OpenMountDir of a missing name")
		}
	})
}

// linkSetup makes a link tmpfs (src) and a slot directory with a link/ target, as memif-cni does.
func linkSetup(t *testing.T) (root string, d, src *Dir, srcID Identity) {
	t.Helper()
	root, _ = tree(t)
	d = openT(t, root)
	for _, n := range []string{"links", "slot"} {
		if _, err := d.Mkdir(n, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := openT(t, filepath.Join(root, "links"))
	if _, err := links.Mkdir("l1", 0o755); err != nil {
		t.Fatal(err)
	}
	id, err := links.MountTmpfs("l1", TmpfsOptions{Source: "safefs-test-link", Limits: tmpfs.Limits{Size: 64 << 10, Inodes: 16}, Mode: 0o777})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = links.Unmount("l1", id) })
	src, err = links.OpenMountDir("l1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return root, d, src, id
}

func TestBindAndUnmountOnlyWhatWasMade(t *testing.T) {
	needRoot(t)
	eachMode(t, func(t *testing.T) {
		root, d, src, srcID := linkSetup(t)
		slot := openT(t, filepath.Join(root, "slot"))
		if _, err := slot.Mkdir("link", 0o755); err != nil {
			t.Fatal(err)
		}
		bindID, err := slot.Bind(src, "link")
		if err != nil {
			t.Fatal(err)
		}
		if !bindID.SameFile(srcID) || bindID == srcID {
			t.Fatalf("bind %v of %v: want the same directory through another mount", bindID, srcID)
		}
		if err := os.WriteFile(filepath.Join(root, "slot", "link", "memif.sock"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "links", "l1", "memif.sock")); err != nil {
			t.Fatalf("the bind does not show the link: %v", err)
		}
		id, mounted, err := slot.MountAt("link")
		if err != nil || !mounted || id != bindID {
			t.Fatalf("MountAt(link) = %v %v %v, want %v", id, mounted, err, bindID)
		}
		if _, err := slot.Bind(src, "link"); !errors.Is(err, ErrRefused) {
			t.Fatalf("second bind: %v, want refused (already mounted)", err)
		}
		for _, other := range []Identity{srcID, {Dev: bindID.Dev, Ino: bindID.Ino, Mount: bindID.Mount + 1}} {
			if _, err := slot.Unmount("link", other); !errors.Is(err, ErrRefused) {
				t.Fatalf("unmount with another identity: %v, want refused", err)
			}
		}
		if !isMounted(t, filepath.Join(root, "slot", "link")) {
			t.Fatal("a refused unmount unmounted")
		}
		if ok, err := slot.Unmount("link", bindID); err != nil || !ok {
			t.Fatalf("unmount: %v %v", ok, err)
		}
		if ok, err := slot.Unmount("link", bindID); err != nil || ok {
			t.Fatalf("second unmount: %v %v, want nothing to do", ok, err)
		}
		if _, err := os.Stat(filepath.Join(root, "links", "l1", "memif.sock")); err != nil {
			t.Fatalf("unmounting the bind lost the link's files: %v", err)
		}
		_ = d
	})
}

func TestBindAndUnmountRefuseSymlinks(t *testing.T) {
	needRoot(t)
	eachMode(t, func(t *testing.T) {
		root, _, src, _ := linkSetup(t)
		victim := filepath.Join(filepath.Dir(root), "host-mount")
		mountTmpfsAt(t, victim)
		if err := os.Symlink(victim, filepath.Join(root, "slot", "link")); err != nil {
			t.Fatal(err)
		}
		slot := openT(t, filepath.Join(root, "slot"))
		if _, err := slot.Bind(src, "link"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "symlink") {
			t.Fatalf("bind on a symlink: %v, want a refusal naming the symlink", err)
		}
		if ok, err := slot.Unmount("link", Identity{}); ok || !errors.Is(err, ErrRefused) {
			t.Fatalf("unmount of a symlink: %v %v, want refused", ok, err)
		}
		if !isMounted(t, victim) {
			t.Fatal("the host mount the symlink names was unmounted")
		}
		var st unix.Statfs_t
		if err := unix.Statfs(victim, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
			t.Fatal("the host mount changed")
		}
	})
}

// TestRacingPodCannotRedirectMounts plays a pod that keeps swapping its link/ entry between a
// directory and a symlink to a host mount while the agent binds and unmounts: the host mount must
// never be covered or detached.
func TestRacingPodCannotRedirectMounts(t *testing.T) {
	needRoot(t)
	eachMode(t, func(t *testing.T) {
		root, _, src, _ := linkSetup(t)
		victim := filepath.Join(filepath.Dir(root), "host-mount")
		mountTmpfsAt(t, victim)
		victimID := func() Identity {
			d, err := Open(victim)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			id, err := d.Identity()
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		before := victimID()
		slotPath := filepath.Join(root, "slot")
		slot := openT(t, slotPath)
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // the pod
			defer wg.Done()
			link, tmp := filepath.Join(slotPath, "link"), filepath.Join(slotPath, "ln")
			for !stop.Load() {
				_ = os.Symlink(victim, tmp)
				_ = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, link, 0) // replaces a file/symlink
				_ = os.Remove(link)
				_ = os.Mkdir(link, 0o755)
			}
		}()
		binds := 0
		for range 2000 {
			_, _ = slot.Mkdir("link", 0o755)
			if id, err := slot.Bind(src, "link"); err == nil {
				binds++
				if _, err := slot.Unmount("link", id); err != nil {
					t.Error(err)
				}
			}
			if _, err := slot.Unmount("link", Identity{}); err != nil && !errors.Is(err, ErrRefused) {
				t.Error(err)
			}
			if victimID() != before {
				t.Fatal("the host mount was covered or detached")
			}
		}
		stop.Store(true)
		wg.Wait()
		if !isMounted(t, victim) || victimID() != before {
			t.Fatal("the host mount changed")
		}
		t.Logf("%d of 2000 binds landed (inside the slot)", binds)
	})
}

// FuzzResolve: whatever name a pod makes the agent resolve, and whatever the tree holds (links
// out, links up, links in a loop), an opened file is inside the tree.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"a", "a/b", "up/x", "../x", "/etc", "a/../../x", "loop/x", "in/b", "a/b/c/../d", "."} {
		f.Add(s, false)
		f.Add(s, true)
	}
	tmp := f.TempDir()
	root := filepath.Join(tmp, "root")
	for _, p := range []string{"root/a/b/c", "outside/x"} {
		if err := os.MkdirAll(filepath.Join(tmp, p), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	for name, to := range map[string]string{
		"root/up": "..", "root/abs": filepath.Join(tmp, "outside"), "root/a/b/rel": "../../../outside",
		"root/loop": "loop", "root/in": "a", "root/proc": "/proc/self/cwd",
	} {
		if err := os.Symlink(to, filepath.Join(tmp, name)); err != nil {
			f.Fatal(err)
		}
	}
	d, err := Open(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name string, useWalk bool) {
		forceWalk = useWalk
		defer func() { forceWalk = false }()
		fd, err := resolve(d.fd, name, unix.O_PATH, 0, strict)
		if err != nil {
			return
		}
		defer unix.Close(fd)
		got, err := os.Readlink(procPath(fd, ""))
		if err != nil {
			t.Fatal(err)
		}
		if got != root && !strings.HasPrefix(got, root+"/") {
			t.Fatalf("resolve(%q) opened %s, outside %s", name, got, root)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
			t.Fatalf("resolve(%q) opened a symlink", name)
		}
	})
}

// TestRemountedTmpfsHasNewIdentity: tmpfs roots are all inode 1 and device numbers come back
// once a file system is gone, so only the mount id tells a slot's new tmpfs from its old one.
func TestRemountedTmpfsHasNewIdentity(t *testing.T) {
	needRoot(t)
	eachMode(t, func(t *testing.T) {
		root, _ := tree(t)
		d := openT(t, root)
		if _, err := d.Mkdir("slot", 0o755); err != nil {
			t.Fatal(err)
		}
		seen := map[Identity]bool{}
		for range 4 {
			id, err := d.MountTmpfs("slot", TmpfsOptions{Limits: tmpfs.Limits{Size: 64 << 10, Inodes: 8}, Mode: 0o777})
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("identity %v seen before", id)
			}
			seen[id] = true
			if ok, err := d.Unmount("slot", id); err != nil || !ok {
				t.Fatal(ok, err)
			}
		}
	})
}
