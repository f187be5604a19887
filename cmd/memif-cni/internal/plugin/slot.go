package plugin

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/cmd/memif-cni/internal/config"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/linkdir"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/state"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
)

// maxPortFile bounds what CHECK reads back from a slot: a pod may have put anything there.
const maxPortFile = 64 << 10

// ErrRefused is the code of an ADD that found something in the pod's slot that memif-cni did
// not make (a symlink, a file, a mount) where it was about to write or mount.
const ErrRefused uint = 103

// store is the plugin's state store for conf.
func store(conf *config.NetConf) state.Store {
	return state.Store{Dir: conf.StoreDir(), Boot: bootID()}
}

// bootID identifies this boot of the node; "" if the kernel does not say.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func linkDirs(conf *config.NetConf) linkdir.Dirs {
	return linkdir.Dirs{Root: conf.LinksDir(), Limits: linkdir.Limits{Bytes: conf.LinkLimits.Bytes, Inodes: conf.LinkLimits.Inodes}}
}

// openSlot opens the tmpfs memif-deviceplugin mounted for slot. The slots directory itself is
// the node's (no pod can write there); the slot is the pod's, and everything in it is resolved
// beneath the returned directory.
func openSlot(conf *config.NetConf, slot string) (*safefs.Dir, error) {
	slots, err := safefs.Open(conf.SlotsDir())
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

// bindLink mounts the link's directory on <slot>/link. It mounts only onto a directory it made
// itself: a symlink, a file, or a non-empty directory the pod left there is refused, never
// followed or mounted over. A bind of this link already there (a retried ADD) is kept.
func bindLink(slot *safefs.Dir, dirs linkdir.Dirs, ln state.Link) error {
	src, err := dirs.Open(ln.Namespace, ln.Name, ln.Mount)
	if err != nil {
		return err
	}
	defer src.Close()
	in, err := slot.Inspect(names.LinkSubdir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("%w; memif-cni did not make it", err)
	case in.MountRoot && in.Identity.SameFile(ln.Mount):
		return nil
	case in.MountRoot:
		return &safefs.RefusedError{Path: slot.Path() + "/" + names.LinkSubdir, Reason: "another file system is mounted there; memif-cni did not mount it"}
	default:
		// A directory left by the pod (or by an undo that could not remove it): take it away
		// if it is empty, so that the mount goes onto a directory made now.
		if err := slot.Remove(names.LinkSubdir); err != nil {
			return &safefs.RefusedError{Path: slot.Path() + "/" + names.LinkSubdir, Reason: "a directory memif-cni did not make, and not empty"}
		}
	}
	if _, err := slot.Mkdir(names.LinkSubdir, 0o755); err != nil {
		return err
	}
	_, err = slot.Bind(src, names.LinkSubdir)
	return err
}

// refusal turns a refused path into a CNI error that says what was refused; other errors pass.
func refusal(err error, format string, a ...any) error {
	if errors.Is(err, safefs.ErrRefused) {
		return cniErr(ErrRefused, "refused a planted file", "%s: %v", fmt.Sprintf(format, a...), err)
	}
	return err
}

// isDNSLabel reports whether s is 1-63 characters of [a-z0-9-], alphanumeric at both ends: what
// Kubernetes namespaces and the device plugin's slot IDs are. Both become directory names.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
