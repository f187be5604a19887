package safefs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/tmpfs"
)

// TmpfsOptions describe a tmpfs mount.
type TmpfsOptions struct {
	// Source names who made the mount; it shows in /proc/self/mountinfo (e.g. "memifnet-slot").
	Source string
	// Limits are its size and inode limits; both are required.
	Limits tmpfs.Limits
	// Mode is the mode of its root directory.
	Mode os.FileMode
}

func (o TmpfsOptions) check() error {
	if o.Limits.Size <= 0 || o.Limits.Inodes <= 0 {
		return fmt.Errorf("safefs: tmpfs needs a size and an inode limit (got %d bytes, %d inodes)", o.Limits.Size, o.Limits.Inodes)
	}
	return nil
}

func (o TmpfsOptions) legacyData() string {
	return fmt.Sprintf("size=%d,nr_inodes=%d,mode=%04o", o.Limits.Size, o.Limits.Inodes, o.Mode.Perm())
}

const mountAttrs = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC

var (
	newMountAPIOnce sync.Once
	haveNewMountAPI bool
	// forceLegacyMount makes mounts go through mount(2) on /proc/self/fd paths even where the
	// new mount API exists (tests).
	forceLegacyMount bool
)

// useNewMountAPI probes once for fsopen/fsmount/move_mount/open_tree (Linux 5.2, and not
// blocked by a seccomp filter).
func useNewMountAPI() bool {
	if forceLegacyMount {
		return false
	}
	newMountAPIOnce.Do(func() {
		fd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
		if err == nil {
			unix.Close(fd)
			haveNewMountAPI = true
		}
	})
	return haveNewMountAPI
}

// procPath names an open fd through /proc, so that mount(2) and umount2(2) act on exactly what
// the fd pins instead of resolving a path again.
func procPath(fd int, rest string) string {
	p := "/proc/self/fd/" + strconv.Itoa(fd)
	if rest != "" {
		p += "/" + rest
	}
	return p
}

// mountTarget opens name beneath d as the target of a new mount: a real directory, reached
// without symlinks, that is not a mount point already.
func (d *Dir) mountTarget(name string) (int, error) {
	if err := checkName(name, false); err != nil {
		return -1, err
	}
	fd, err := resolve(d.fd, name, unix.O_PATH|unix.O_DIRECTORY, 0, strict)
	if errors.Is(err, unix.EXDEV) {
		return -1, refused(d.join(name), "something is mounted there already")
	}
	if err != nil {
		return -1, d.explain(name, "mount on", err)
	}
	return fd, nil
}

