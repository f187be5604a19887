// Package imagebuild makes the memifnet container images from static binaries without a
// container engine: one reproducible layer (fixed owners, modes and timestamps) and a config with
// no creation time, so the same binaries give the same image digest. `make image` (hack/image, a
// docker-archive for one platform) and `make release` (hack/release, an OCI index for several)
// both build their images here: one build path.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec says what goes into an image.
type Spec struct {
	Files      map[string]string // destination in the image (absolute) -> source file; mode 0755
	Root       string            // a directory whose tree is added as the image's / (optional)
	Entrypoint string            // a path in the image (optional)
	User       string            // default user, e.g. 65532:65532 (empty: root)
	Arch       string            // GOARCH of the binaries; the OS is linux
	// OCI makes the manifest, config and layer OCI media types (a registry-ready index member);
	// otherwise Docker v2 types, which every docker-archive loader knows.
	OCI bool
}

// Build makes the one-layer image.
func Build(s Spec) (v1.Image, error) {
	layer, err := buildLayer(s.Files, s.Root)
	if err != nil {
		return nil, err
	}
	var opts []tarball.LayerOption
	base := empty.Image
	if s.OCI {
		opts = append(opts, tarball.WithMediaType(types.OCILayer))
		base = mutate.ConfigMediaType(mutate.MediaType(base, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layer)), nil
	}, opts...)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(base, l)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", s.Arch
	if s.Arch == "arm64" {
		cfg.Variant = "v8"
	}
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cfg.Config.User = s.User
	cfg.Config.WorkingDir = "/"
	if s.Entrypoint != "" {
		cfg.Config.Entrypoint = []string{s.Entrypoint}
	}
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.source": "https://github.com/memifnet/memifnet"}
	return mutate.ConfigFile(img, cfg)
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
