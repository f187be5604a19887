package cluster

import (
	"context"
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/memifnet/memifnet/internal/safefs"
)

//go:embed multus/crd.yaml multus/rbac.yaml multus/thick.yaml
var multusManifests embed.FS

// InstallMultus installs the Multus thin plugin on the node the way its own installer would
// (binary in the CNI bin dir, a kubeconfig, a configuration that wins over the primary network's:
// Paths.MultusConf), plus the NetworkAttachmentDefinition CRD and Multus's RBAC. UninstallMultus (or
// Down) takes it out.
func (c *Cluster) InstallMultus(ctx context.Context) error {
	if c.In.MultusDir == "" {
		return fmt.Errorf("no Multus build (hack/build-tools.sh multus)")
	}
	for _, f := range []string{"crd.yaml", "rbac.yaml"} {
		if err := c.kubectlManifest(ctx, "apply", f); err != nil {
			return err
		}
	}
	if out, err := c.KubectlCmd(ctx, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/network-attachment-definitions.k8s.cni.cncf.io").CombinedOutput(); err != nil {
		return fmt.Errorf("NetworkAttachmentDefinition CRD not established: %v: %s", err, out)
	}
	p := c.Paths
	bin := filepath.Join(p.CNIBinDir, "multus")
	for _, f := range []string{bin, p.multusKubeconfigDir(), p.MultusConf()} {
		if err := c.record(Change{Kind: "path", Path: f}); err != nil {
			return err
		}
	}
	b, err := os.ReadFile(filepath.Join(c.In.MultusDir, "multus"))
	if err != nil {
		return err
	}
	if err := safefs.WriteFile(bin, b, 0o755, safefs.WriteOptions{}); err != nil {
		return err
	}
	if err := os.MkdirAll(p.multusKubeconfigDir(), 0o700); err != nil {
		return err
	}
	kc, err := os.ReadFile(c.Path("multus.kubeconfig"))
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(p.multusKubeconfigDir(), "multus.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return err
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "multus-cni-network",
		"type":       "multus",
		"kubeconfig": kubeconfig,
		"binDir":     p.CNIBinDir,
		"cniDir":     c.Path("multus", "cache"),
		"logFile":    filepath.Join(c.LogDir(), "multus.log"),
		"logLevel":   "verbose",
		"delegates":  []any{c.primaryNetwork()},
	}
	return writeJSON(p.MultusConf(), conf)
}

// UninstallMultus removes what InstallMultus installed.
func (c *Cluster) UninstallMultus(ctx context.Context) error {
	p := c.Paths
	for _, f := range []string{p.MultusConf(), p.multusKubeconfigDir(), filepath.Join(p.CNIBinDir, "multus")} {
		if err := os.RemoveAll(f); err != nil {
			return err
		}
	}
	for _, f := range []string{"rbac.yaml", "crd.yaml"} {
		if err := c.kubectlManifest(ctx, "delete", f, "--ignore-not-found", "--wait=true"); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) kubectlManifest(ctx context.Context, verb, name string, extra ...string) error {
	b, err := multusManifests.ReadFile("multus/" + name)
	if err != nil {
		return err
	}
	cmd := c.KubectlCmd(ctx, append([]string{verb, "-f", "-"}, extra...)...)
	cmd.Stdin = strings.NewReader(string(b))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl %s -f %s: %v: %s", verb, name, err, out)
	}
	return nil
}

// KubectlCmd is kubectl with the admin kubeconfig, run from the repository root.
func (c *Cluster) KubectlCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Kubectl(), args...)
	cmd.Dir = c.Repo
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig())
	return cmd
}
