package cluster

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// Helm builds (or reuses) the helm CLI of hack/build-tools.sh (helm.sh/helm/v4 at the version
// pinned there, in its own scratch module) and returns its path.
func Helm(ctx context.Context, repo string, progress io.Writer) (string, error) {
	dir, err := runScript(ctx, repo, progress, "hack/build-tools.sh", "helm")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "helm"), nil
}

// HelmCmd is the helm binary helm against the cluster, run from the repository (chart paths are
// relative to it), with its configuration, cache and data under the cluster's directory.
func (c *Cluster) HelmCmd(ctx context.Context, helm string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Dir = c.Repo
	home := c.Path("helm")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	return cmd
}
