package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device/cdi"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/deviceplugin/podresources"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/uninstall/owner"
	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/uninstall/teardown"
	"github.com/memifnet/memifnet/internal/names"
)

// uninstall cleans the node: the state dir always (running pods keep their own mounts of what
// they use), then the state dir itself through its parent (Options.StateParentDir), the
// device-info files of the agent and of memif-cni, memifnet's CDI specs and the DRA driver's
// socket directory; memif-cni's binaries only when no memif pod is left, so that the DEL of one
// still running finds its plugin.
func (d *Daemon) uninstall() error {
	inUse, inUseErr := d.devicesInUse()
	err := teardown.Clean(d.opts.StateDir, d.opts.Log)
	if d.opts.StateParentDir != "" && err == nil { // what Clean left keeps the state dir
		err = teardown.RemoveStateDir(d.opts.StateDir, d.opts.StateParentDir, d.opts.Log)
	}
	err = errors.Join(err, teardown.RemoveDevinfo(d.opts.DevinfoDir),
		// memif-cni's files go to the sibling "cni" of the device plugins' "dp" (devinfo.CNIPath).
		teardown.RemoveCNIDevinfo(filepath.Join(filepath.Dir(d.opts.DevinfoDir), "cni")))
	if d.opts.CDIDir != "" {
		err = errors.Join(err, teardown.RemoveCDISpecs(d.opts.CDIDir))
	}
	if d.dra != nil {
		cdiDir := d.opts.CDIDir
		if cdiDir == "" {
			cdiDir = cdi.DefaultDir // newDRA's
		}
		err = errors.Join(err, teardown.RemoveCDISpecs(cdiDir),
			teardown.RemovePluginDir(filepath.Join(d.opts.KubeletDir, "plugins"), d.opts.Config.DRA.Driver(), d.opts.Log))
	}
	switch {
	case d.opts.CNIBinDir == "":
	case inUse > 0 || inUseErr != nil:
		d.opts.Log.Warn("uninstall: memif pods still run on the node (or the kubelet cannot say); memif-cni's binaries stay for their DELs",
			"devicesInUse", inUse, "err", inUseErr, "dir", d.opts.CNIBinDir)
	default:
		err = errors.Join(err, teardown.RemoveBinaries(d.opts.CNIBinDir, d.opts.Log))
	}
	return err
}

// devicesInUse counts the devices that pods on the node hold: the device plugin's, as the
// kubelet's PodResources lists them, and the DRA driver's prepared claims.
func (d *Daemon) devicesInUse() (int, error) {
	n := 0
	if d.dra != nil {
		n += len(d.dra.Prepared())
	}
	pr, err := podresources.New(filepath.Join(d.opts.KubeletDir, names.PodResourcesSocket), d.opts.Log)
	if err != nil {
		return n, err
	}
	defer pr.Close()
	inUse, err := pr.InUse(context.Background())
	for _, r := range d.resources {
		n += len(inUse[r.Name()])
	}
	return n, err
}

// watchOwner starts following the agent's DaemonSet (Options.DaemonSet); nil when there is none
// to follow, and then every stop is a restart.
func (d *Daemon) watchOwner(ctx context.Context) *owner.Watcher {
	ns, name, ok := strings.Cut(d.opts.DaemonSet, "/")
	if !ok {
		return nil
	}
	mk := d.opts.KubeClient
	if mk == nil {
		mk = inClusterClient
	}
	client, err := mk()
	if err == nil {
		return owner.Start(ctx, client, ns, name, d.opts.NodeName, d.opts.Log)
	}
	d.opts.Log.Warn("cannot watch the agent's DaemonSet: an uninstall will leave the node's slots and pools", "err", err)
	return nil
}
