package safefs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// RemoveAll removes a tree and a planted symlink itself (not what it names); it refuses to enter
// a mount point, leaving it and the directories above it.
func TestRemoveAll(t *testing.T) {
	root, host := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "keep"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "tree/a/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "tree/a/b/f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, filepath.Join(root, "tree/a/link")); err != nil {
		t.Fatal(err)
	}
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.RemoveAll("tree"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(root, "tree")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tree: %v, want it removed", err)
	}
	if _, err := os.Stat(filepath.Join(host, "keep")); err != nil {
		t.Errorf("the symlink's target: %v", err)
	}
	if err := d.RemoveAll("missing"); err != nil {
		t.Errorf("missing: %v", err)
	}
}

func TestRemoveAllRefusesMounts(t *testing.T) {
	needRoot(t)
	root, host := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "keep"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mnt := filepath.Join(root, "m/mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(host, mnt, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	if err := d.RemoveAll("m"); !errors.Is(err, ErrRefused) {
		t.Errorf("a tree with a mount point: %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(host, "keep")); err != nil {
		t.Errorf("the mounted directory's file: %v", err)
	}
	if _, err := os.Stat(mnt); err != nil {
		t.Errorf("the mount point: %v, want it left", err)
	}
}
