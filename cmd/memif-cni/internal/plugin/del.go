package plugin

import (
	"errors"
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/memifnet/memifnet/cmd/internal/cnierr"
	"github.com/memifnet/memifnet/cmd/internal/devinfo"
	"github.com/memifnet/memifnet/cmd/internal/slotwire"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/config"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/state"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
)

// Del undoes ADD. It never needs the pod, the kubelet or the netns: everything comes from the
// attachment record, and a missing record means there is nothing to undo.
func Del(args *skel.CmdArgs) error {
	conf, err := config.Parse(args.StdinData, false)
	if err != nil {
		return err
	}
	if err := newEnv(conf, args).del(state.Key(args.ContainerID, args.IfName)); err != nil {
		return cniErr(cnierr.DelFailed, "%v", err)
	}
	return nil
}

// del undoes the attachment key and removes its record, under the attachment's lock.
func (e env) del(key string) error {
	// A pod without memif ports, or one torn down while memifnet was being uninstalled (chained,
	// a DEL that began before the conflist lost memif-cni runs after the agent cleaned up).
	if recorded, err := e.st.AnyAttachments(); err != nil || !recorded {
		return err
	}
	lk, err := e.st.LockAttachment(key)
	if err != nil {
		return err
	}
	att, ok, err := e.st.ReadAttachment(key)
	if err != nil || !ok {
		if err == nil {
			return e.st.RemoveAttachment(key, lk) // nothing planned: drop the lock file too
		}
		lk.Unlock()
		return err
	}
	if err := e.attachment(att).undo(); err != nil {
		lk.Unlock()
		return err
	}
	return e.st.RemoveAttachment(key, lk)
}

// undo reverses every step of the plan, newest first; each step tolerates being undone.
func (a *attachment) undo() error {
	var errs []error
	if a.rec.DeviceInfoFile != "" {
		errs = append(errs, devinfo.Remove(a.rec.DeviceInfoFile))
	}
	for i := len(a.rec.Ports) - 1; i >= 0; i-- {
		p := a.rec.Ports[i]
		errs = append(errs, devinfo.Remove(p.DevInfo))
		errs = append(errs, a.unwireSlot(p))
		if p.IPAM {
			dargs := *a.args
			dargs.ContainerID = a.rec.ContainerID
			if err := ipamDel(a.conf, &dargs, p.Name); err != nil {
				errs = append(errs, fmt.Errorf("IPAM DEL for port %s: %w", p.Name, err))
			}
		}
		if p.Link != "" {
			errs = append(errs, a.st.Leave(a.rec.Namespace, p.Link, linkDirs(a.conf), a.key()))
		}
	}
	return errors.Join(errs...)
}

// unwireSlot takes a host port's host side, and port.json and the link mount out of the port's
// slot, but only what is this attachment's: the host side whose description names it, the slot
// while it is claimed by it, with the tmpfs it wrote into. A slot handed to another pod since, or
// wired by a newer sandbox of the same pod, is left alone, its host side included
// (docs/security.md rows 7, 34). What the pod put in its slot is not ours to judge:
// anything that is not what ADD made is left in place and reported on stderr, and the slot's
// next scrub replaces it all.
func (a *attachment) unwireSlot(p state.Port) error {
	if p.SlotMount.IsZero() {
		return nil // ADD stopped before touching the slot (or the host side)
	}
	slk, err := a.st.LockSlot(p.Slot)
	if err != nil {
		return err
	}
	claim, ok, err := a.st.ClaimOf(p.Slot)
	if err != nil {
		slk.Unlock()
		return err
	}
	ours := !ok || claim.Owner == a.key()
	// The host side first: its description names its owner, so an old owner takes its own
	// stale host side even from a slot claimed by another since, and never the live one.
	if err := a.removeHostDesc(p, ours); err != nil || !ours {
		slk.Unlock()
		return err
	}
	if slot, err := openSlot(a.conf, p.Slot); err == nil {
		if id, err := slot.Identity(); err == nil && id == p.SlotMount {
			unwireLink(slot, p)
			if err := slotwire.RemovePortSpec(slot); err != nil {
				warn("slot %s: leaving %s: %v", p.Slot, names.PortFile, err)
			}
		}
		slot.Close()
	}
	// Otherwise the slot is gone or another tmpfs now: nothing of ours is in it.
	return a.st.Release(p.Slot, a.key(), slk)
}

// unwireLink unmounts the link directory from <slot>/link if a bind of the port's link is there
// (ADD may have died between the bind and its record of it) and removes the directory; what is
// not ours is left and reported.
func unwireLink(slot *safefs.Dir, p state.Port) {
	if err := slotwire.UnbindLink(slot, p.LinkMount); err != nil {
		warn("slot %s: link %s: %v", p.Slot, p.Link, err)
	}
}

// warn reports something DEL leaves alone; the runtime logs a plugin's stderr.
func warn(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "memif-cni: "+format+"\n", a...)
}
