// Package linkdir makes the directories of pod-to-pod links: <root>/<namespace>/<link>, each its
// own small tmpfs (memif-cni's root is <stateDir>/links, the DRA driver's <stateDir>/dra/links).
// Both pods of a link can write there (the server creates its socket), so the tmpfs bounds what
// they can store to a few files and never the node's disk, and a link made again later under the
// same name gets a new file system that an old tenant's kept descriptor cannot reach.
package linkdir

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/tmpfs"
)

// DefaultLimits hold a link's socket and nothing much else: the directory is the pod's to write.
// memif-cni's linkLimits and the device plugin's dra.linkLimits take them for unset fields.
var DefaultLimits = tmpfs.Limits{Size: 64 << 10, Inodes: 16}

// Bounds are what linkLimits and dra.linkLimits may choose within.
var Bounds = tmpfs.Bounds{Min: tmpfs.Limits{Size: 4 << 10, Inodes: 4}, Max: tmpfs.Limits{Size: 16 << 20, Inodes: 4096}}

// Dirs are the link directories under Root: <stateDir>/links for memif-cni (its state.LinkDirs),
// <stateDir>/dra/links for the DRA driver. Only the agent that owns Root writes the directories;
// pods write only inside a link's tmpfs.
type Dirs struct {
	Root   string
	Limits tmpfs.Limits
}

func (d Dirs) nsDir(ns string, create bool) (*safefs.Dir, error) {
	root, err := safefs.MkdirAllOpen(d.Root, 0o755)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if create {
		return root.MkdirAll(ns, 0o755)
	}
	return root.OpenDir(ns)
}

// Make mounts a new tmpfs (mode 0777: a non-root app creates its socket there) for the link.
func (d Dirs) Make(ns, name string) (safefs.Identity, error) {
	nsd, err := d.nsDir(ns, true)
	if err != nil {
		return safefs.Identity{}, err
	}
	defer nsd.Close()
	if _, err := nsd.Unmount(name, safefs.Identity{}); err != nil { // left by a crash
		return safefs.Identity{}, err
	}
	if _, err := nsd.Mkdir(name, 0o755); err != nil {
		return safefs.Identity{}, err
	}
	return nsd.MountTmpfs(name, safefs.TmpfsOptions{Source: names.LinkMountSource, Limits: d.Limits, Mode: 0o777})
}

// Check says whether the link's tmpfs is still the one Make mounted.
func (d Dirs) Check(ns, name string, mount safefs.Identity) error {
	nsd, err := d.nsDir(ns, false)
	if err != nil {
		return err
	}
	defer nsd.Close()
	in, err := nsd.Inspect(name)
	switch {
	case err != nil:
		return err
	case !in.MountRoot:
		return fmt.Errorf("%s/%s/%s is not mounted", d.Root, ns, name)
	case in.Identity != mount:
		return fmt.Errorf("%s/%s/%s is another mount (%s) than the one made for the link (%s)", d.Root, ns, name, in.Identity, mount)
	}
	return nil
}

// Open opens the link's tmpfs, checking it is the one Make mounted.
func (d Dirs) Open(ns, name string, mount safefs.Identity) (*safefs.Dir, error) {
	if err := d.Check(ns, name, mount); err != nil {
		return nil, err
	}
	nsd, err := d.nsDir(ns, false)
	if err != nil {
		return nil, err
	}
	defer nsd.Close()
	l, err := nsd.OpenMountDir(name)
	if err != nil {
		return nil, err
	}
	if id, err := l.Identity(); err != nil || id != mount {
		l.Close()
		return nil, fmt.Errorf("link %s/%s changed while opening it (%v)", ns, name, err)
	}
	return l, nil
}

// Remove detaches the link's tmpfs (a pod holding a bind of it keeps it until it lets go) and
// removes its mount point. The namespace directory stays: removing it could race with a Make for
// another link of the namespace, which holds only its own link's lock.
func (d Dirs) Remove(ns, name string, mount safefs.Identity) error {
	nsd, err := d.nsDir(ns, false)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer nsd.Close()
	if mount.IsZero() {
		// A record of a memif-cni from before link directories were tmpfs: its directory is a
		// plain one that pods wrote into. Take it away only if it is empty; never descend into it.
		if err := nsd.Remove(name); err != nil && !errors.Is(err, unix.ENOTEMPTY) {
			return err
		}
		return nil
	}
	if _, err := nsd.Unmount(name, mount); err != nil {
		return err
	}
	return nsd.Remove(name)
}

// Current returns the identity of the link's tmpfs as this process sees it, when it is the file
// system recorded (same device and root inode). A mount's unique id is per mount namespace: a node
// agent restarted in a new container sees the same tmpfs, propagated into its namespace, under
// another mount id, so a record made by the previous process is matched by the file system and
// then carries this namespace's id. ok is false when something else, or nothing, is mounted there.
func (d Dirs) Current(ns, name string, recorded safefs.Identity) (id safefs.Identity, ok bool, err error) {
	nsd, err := d.nsDir(ns, false)
	if errors.Is(err, os.ErrNotExist) {
		return safefs.Identity{}, false, nil
	}
	if err != nil {
		return safefs.Identity{}, false, err
	}
	defer nsd.Close()
	in, err := nsd.Inspect(name)
	if errors.Is(err, os.ErrNotExist) {
		return safefs.Identity{}, false, nil
	}
	if err != nil {
		return safefs.Identity{}, false, err
	}
	if !in.MountRoot || !in.Identity.SameFile(recorded) {
		return in.Identity, false, nil
	}
	return in.Identity, true, nil
}

// Clear unmounts whatever is mounted on the link's directory and removes it. Only for a link whose
// tmpfs was never recorded (the agent died between mounting it and writing its record) under a
// name no pod can choose: the DRA driver's link directories are named after claim UIDs, under a
// tree only the agent writes.
func (d Dirs) Clear(ns, name string) error {
	nsd, err := d.nsDir(ns, false)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer nsd.Close()
	if _, err := nsd.Unmount(name, safefs.Identity{}); err != nil {
		return err
	}
	return nsd.Remove(name)
}
