// Command image builds a container image from static binaries without a container engine
// (hack/internal/imagebuild, the one image build path `make release` uses too) and writes it as a
// docker-archive tarball that `ctr images import`, `docker load` and `podman load`
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
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/memifnet/memifnet/hack/internal/imagebuild"
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
	img, err := imagebuild.Build(imagebuild.Spec{Files: files, Root: *root, Entrypoint: *entry, User: *user, Arch: *arch})
	if err != nil {
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