// MountTmpfs mounts a new tmpfs (nosuid, nodev, noexec, with o's limits) on the directory name
// beneath d and returns the identity of its root. name must be a directory and not a mount point.
func (d *Dir) MountTmpfs(name string, o TmpfsOptions) (Identity, error) {
	if err := o.check(); err != nil {
		return Identity{}, err
	}
	target, err := d.mountTarget(name)
	if err != nil {
		return Identity{}, err
	}
	defer unix.Close(target)
	if !useNewMountAPI() {
		err := unix.Mount(o.Source, procPath(target, ""), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, o.legacyData())
		if err != nil {
			return Identity{}, fmt.Errorf("safefs: mount tmpfs on %s (%s): %w", d.join(name), o.legacyData(), err)
		}
		id, mounted, err := d.MountAt(name)
		if err == nil && !mounted {
			err = fmt.Errorf("safefs: %s: no mount after mounting tmpfs", d.join(name))
		}
		return id, err
	}
	mfd, err := newTmpfs(o)
	if err != nil {
		return Identity{}, fmt.Errorf("safefs: tmpfs for %s: %w", d.join(name), err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return Identity{}, fmt.Errorf("safefs: mount tmpfs on %s: %w", d.join(name), err)
	}
	id, err := fdIdentity(mfd)
	if err != nil {
		return Identity{}, fmt.Errorf("safefs: tmpfs on %s: %w", d.join(name), err)
	}
	return id, nil
}

// newTmpfs makes a detached tmpfs mount and returns its fd.
func newTmpfs(o TmpfsOptions) (int, error) {
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen: %w", err)
	}
	defer unix.Close(fsfd)
	for _, kv := range [][2]string{
		{"source", o.Source},
		{"size", strconv.FormatInt(int64(o.Limits.Size), 10)},
		{"nr_inodes", strconv.FormatInt(o.Limits.Inodes, 10)},
		{"mode", fmt.Sprintf("%04o", o.Mode.Perm())},
	} {
		if kv[1] == "" {
			continue
		}
		if err := unix.FsconfigSetString(fsfd, kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("tmpfs option %s=%s: %w", kv[0], kv[1], err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, fmt.Errorf("create tmpfs: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, mountAttrs)
	if err != nil {
		return -1, fmt.Errorf("fsmount: %w", err)
	}
	return mfd, nil
}

// Bind mounts src (a directory the caller opened: its own mount root or any directory) on the
// directory name beneath d, without its submounts, and returns the new mount's identity. The mount
// keeps src's mount flags.
func (d *Dir) Bind(src *Dir, name string) (Identity, error) {
	target, err := d.mountTarget(name)
	if err != nil {
		return Identity{}, err
	}
	defer unix.Close(target)
	if !useNewMountAPI() {
		if err := unix.Mount(procPath(src.fd, ""), procPath(target, ""), "", unix.MS_BIND, ""); err != nil {
			return Identity{}, fmt.Errorf("safefs: bind %s on %s: %w", src.path, d.join(name), err)
		}
		id, mounted, err := d.MountAt(name)
		if err == nil && !mounted {
			err = fmt.Errorf("safefs: %s: no mount after binding", d.join(name))
		}
		return id, err
	}
	tree, err := unix.OpenTree(src.fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return Identity{}, fmt.Errorf("safefs: clone %s: %w", src.path, err)
	}
	defer unix.Close(tree)
	if err := unix.MoveMount(tree, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return Identity{}, fmt.Errorf("safefs: bind %s on %s: %w", src.path, d.join(name), err)
	}
	id, err := fdIdentity(tree)
	if err != nil {
		return Identity{}, fmt.Errorf("safefs: bind on %s: %w", d.join(name), err)
	}
	return id, nil
}

// MountAt reports whether name (one component beneath d, not a symlink) is a mount point and, if
// so, the identity of the mounted root.
func (d *Dir) MountAt(name string) (id Identity, mounted bool, err error) {
	in, err := d.Inspect(name)
	if err != nil || !in.MountRoot {
		return Identity{}, false, err
	}
	return in.Identity, true, nil
}

// Info describes a directory entry without following it.
type Info struct {
	Identity
	Mode      uint32 // type and permission bits, as st_mode
	MountRoot bool   // something is mounted there and this is its root
}

// Inspect describes the directory name (one component) beneath d with a single statx that follows
// nothing: cheap enough for a health check of every slot several times a second. A symlink or a
// non-directory is refused.
func (d *Dir) Inspect(name string) (Info, error) {
	if err := checkName(name, false); err != nil {
		return Info{}, err
	}
	stx, err := statx(d.fd, name)
	if err != nil {
		return Info{}, &os.PathError{Op: "statx", Path: d.join(name), Err: err}
	}
	in := Info{Identity: identityOfStatx(&stx), Mode: uint32(stx.Mode)}
	switch stx.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFLNK:
		target := make([]byte, 256)
		n, _ := unix.Readlinkat(d.fd, name, target)
		return Info{}, refused(d.join(name), "it is a symlink (to %q)", target[:max(n, 0)])
	default:
		return Info{}, refused(d.join(name), "it is not a directory")
	}
	if !forceMntIDCompare && stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		in.MountRoot = stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
		return in, nil
	}
	pstx, err := statx(d.fd, "")
	if err != nil {
		return Info{}, fmt.Errorf("safefs: statx %s: %w", d.path, err)
	}
	in.MountRoot = differentMounts(&stx, &pstx)
	return in, nil
}

// Unmount detaches the mount on name (one component beneath d) when its root is want, or any
// mount there when want is zero, and then any further mounts of the same root stacked below it.
// A name that is missing or not a mount point is not an error (unmounted is false). A mount of
// another root is refused: it is not the caller's to remove. The name is passed to umount2
// through the pinned directory (/proc/self/fd/N/name) with UMOUNT_NOFOLLOW, so swapping name for
// a symlink after the check makes the unmount fail instead of detaching what the link names.
func (d *Dir) Unmount(name string, want Identity) (unmounted bool, err error) {
	for i := range 16 {
		id, mounted, err := d.MountAt(name)
		if errors.Is(err, os.ErrNotExist) || err == nil && !mounted {
			return unmounted, nil
		}
		if err != nil {
			return unmounted, err
		}
		if !want.IsZero() && id != want {
			if i > 0 {
				return unmounted, nil // ours are gone; what is below is someone else's
			}
			return false, refused(d.join(name), "the mount there (%s) is not the expected one (%s)", id, want)
		}
		if err := unix.Unmount(procPath(d.fd, name), unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
				return unmounted, nil // gone, or swapped for something that is not a mount
			}
			return unmounted, fmt.Errorf("safefs: unmount %s: %w", d.join(name), err)
		}
		unmounted = true
	}
	return unmounted, fmt.Errorf("safefs: %s: still mounted after 16 unmounts", d.join(name))
}
