package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// MultusThickImage is the image InstallMultusThick builds from the thick binaries, with the
// binaries where Multus's own image keeps them (/usr/src/multus-cni/bin).
const MultusThickImage = "localhost/memifnet/multus-thick:v4.2.2"

// multusThickConf is the configuration the daemon writes into the node's CNI conf dir.
const multusThickConf = "00-multus.conf"

// ThickOptions choose how InstallMultusThick deploys the daemon.
type ThickOptions struct {
	// StateBidirectional mounts memifnet's state dir into the daemon's view of the host root
	// with mountPropagation Bidirectional, so that the mounts memif-cni makes from inside the
	// daemon reach the host (docs/install.md). Off: Multus's own thick DaemonSet as it ships.
	StateBidirectional bool
	// NamespaceIsolation: a pod may name NetworkAttachmentDefinitions of its own namespace only
	// (and of "default").
	NamespaceIsolation bool
}

// InstallMultusThick installs the Multus thick plugin as Multus's thick DaemonSet does: the
// NetworkAttachmentDefinition CRD, the daemon as a DaemonSet in kube-system (image built from
// the thick build and imported on every node), and multus-shim installed by its init container
// into the node's CNI bin dir; it returns once the daemon has written its configuration in front
// of the node's primary network. UninstallMultusThick takes it out.
func (c *Cluster) InstallMultusThick(ctx context.Context, o ThickOptions) error {
	if c.In.MultusThickDir == "" {
		return fmt.Errorf("no Multus thick build (hack/build-tools.sh multus-thick)")
	}
	tarball := c.Path("multus-thick-image.tar")
	bin := func(name string) string { return filepath.Join(c.In.MultusThickDir, name) }
	args := []string{"run", "./hack/image", "-o", tarball, "-t", MultusThickImage,
		"-entrypoint", "/usr/src/multus-cni/bin/multus-daemon"}
	for src, dst := range map[string]string{"multus-daemon": "multus-daemon", "multus-shim": "multus-shim",
		"install_multus": "install_multus", "passthru-cni": "passthru"} {
		args = append(args, bin(src)+"=/usr/src/multus-cni/bin/"+dst)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = c.Repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("multus thick image: %v: %s", err, out)
	}
	if err := c.ImportImage(ctx, tarball); err != nil {
		return err
	}
	for _, p := range []string{filepath.Join(c.Paths.CNIConfDir, multusThickConf), filepath.Join(c.Paths.CNIBinDir, "multus-shim"),
		filepath.Join(c.Paths.CNIBinDir, "passthru")} {
		if err := c.record(Change{Kind: "path", Path: p}); err != nil {
			return err
		}
	}
	if err := c.InstallNADCRD(ctx); err != nil {
		return err
	}
	return c.ConfigureMultusThick(ctx, o)
}

// InstallNADCRD installs the NetworkAttachmentDefinition CRD (as Multus's deployment does) and
// waits until it is established.
func (c *Cluster) InstallNADCRD(ctx context.Context) error {
	if err := c.kubectlManifest(ctx, "apply", "crd.yaml"); err != nil {
		return err
	}
	if out, err := c.KubectlCmd(ctx, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/network-attachment-definitions.k8s.cni.cncf.io").CombinedOutput(); err != nil {
		return fmt.Errorf("NetworkAttachmentDefinition CRD not established: %v: %s", err, out)
	}
	return nil
}

// ConfigureMultusThick applies the daemon's DaemonSet with o, waits for its rollout and for its
// configuration in front of the node's primary network.
func (c *Cluster) ConfigureMultusThick(ctx context.Context, o ThickOptions) error {
	if err := c.applyThick(ctx, "apply", o); err != nil {
		return err
	}
	if out, err := c.KubectlCmd(ctx, "-n", "kube-system", "rollout", "status", "daemonset/multus-thick",
		"--timeout=3m").CombinedOutput(); err != nil {
		return fmt.Errorf("multus-thick rollout: %v: %s", err, out)
	}
	conf := filepath.Join(c.Paths.CNIConfDir, multusThickConf)
	return node.Poll(ctx, time.Minute, "the Multus daemon's "+conf, func() (bool, error) {
		b, err := os.ReadFile(conf)
		return err == nil && strings.Contains(string(b), `"multus-shim"`), nil
	})
}

// UninstallMultusThick removes what InstallMultusThick installed (the CRD too) and the files
// the daemon and its installer left on the node.
func (c *Cluster) UninstallMultusThick(ctx context.Context) error {
	if err := c.applyThick(ctx, "delete", ThickOptions{}, "--ignore-not-found", "--wait=true"); err != nil {
		return err
	}
	for _, p := range []string{filepath.Join(c.Paths.CNIConfDir, multusThickConf), filepath.Join(c.Paths.CNIBinDir, "multus-shim"),
		filepath.Join(c.Paths.CNIBinDir, "passthru")} {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return c.kubectlManifest(ctx, "delete", "crd.yaml", "--ignore-not-found", "--wait=true")
}

// applyThick runs kubectl verb on multus/thick.yaml filled in for o.
func (c *Cluster) applyThick(ctx context.Context, verb string, o ThickOptions, extra ...string) error {
	b, err := multusManifests.ReadFile("multus/thick.yaml")
	if err != nil {
		return err
	}
	state := ""
	if o.StateBidirectional {
		state = "            - {name: memifnet-state, mountPath: /hostroot" + names.StateDir + ", mountPropagation: Bidirectional}"
	}
	y := strings.NewReplacer("{{CNI_CONF_DIR}}", c.Paths.CNIConfDir, "{{CNI_BIN_DIR}}", c.Paths.CNIBinDir,
		"{{IMAGE}}", MultusThickImage, "{{NAMESPACE_ISOLATION}}", strconv.FormatBool(o.NamespaceIsolation),
		"{{STATE_MOUNT}}", state,
		"{{NETNS_DIR}}", c.Path("containerd", "state", "io.containerd.grpc.v1.cri", "netns")).Replace(string(b))
	cmd := c.KubectlCmd(ctx, append([]string{verb, "-f", "-"}, extra...)...)
	cmd.Stdin = strings.NewReader(y)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl %s multus-thick: %v: %s", verb, err, out)
	}
	return nil
}
