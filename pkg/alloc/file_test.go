package alloc

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestOpenFileRegion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unit-0")
	if err := os.WriteFile(path, make([]byte, 1<<16), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := OpenFileRegion(path, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Mem) != 4096 || r.Huge {
		t.Fatalf("len %d huge %v, want 4096 false", len(r.Mem), r.Huge)
	}
	copy(r.Mem, "hello")
	// A second claim of the same unit must fail: memif maps a region from offset 0.
	if _, err := OpenFileRegion(path, 0); !errors.Is(err, ErrFileInUse) {
		t.Fatalf("second open: %v, want ErrFileInUse", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(data[:5]) != "hello" {
		t.Fatalf("file holds %q, want the bytes written through the mapping", data[:5])
	}
	r, err = OpenFileRegion(path, 0)
	if err != nil {
		t.Fatalf("reopen after close: %v", err)
	}
	if len(r.Mem) != 1<<16 {
		t.Fatalf("whole-file map: %d bytes", len(r.Mem))
	}
	r.Close()
}

func TestOpenFileRegionErrors(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileRegion(small, 4096); !errors.Is(err, ErrRegionTooSmall) {
		t.Fatalf("too small: %v", err)
	}
	if _, err := OpenFileRegion(filepath.Join(dir, "missing"), 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := OpenFileRegion(dir, 0); err == nil {
		t.Fatal("a directory opened as a region")
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileRegion(empty, 0); err == nil {
		t.Fatal("an empty file opened as a region")
	}
	if huge, err := IsHugetlbfs(dir); err != nil || huge {
		t.Fatalf("IsHugetlbfs(tempdir) = %v, %v", huge, err)
	}
}
