// Command image builds a container image from static binaries without a container engine and
// writes it as a docker-archive tarball that `ctr images import`, `docker load` and `podman load`
// accept. The layer is reproducible: fixed owners, modes and timestamps.
//
//	go run ./hack/image -o out.tar -t localhost/memifnet/memifnet:dev \
//	    -entrypoint /usr/local/bin/memif-deviceplugin \
//	    bin/memif-deviceplugin=/usr/local/bin/memif-deviceplugin bin/memif-cni=/usr/local/bin/memif-cni
//
// The image holds the files plus /tmp (1777), /etc/passwd and /etc/group with root and nonroot
// (65532), like distroless/static, and nothing else: no shell, no libc. -root DIR adds a whole
// tree as the image's / (directories, files with their permission bits, symlinks as they are):
// hack/dpdk-image.sh stages dpdk-testpmd and its shared libraries that way.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/memifnet/memifnet/internal/safefs"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	out := fs.String("o", "", "output tarball (docker-archive)")
	tag := fs.String("t", "", "image reference, e.g. localhost/memifnet/memifnet:dev")
	entry := fs.String("entrypoint", "", "entrypoint (a path in the image)")
	user := fs.String("user", "", "default user, e.g. 65532:65532 (empty: root)")
	arch := fs.String("arch", "amd64", "image architecture")
	root := fs.String("root", "", "a directory whose tree is added as the image's /")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *tag == "" || fs.NArg() == 0 && *root == "" {
		return errors.New("usage: image -o OUT -t TAG [-entrypoint PATH] [-root DIR] [SRC=DEST ...]")
	}
	ref, err := name.NewTag(*tag, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("-t %q: %w", *tag, err)
	}
	files := map[string]string{} // dest -> src
	for _, a := range fs.Args() {
		src, dest, ok := strings.Cut(a, "=")
		if !ok || !path.IsAbs(dest) {
			return fmt.Errorf("%q: want SRC=/absolute/dest", a)
		}
		files[path.Clean(dest)] = src
	}
	layer, err := buildLayer(files, *root)
	if err != nil {
		return err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layer)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", *arch
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cfg.Config.User = *user
	cfg.Config.WorkingDir = "/"
	if *entry != "" {
		cfg.Config.Entrypoint = []string{*entry}
	}
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.source": "https://github.com/memifnet/memifnet"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := tarball.Write(ref, img, &buf); err != nil {
		return err
	}
	// safefs resolves absolute paths only; -o is usually relative (make image).
	dst, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	return safefs.WriteFile(dst, buf.Bytes(), 0o644, safefs.WriteOptions{})
}

// buildLayer makes the one layer: parent directories, the tree under root (if any), the files
// (mode 0755), /tmp and the passwd/group files.
func buildLayer(files map[string]string, root string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	var addDir func(d string, mode int64) error
	addDir = func(d string, mode int64) error {
		if d == "/" || dirs[d] {
			return nil
		}
		if err := addDir(path.Dir(d), 0o755); err != nil {
			return err
		}
		dirs[d] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: mode, ModTime: epoch, Format: tar.FormatPAX})
	}
	add := func(dest string, mode int64, data []byte) error {
		if err := addDir(path.Dir(dest), 0o755); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(dest, "/"), Mode: mode, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"/dev", "/proc", "/sys", "/etc", "/run", "/var"} {
		if err := addDir(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := addDir("/tmp", 0o1777); err != nil {
		return nil, err
	}
	if err := add("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")); err != nil {
		return nil, err
	}
	if err := add("/etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")); err != nil {
		return nil, err
	}
	if root != "" {
		if err := addTree(tw, root, addDir); err != nil {
			return nil, err
		}
	}
	dests := make([]string, 0, len(files))
	for d := range files {
		dests = append(dests, d)
	}
	sort.Strings(dests)
	for _, d := range dests {
		data, err := os.ReadFile(files[d])
		if err != nil {
			return nil, err
		}
		if err := add(d, 0o755, data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// addTree adds everything under root at the same place under /, in lexical order: directories
// (through addDir, so each once), regular files with their permission bits, symlinks as links.
func addTree(tw *tar.Writer, root string, addDir func(string, int64) error) error {
	epoch := time.Unix(0, 0)
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		dest := "/" + filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: strings.TrimPrefix(dest, "/"), Mode: int64(info.Mode().Perm()), ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case d.IsDir():
			return addDir(dest, int64(info.Mode().Perm()))
		case d.Type()&os.ModeSymlink != 0:
			if h.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
			h.Typeflag, h.Mode = tar.TypeSymlink, 0o777
			return tw.WriteHeader(h)
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		}
		return fmt.Errorf("%s: neither a directory, a regular file nor a symlink", p)
	})
}
