package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/filters/imagetag"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// manifestImage is the image name the manifests use; the bundle replaces it.
const manifestImage = "ghcr.io/memifnet/memifnet"

// overlays are the bundle's install variants: manifests/overlays/<name> to install-<name>.yaml.
var overlays = []string{"chained", "multus", "dra", "cert-manager"}

// bundleFile is an overlay's file in the release.
func bundleFile(overlay string) string { return "install-" + overlay + ".yaml" }

// writeBundle renders each overlay with the kustomize API (what `kubectl apply -k` does) and
// pins every memifnet container image to repo@digest, so the YAML installs exactly the
// release's image whatever tags later point at.
func writeBundle(root, dir, repo, digest string) error {
	for _, o := range overlays {
		y, err := renderPinned(filepath.Join(root, "manifests", "overlays", o), repo, digest)
		if err != nil {
			return fmt.Errorf("overlay %s: %w", o, err)
		}
		head := fmt.Sprintf("# memifnet install bundle, overlay %s (manifests/overlays/%s), image %s@%s\n", o, o, repo, digest)
		if err := os.WriteFile(filepath.Join(dir, bundleFile(o)), append([]byte(head), y...), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func renderPinned(overlay, repo, digest string) ([]byte, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), overlay)
	if err != nil {
		return nil, err
	}
	if err := m.ApplyFilter(imagetag.LegacyFilter{ImageTag: types.Image{Name: manifestImage, NewName: repo, Digest: digest}}); err != nil {
		return nil, err
	}
	y, err := m.AsYaml()
	if err != nil {
		return nil, err
	}
	// A container the filter missed (an image field it does not know) would install whatever
	// the tag says: refuse to ship that.
	pinned := repo + "@" + digest
	for _, l := range strings.Split(string(y), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "image: "); ok && strings.Contains(v, "memifnet/memifnet") && v != pinned {
			return nil, fmt.Errorf("image %q not pinned to %s", v, pinned)
		}
	}
	return y, nil
}
