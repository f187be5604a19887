package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// ManifestDirs are the kustomizations whose images the cluster must hold.
var ManifestDirs = []string{"manifests", "manifests/overlays/multus", "manifests/examples"}

// importImages imports the images into every node's containerd that runs (importImagesInto).
func (c *Cluster) importImages(ctx context.Context) error {
	for _, s := range c.Nodes() {
		if d := c.Daemon(daemonName(s.Index, "containerd")); d != nil && d.Alive() {
			if err := c.importImagesInto(ctx, c.ContainerdSockOf(s.Index)); err != nil {
				return fmt.Errorf("node %s: %w", s.Name, err)
			}
		}
	}
	return nil
}

// importImagesInto imports the pause image and the memifnet image (`make image`) into
// the k8s.io namespace of the containerd at sock, and tags the latter with every image name the manifests carry
// after kustomize (ghcr.io/memifnet/memifnet:v0.1.0), so pods start from it with no registry.
func (c *Cluster) importImagesInto(ctx context.Context, sock string) error {
	names, err := c.manifestImages(ctx)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("no image names in %v after kustomize", ManifestDirs)
	}
	pause, err := tarballTag(c.In.PauseImage)
	if err != nil {
		return err
	}
	if err := c.ctr(ctx, sock, "images", "import", c.In.PauseImage); err != nil {
		return err
	}
	src, err := tarballTag(c.In.Image)
	if err != nil {
		return err
	}
	if err := c.ctr(ctx, sock, "images", "import", c.In.Image); err != nil {
		return err
	}
	for _, n := range names {
		if n == src {
			continue
		}
		if err := c.ctr(ctx, sock, "images", "tag", "--force", src, n); err != nil {
			return err
		}
	}
	c.Logf("images: %s (pause), %s from %s as %s", pause, src, c.In.Image, strings.Join(names, ", "))
	if c.In.DPDKImage != "" {
		if err := c.ctr(ctx, sock, "images", "import", c.In.DPDKImage); err != nil {
			return err
		}
		c.Logf("images: %s (DPDK)", c.In.DPDKImage)
	}
	return nil
}

func (c *Cluster) ctr(ctx context.Context, sock string, args ...string) error {
	all := append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)
	out, err := exec.CommandContext(ctx, filepath.Join(c.In.ContainerdDir, "ctr"), all...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

var imageLine = regexp.MustCompile(`(?m)^\s*(?:-\s+)?image:\s*["']?([^"'\s]+)`)

// manifestImages is every distinct image the manifest kustomizations name.
func (c *Cluster) manifestImages(ctx context.Context) ([]string, error) {
	if c.imageNames != nil {
		return c.imageNames, nil
	}
	seen := map[string]bool{}
	for _, d := range ManifestDirs {
		out, err := exec.CommandContext(ctx, c.Kubectl(), "kustomize", filepath.Join(c.Repo, d)).Output()
		if err != nil {
			return nil, fmt.Errorf("kubectl kustomize %s: %w", d, err)
		}
		for _, m := range imageLine.FindAllStringSubmatch(string(out), -1) {
			seen[m[1]] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	c.imageNames = names
	return names, nil
}

// tarballTag is the one tag of a docker-archive tarball (its manifest.json's RepoTags).
func tarballTag(path string) (string, error) {
	out, err := exec.Command("tar", "-xOf", path, "manifest.json").Output()
	if err != nil {
		return "", fmt.Errorf("%s: no manifest.json: %w", path, err)
	}
	m := regexp.MustCompile(`"RepoTags":\s*\[\s*"([^"]+)"`).FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s: manifest.json names no tag", path)
	}
	return string(m[1]), nil
}

// ImportImage imports a docker-archive tarball into every node's containerd (k8s.io namespace)
// as it is tagged (the upgrade step's second build of the memifnet image).
func (c *Cluster) ImportImage(ctx context.Context, tarball string) error {
	for _, s := range c.Nodes() {
		if err := c.ctr(ctx, c.ContainerdSockOf(s.Index), "images", "import", tarball); err != nil {
			return err
		}
	}
	return nil
}
