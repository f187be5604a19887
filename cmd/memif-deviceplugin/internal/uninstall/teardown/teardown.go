// Package teardown puts a node back as it was before memifnet, once the agent knows it is being
// uninstalled (package owner): it detaches the mounts the agent and memif-cni made under the
// state directory (slot and link tmpfs, hugetlbfs pools, whose min_size keeps hugepages
// reserved) and removes the state tree. Pods still running keep what they use: their containers
// hold their own mounts of their slots and pool units, so the kernel frees each file system (and
// gives the hugepages back) when the last pod using it goes. See docs/deviceplugin.md.
package teardown

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
)

// magic is the statfs type a mount of fstype must have.
var magic = map[string]int64{"tmpfs": unix.TMPFS_MAGIC, "hugetlbfs": unix.HUGETLBFS_MAGIC}

// Clean detaches the agent's mounts under stateDir and removes everything beneath it (and
// stateDir itself when it is not a mount point, as it is in the agent's container, nor in a
// read-only directory). What is not
// the agent's (another file system mounted there, a mount planted inside a slot) is neither
// unmounted nor entered; it is reported in the error and left.
func Clean(stateDir string, log *slog.Logger) error {
	stateDir = filepath.Clean(stateDir)
	root, err := safefs.Open(stateDir)
	if err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	defer root.Close()
	ms, err := safefs.ReadMountinfo()
	if err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	errs := []error{detachAll(root, stateDir, ms, log)}
	names, err := root.Names()
	errs = append(errs, err)
	for _, n := range names {
		errs = append(errs, root.RemoveAll(n))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("teardown %s: %w", stateDir, err)
	}
	// In the agent's container the state dir is a volume's mount point (EBUSY) on a read-only
	// root file system (EROFS, which rmdir checks first): it stays here, and RemoveStateDir
	// removes it through its parent.
	if err := unix.Rmdir(stateDir); err != nil && !errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.EROFS) {
		return fmt.Errorf("teardown: remove %s: %w", stateDir, err)
	}
	log.Info("uninstall: node cleaned", "stateDir", stateDir)
	return nil
}

// detachAll detaches each of the agent's mounts below stateDir, outermost first: detaching a
// slot takes what is mounted inside it (memif-cni's link bind, anything a pod planted there) out
// of the host's view with it, without unmounting any of it anywhere else.
func detachAll(root *safefs.Dir, stateDir string, ms []safefs.MountEntry, log *slog.Logger) error {
	top := map[string]safefs.MountEntry{} // the last mount at a point is the visible one
	for _, m := range ms {
		if strings.HasPrefix(m.Point, stateDir+"/") {
			top[m.Point] = m
		}
	}
	points := make([]string, 0, len(top))
	for p := range top {
		points = append(points, p)
	}
	sort.Slice(points, func(i, j int) bool { return strings.Count(points[i], "/") < strings.Count(points[j], "/") })
	var errs []error
	var done []string
	for _, p := range points {
		if under(p, done) {
			continue
		}
		m := top[p]
		if !names.IsMemifnetMount(m.FSType, m.Source) {
			errs = append(errs, fmt.Errorf("%s: a %s mount of %q is not memifnet's: left", p, m.FSType, m.Source))
			continue
		}
		if err := detach(root, strings.TrimPrefix(p, stateDir+"/"), m.FSType); err != nil {
			errs = append(errs, err)
			continue
		}
		log.Info("uninstall: unmounted", "path", p, "type", m.FSType, "source", m.Source)
		done = append(done, p)
	}
	return errors.Join(errs...)
}

