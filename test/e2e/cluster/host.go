package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/testutil"
)

// Change is one change the cluster made to the host outside its base directory. Each is written
// to the state file before it is made, so that `cluster down` can undo it even when `cluster up`
// died half way; undoing a change that was never made is a no-op.
type Change struct {
	// Kind is "path" (a file or directory the cluster created: removed, after unmounting what is
	// mounted below it), "iptables" (a rule: deleted), "propagation" (mounts whose propagation
	// was changed: put back), "link" (a network device: deleted), "sysctl" (a /proc/sys file:
	// Args[0], its old value, written back), "route" (a route to Path on the machine: deleted),
	// "cgroup" (a node's cgroup root, Path, in every hierarchy: removed with the kubelet's empty
	// cgroups below it).
	Kind   string      `json:"kind"`
	Path   string      `json:"path,omitempty"`
	Args   []string    `json:"args,omitempty"`
	Mounts []MountProp `json:"mounts,omitempty"`
}

// MountProp is a mount point and its propagation before the cluster changed it.
type MountProp struct {
	Path        string `json:"path"`
	Propagation string `json:"propagation"` // "private", "shared", "slave", "shared,slave", "unbindable"
}

func (c Change) String() string {
	switch c.Kind {
	case "iptables":
		return "iptables " + strings.Join(c.Args, " ")
	case "propagation":
		return fmt.Sprintf("propagation of %d mounts", len(c.Mounts))
	default:
		return c.Kind + " " + c.Path
	}
}

// undo reverts the change.
func (c Change) undo() error {
	switch c.Kind {
	case "path":
		if err := testutil.UnmountAll(c.Path); err != nil {
			return err
		}
		if err := os.RemoveAll(c.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	case "iptables": // Args: table, chain, rule spec
		if len(c.Args) < 3 {
			return fmt.Errorf("iptables change without table, chain and rule")
		}
		args := func(op string) []string { return append([]string{"-t", c.Args[0], op, c.Args[1]}, c.Args[2:]...) }
		if exec.Command("iptables", args("-C")...).Run() != nil {
			return nil // not there
		}
		if out, err := exec.Command("iptables", args("-D")...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %s: %v: %s", strings.Join(args("-D"), " "), err, out)
		}
		return nil
	case "link":
		if _, err := os.Stat(filepath.Join("/sys/class/net", c.Path)); err != nil {
			return nil
		}
		if out, err := exec.Command("ip", "link", "del", c.Path).CombinedOutput(); err != nil {
			return fmt.Errorf("ip link del %s: %v: %s", c.Path, err, out)
		}
		return nil
	case "propagation":
		return restorePropagation(c.Mounts)
	case "route":
		if out, _ := exec.Command("ip", "route", "show", c.Path).Output(); len(strings.TrimSpace(string(out))) == 0 {
			return nil // gone with its device
		}
		if out, err := exec.Command("ip", "route", "del", c.Path).CombinedOutput(); err != nil {
			return fmt.Errorf("ip route del %s: %v: %s", c.Path, err, out)
		}
		return nil
	case "cgroup":
		return removeNodeCgroups(c.Path)
	case "sysctl":
		if len(c.Args) != 1 {
			return fmt.Errorf("sysctl change without its old value")
		}
		return os.WriteFile(c.Path, []byte(c.Args[0]), 0o644)
	}
	return fmt.Errorf("unknown change kind %q", c.Kind)
}

// mountHolding is the mount point path lies on: the deepest mount point that is path or one of
// its ancestors, and of several stacked at that point the last mounted, the one a path reaches.
func mountHolding(all []safefs.MountEntry, path string) (safefs.MountEntry, bool) {
	var best safefs.MountEntry
	found := false
	for _, m := range all {
		under := m.Point == "/" || path == m.Point || strings.HasPrefix(path, m.Point+"/")
		if under && (!found || len(m.Point) >= len(best.Point)) {
			best, found = m, true
		}
	}
	return best, found
}

// sharedMountFor is the mount that path lies on, with its propagation, for makeShared.
func sharedMountFor(path string) (MountProp, error) {
	all, err := safefs.ReadMountinfo()
	if err != nil {
		return MountProp{}, err
	}
	m, ok := mountHolding(all, path)
	if !ok {
		return MountProp{}, fmt.Errorf("no mount holds %s", path)
	}
	return MountProp{Path: m.Point, Propagation: m.Propagation()}, nil
}

// makeShared makes the mount point shared, and only that mount. A container's Bidirectional
// mount (the node agent's /var/lib/memifnet) needs its host path on a shared mount (containerd
// checks the mount the path lies on), and / is private on some machines. Not `mount
// --make-rshared /` as kind's node entrypoint does: that changes every mount on the host, and
// where two are stacked at one point (seen here at /dev/pts and /dev/shm) the hidden one cannot
// be reached by its path to be put back.
func makeShared(point string) error {
	return unix.Mount("", point, "", unix.MS_SHARED, "")
}

// restorePropagation puts back the propagation the mounts had before makeShared. A mount that
// was shared stays shared (in a new peer group: the old one cannot be rejoined); one that has
// gone since is skipped. Mounts are changed one by one, never recursively, so mounts made since
// by someone else keep theirs.
func restorePropagation(before []MountProp) error {
	now, err := safefs.ReadMountinfo()
	if err != nil {
		return err
	}
	present := map[string]string{}
	for _, m := range now {
		present[m.Point] = m.Propagation()
	}
	var errs []error
	for _, m := range before {
		cur, ok := present[m.Path]
		if !ok || cur == m.Propagation {
			continue
		}
		var flags uintptr
		switch m.Propagation {
		case "private":
			flags = unix.MS_PRIVATE
		case "slave":
			flags = unix.MS_SLAVE // a shared slave drops its own peer group, keeps its master
		case "unbindable":
			flags = unix.MS_UNBINDABLE
		default:
			continue // shared (or shared,slave) before: still is
		}
		if err := unix.Mount("", m.Path, "", flags, ""); err != nil {
			errs = append(errs, fmt.Errorf("restore %s propagation of %s: %w", m.Propagation, m.Path, err))
		}
	}
	return errors.Join(errs...)
}
