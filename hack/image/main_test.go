package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The tarball is what `ctr images import` reads: a docker-archive with the tag, the config and
// one layer holding the files with fixed owners, modes and times.
func TestImageTarball(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!fake binary"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out", "img.tar")
	if err := run([]string{"-o", out, "-t", "localhost/memifnet/test:1", "-entrypoint", "/usr/local/bin/tool", "-user", "65532:65532",
		bin + "=/usr/local/bin/tool"}); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("localhost/memifnet/test:1")
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("not a docker-archive with that tag: %v", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" || len(cfg.Config.Entrypoint) != 1 ||
		cfg.Config.Entrypoint[0] != "/usr/local/bin/tool" || cfg.Config.User != "65532:65532" || cfg.Created.Unix() != 0 {
		t.Errorf("config %+v", cfg)
	}
	want := map[string]struct {
		mode int64
		dir  bool
	}{
		"usr/local/bin/tool": {0o755, false}, "tmp/": {0o1777, true}, "etc/passwd": {0o644, false},
		"etc/group": {0o644, false}, "usr/local/bin/": {0o755, true}, "proc/": {0o755, true},
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	r, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.ModTime.Unix() != 0 {
			t.Errorf("%s: owner %d:%d time %v, want 0:0 at the epoch", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		if w, ok := want[h.Name]; ok {
			if h.Mode != w.mode || (h.Typeflag == tar.TypeDir) != w.dir {
				t.Errorf("%s: mode %o dir %v, want %o dir %v", h.Name, h.Mode, h.Typeflag == tar.TypeDir, w.mode, w.dir)
			}
			delete(want, h.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing from the layer: %v", want)
	}
}

func TestImageUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-t", "localhost/x:1", "a=/b"},        // no -o
		{"-o", "x.tar", "a=/b"},                // no -t
		{"-o", "x.tar", "-t", "localhost/x:1"}, // no files
		{"-o", "x.tar", "-t", "localhost/x:1", "a=relative"},
		{"-o", "x.tar", "-t", "Bad Tag", "a=/b"},
	} {
		if err := run(args); err == nil {
			t.Errorf("image %q: no error", args)
		}
	}
}

// -root adds a tree as it is: directories, files with their permission bits, symlinks as links
// (how hack/dpdk-image.sh stages a dynamically linked program and its libraries).
func TestImageRoot(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	for _, d := range []string{"usr/lib/x86_64-linux-gnu", "usr/bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for f, mode := range map[string]os.FileMode{"usr/bin/prog": 0o755, "usr/lib/x86_64-linux-gnu/libx.so.23.0": 0o644} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(f), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("libx.so.23.0", filepath.Join(root, "usr/lib/x86_64-linux-gnu/libx.so.23")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/lib", filepath.Join(root, "lib")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	if err := run([]string{"-o", out, "-t", "localhost/memifnet/test:2", "-root", root}); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("localhost/memifnet/test:2")
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	r, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	type entry struct {
		typ  byte
		mode int64
		link string
	}
	want := map[string]entry{
		"usr/bin/prog":                          {tar.TypeReg, 0o755, ""},
		"usr/lib/x86_64-linux-gnu/libx.so.23.0": {tar.TypeReg, 0o644, ""},
		"usr/lib/x86_64-linux-gnu/libx.so.23":   {tar.TypeSymlink, 0o777, "libx.so.23.0"},
		"lib":                                   {tar.TypeSymlink, 0o777, "usr/lib"},
		"usr/lib/":                              {tar.TypeDir, 0o755, ""},
		"etc/passwd":                            {tar.TypeReg, 0o644, ""},
	}
	seen := map[string]int{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if seen[h.Name]++; seen[h.Name] > 1 {
			t.Errorf("%s twice in the layer", h.Name)
		}
		if w, ok := want[h.Name]; ok {
			if got := (entry{h.Typeflag, h.Mode, h.Linkname}); got != w {
				t.Errorf("%s: %+v, want %+v", h.Name, got, w)
			}
			delete(want, h.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing from the layer: %v", want)
	}
}
