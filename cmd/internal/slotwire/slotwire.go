// Package slotwire wires a memif port into a socket slot: it opens the slot's tmpfs, mounts a
// link directory on <slot>/link, writes port.json and the ready configs beside it
// (internal/peerconf), and takes them out again. The slot is pod-reachable (its pod can write
// anything into it at any time), so every step goes through the slot's open directory
// (internal/safefs) and refuses what it did not make itself. memif-cni and the DRA driver of
// memif-deviceplugin share it: one implementation of the hostile-pod rules.
package slotwire

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/cmd/internal/linkdir"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/peerconf"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// OpenSlot opens the tmpfs memif-deviceplugin mounted for slot under slotsDir. The slots
// directory itself is the node's (no pod can write there); the slot is the pod's, and everything
// in it is resolved beneath the returned directory.
func OpenSlot(slotsDir, slot string) (*safefs.Dir, error) {
	slots, err := safefs.Open(slotsDir)
	if err != nil {
		return nil, err
	}
	defer slots.Close()
	d, err := slots.OpenMountDir(slot)
	if err != nil {
		return nil, fmt.Errorf("%w (memif-deviceplugin mounts a tmpfs for every slot)", err)
	}
	fs, err := d.Statfs()
	if err == nil && fs.Type != unix.TMPFS_MAGIC {
		err = fmt.Errorf("%s is not a tmpfs (file system type %#x)", d.Path(), fs.Type)
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// BindLink mounts the link directory ns/name of dirs (the tmpfs identified by mount) on
// <slot>/link. It mounts only onto a directory it made itself: a symlink, a file, or a non-empty
// directory the pod left there is refused, never followed or mounted over. A bind of this link
// already there (a retried ADD or Prepare) is kept.
func BindLink(slot *safefs.Dir, dirs linkdir.Dirs, ns, name string, mount safefs.Identity) error {
	src, err := dirs.Open(ns, name, mount)
	if err != nil {
		return err
	}
	defer src.Close()
	in, err := slot.Inspect(names.LinkSubdir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("%w; memifnet did not make it", err)
	case in.MountRoot && in.Identity.SameFile(mount):
		return nil
	case in.MountRoot:
		return &safefs.RefusedError{Path: slot.Path() + "/" + names.LinkSubdir, Reason: "another file system is mounted there; memifnet did not mount it"}
	default:
		// A directory left by the pod (or by an undo that could not remove it): take it away
		// if it is empty, so that the mount goes onto a directory made now.
		if err := slot.Remove(names.LinkSubdir); err != nil {
			return &safefs.RefusedError{Path: slot.Path() + "/" + names.LinkSubdir, Reason: "a directory memifnet did not make, and not empty"}
		}
	}
	if _, err := slot.Mkdir(names.LinkSubdir, 0o755); err != nil {
		return err
	}
	_, err = slot.Bind(src, names.LinkSubdir)
	return err
}

// UnbindLink unmounts the link directory from <slot>/link if a bind of the link whose tmpfs is
// mount is there, and removes the directory. What is not the link's bind is left in place: the
// returned error says what was left and why (the caller reports it; the slot's next scrub
// replaces it all). A missing <slot>/link is not an error.
func UnbindLink(slot *safefs.Dir, mount safefs.Identity) error {
	if mount.IsZero() {
		return nil
	}
	in, err := slot.Inspect(names.LinkSubdir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("leaving %s: %w", names.LinkSubdir, err)
	case in.MountRoot && !in.Identity.SameFile(mount):
		return fmt.Errorf("leaving %s: the mount there (%s) is not the link's (%s)", names.LinkSubdir, in.Identity, mount)
	case in.MountRoot:
		if _, err := slot.Unmount(names.LinkSubdir, in.Identity); err != nil {
			return fmt.Errorf("leaving %s mounted: %w", names.LinkSubdir, err)
		}
	}
	if err := slot.Remove(names.LinkSubdir); err != nil {
		return fmt.Errorf("leaving the %s directory: %w", names.LinkSubdir, err)
	}
	return nil
}

// WritePortSpec validates spec and writes it as port.json into the slot, after the port's ready
// configs for DPDK, VPP and libmemif (internal/peerconf), so that an app that sees port.json sees
// them too. Readable by a non-root app in the pod; the secret only binds the socket to the two
// pods that see this directory anyway.
func WritePortSpec(slot *safefs.Dir, spec portspec.PortSpec) error {
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("port spec: %w", err)
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode port spec: %w", err)
	}
	if err := peerconf.WriteSlot(slot, spec); err != nil {
		return err
	}
	return slot.WriteFile(names.PortFile, append(b, '\n'), 0o644, safefs.WriteOptions{})
}

// RemovePortSpec removes port.json and the ready configs beside it from the slot. Whatever the
// pod put at those names goes too (the names are memifnet's); a missing file is no error.
func RemovePortSpec(slot *safefs.Dir) error {
	return errors.Join(slot.Remove(names.PortFile), peerconf.RemoveSlot(slot))
}