func under(p string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// detach unmounts rel (a path beneath root) after checking, through directories opened without
// following a symlink or crossing a mount, that it is the root of a mount of fstype.
func detach(root *safefs.Dir, rel, fstype string) error {
	parent := root
	if dir := filepath.Dir(rel); dir != "." {
		d, err := root.OpenDir(dir)
		if err != nil {
			return err
		}
		defer d.Close()
		parent = d
	}
	name := filepath.Base(rel)
	id, mounted, err := parent.MountAt(name)
	if err != nil || !mounted {
		return err
	}
	m, err := parent.OpenMountDir(name)
	if err != nil {
		return err
	}
	st, err := m.Statfs()
	m.Close()
	if err != nil {
		return err
	}
	if st.Type != magic[fstype] {
		return fmt.Errorf("%s/%s: file system type %#x is not %s: left", parent.Path(), name, st.Type, fstype)
	}
	_, err = parent.Unmount(name, id)
	return err
}

// RemoveBinaries removes memif-cni's binaries from the node's CNI bin directory: the plugin
// first, as it runs the helper.
func RemoveBinaries(binDir string, log *slog.Logger) error {
	dir, err := safefs.Open(binDir)
	if err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	defer dir.Close()
	for _, name := range []string{"memif-cni", names.PodInfoHelper} {
		if err := dir.Remove(name); err != nil {
			return fmt.Errorf("teardown: %w", err)
		}
		log.Info("uninstall: removed "+name, "dir", binDir)
	}
	return nil
}

// RemoveStateDir removes the state dir itself, emptied by Clean, through parent: the host
// directory that holds it, mounted in the agent's container apart from the state dir's own
// volume. From inside that volume the state dir is a mount point of the container and cannot be
// removed; through its parent it is a plain directory (removing it leaves the container's bind of
// it on a deleted directory, which goes with the container). Only an empty directory goes, and
// only when parent's entry is the very directory the agent cleaned (same device and inode) and
// nothing is mounted on it in this mount namespace: rmdir follows no symlink, and a state dir
// that is itself a mount on the host (made before memifnet) or still holds what Clean left (a
// foreign mount) stays, with an error saying why. A state dir already gone is not an error.
func RemoveStateDir(stateDir, parent string, log *slog.Logger) error {
	stateDir = filepath.Clean(stateDir)
	sd, err := safefs.Open(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	want, err := sd.Identity()
	st, serr := sd.Stat()
	sd.Close()
	if err = errors.Join(err, serr); err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	if st.Nlink == 0 {
		return nil // removed already: the container's view of it is a deleted directory
	}
	p, err := safefs.Open(parent)
	if err != nil {
		return fmt.Errorf("teardown: state dir's parent: %w", err)
	}
	defer p.Close()
	name := filepath.Base(stateDir)
	in, err := p.Inspect(name) // refuses a symlink or a non-directory
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("teardown: %s/%s is missing: --state-dir-parent is not the parent of %s", parent, name, stateDir)
	}
	if err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	if in.MountRoot {
		return fmt.Errorf("teardown: %s/%s is a mount point on the host (not the agent's): left", parent, name)
	}
	if !in.SameFile(want) {
		return fmt.Errorf("teardown: %s/%s (%s) is not the state dir %s (%s): left", parent, name, in.Identity, stateDir, want)
	}
	if err := unix.Unlinkat(p.Fd(), name, unix.AT_REMOVEDIR); err != nil {
		return fmt.Errorf("teardown: remove the state dir %s/%s: %w", parent, name, err)
	}
	log.Info("uninstall: removed the state dir", "stateDir", stateDir, "via", parent)
	return nil
}

// RemovePluginDir removes the DRA driver's socket directory (<kubelet>/plugins/<driver>), which
// the driver made and the kubelet plugin library emptied as it stopped; a directory still holding
// something stays, with an error. A missing one is not an error.
func RemovePluginDir(pluginsDir, driver string, log *slog.Logger) error {
	d, err := safefs.Open(pluginsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	defer d.Close()
	if _, err := d.Inspect(driver); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	if err := unix.Unlinkat(d.Fd(), driver, unix.AT_REMOVEDIR); err != nil {
		return fmt.Errorf("teardown: remove %s/%s: %w", pluginsDir, driver, err)
	}
	log.Info("uninstall: removed the DRA plugin directory", "dir", pluginsDir+"/"+driver)
	return nil
}

// RemoveCDISpecs removes memifnet's CDI spec files from dir: the device plugin's
// (memifnet.io-<resource>.json) and the DRA driver's (memifnet.io-claim_<uid>.json, of claims
// still prepared at the uninstall). Others' specs stay.
func RemoveCDISpecs(dir string) error {
	return removeMatching(dir, strings.ReplaceAll(names.ResourcePrefix, "/", "-"), ".json")
}

// RemoveCNIDevinfo removes memif-cni's device-info files (memifnet-<container>_<if>-<port>-device.json)
// from dir, those of pods still running too: with memif-cni out of the conflist (chained) their
// DELs no longer run it, and nothing reads the files after the ADD (Multus copied them into the
// pod's network-status then), so removing them now is the only way they do not outlive the pods.
func RemoveCNIDevinfo(dir string) error {
	return removeMatching(dir, "memifnet-", "-device.json")
}

// RemoveDevinfo removes the agent's device-info files (memifnet.io-<resource>-<id>-device.json)
// from dir: those of devices pods still hold at the uninstall, which no scrub will remove.
func RemoveDevinfo(dir string) error {
	return removeMatching(dir, strings.ReplaceAll(names.ResourcePrefix, "/", "-"), "-device.json")
}

// removeMatching removes the entries of dir named prefix*suffix (files or symlinks: not what a
// link points to); a missing dir is not an error.
func removeMatching(dir, prefix, suffix string) error {
	d, err := safefs.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	defer d.Close()
	ents, err := d.Names()
	if err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	var errs []error
	for _, n := range ents {
		if strings.HasPrefix(n, prefix) && strings.HasSuffix(n, suffix) {
			errs = append(errs, d.Remove(n))
		}
	}
	return errors.Join(errs...)
}
