package main

import (
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/memifnet/memifnet/hack/internal/imagebuild"
)

// imageDir is where the binaries sit in the image, as in `make image`.
const imageDir = "/usr/local/bin/"

// writeImage builds one image per image platform (hack/internal/imagebuild, as `make image`),
// joins them in an OCI image index and writes it to out as an OCI archive: a tarball of an OCI
// image layout whose index.json points at the index, tagged with the version
// (`skopeo copy --all oci-archive:FILE:VERSION docker://...` or `crane push` publish it
// unchanged, so the digest the bundle pins is the one users pull). It returns the index digest.
func writeImage(c config, b *builds, out string) (string, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range imageArchs {
		files := map[string]string{}
		for name, src := range b.Image[arch] {
			files[imageDir+name] = src
		}
		img, err := imagebuild.Build(imagebuild.Spec{Files: files, Entrypoint: imageDir + "memif-deviceplugin", Arch: arch, OCI: true})
		if err != nil {
			return "", fmt.Errorf("image for linux/%s: %w", arch, err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return "", err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant},
		}})
	}
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp("", "memifnet-oci-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return "", err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": c.Version,
	})); err != nil {
		return "", fmt.Errorf("OCI layout: %w", err)
	}
	if err := tarDir(tmp, out); err != nil {
		return "", err
	}
	return digest.String(), nil
}
