// Command release builds a versioned memifnet release into dist/<version>/ (`make release
// VERSION=v0.x.y`): the multi-platform image as an OCI archive, one install YAML per overlay with
// the image pinned by the index digest, kubectl-memifnet archives per platform with a Krew
// manifest, an SPDX SBOM and SHA256SUMS over all of it. docs/install.md, "Install from a
// release", is the user's side; docs/release.md says what each file is.
//
//	go run ./hack/release -version v0.1.0 [-registry ghcr.io/memifnet] [-o dist]
//
// Nothing here needs a container engine or the network beyond the Go module cache: the images
// come from hack/internal/imagebuild (as `make image`), the bundle from the kustomize API.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

// config is one release's settings (the flags).
type config struct {
	Version  string // v0.x.y (semver with the v)
	Registry string // the image is <Registry>/memifnet
	Root     string // the module's directory
	Out      string // dist: the release goes to Out/Version
	URLBase  string // where the kubectl-memifnet archives are downloaded from (the Krew manifest)
	Vet      bool   // go vet the pure-Go packages for arm64 first
}

// semver is the version form Krew and Helm accept (with the leading v).
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

func run(args []string) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	var c config
	fs.StringVar(&c.Version, "version", "", "release version, e.g. v0.1.0")
	fs.StringVar(&c.Registry, "registry", "ghcr.io/memifnet", "registry path the image is pushed to (the image is REGISTRY/memifnet)")
	fs.StringVar(&c.Root, "C", ".", "the memifnet module directory")
	fs.StringVar(&c.Out, "o", "dist", "output directory (the release goes into OUT/VERSION)")
	fs.StringVar(&c.URLBase, "url", "https://github.com/memifnet/memifnet/releases/download", "download base URL of the release files (the Krew manifest's uri is URL/VERSION/FILE)")
	fs.BoolVar(&c.Vet, "vet", true, "run `GOARCH=arm64 go vet` over ./pkg/... before building")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !semver.MatchString(c.Version) {
		return fmt.Errorf("-version %q: want a semantic version with a leading v, e.g. v0.1.0", c.Version)
	}
	if c.Registry == "" {
		return errors.New("-registry is empty")
	}
	root, err := filepath.Abs(c.Root)
	if err != nil {
		return err
	}
	c.Root = root
	dir, err := release(c)
	if err != nil {
		return err
	}
	fmt.Println(dir)
	return nil
}

// release writes every artifact into Out/Version (emptied first) and returns that directory.
// The binaries are built into a scratch directory next to it and removed at the end: what ships
// is in the image and the archives.
func release(c config) (string, error) {
	dir, err := filepath.Abs(filepath.Join(c.Out, c.Version))
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	scratch, err := os.MkdirTemp(filepath.Dir(dir), ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(scratch)
	if c.Vet {
		if err := vetArm64(c.Root, "./pkg/..."); err != nil {
			return "", err
		}
	}
	b, err := buildAll(c, scratch)
	if err != nil {
		return "", err
	}
	digest, err := writeImage(c, b, filepath.Join(dir, imageArchive(c.Version)))
	if err != nil {
		return "", err
	}
	ref := imageRepo(c.Registry) + "@" + digest
	if err := os.WriteFile(filepath.Join(dir, "IMAGE"), []byte(ref+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := writeBundle(c.Root, dir, imageRepo(c.Registry), digest); err != nil {
		return "", err
	}
	if err := writePlugin(c, b, dir); err != nil {
		return "", err
	}
	if err := writeSBOM(c, b, filepath.Join(dir, sbomFile)); err != nil {
		return "", err
	}
	if err := packageChart(c, dir, imageRepo(c.Registry), digest); err != nil {
		return "", err
	}
	return dir, writeSums(dir)
}

// imageRepo is the image's repository in the registry.
func imageRepo(registry string) string { return registry + "/memifnet" }

// imageArchive is the OCI archive's file name.
func imageArchive(version string) string { return "memifnet-" + version + ".oci.tar" }

// sbomFile is the SBOM's file name.
const sbomFile = "memifnet.spdx.json"
