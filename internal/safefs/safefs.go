// Package safefs is the one place where memifnet's node agents touch files in a directory tree
// that a pod can write to: a socket slot (mounted read-write into the pod), a link directory
// (shared by the two pods of a link), a hugepage pool unit (mapped and writable by its pod). The
// agents run as root next to tenants who may plant symlinks, swap directories while an agent works
// on them, and keep file descriptors across a scrub, so nothing here ever resolves a path twice or
// follows a link inside such a tree:
//
//   - A Dir is an open directory fd; every name is resolved beneath it with openat2 and
//     RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|RESOLVE_NO_XDEV (or, on a kernel
//     without openat2, one O_NOFOLLOW component at a time with the same checks), so a symlink, a
//     ".." or a mount point on the way is refused, never followed.
//   - Files are written atomically: a temp file with a random name created O_EXCL beside the
//     target, mode and owner set on its fd, then renameat within the opened directory (which
//     replaces a planted symlink instead of writing through it); fsync where a crash must not
//     lose the write.
//   - Mounts go through fds (fsopen/fsmount, open_tree, move_mount) onto a directory that was
//     resolved beneath its Dir, and unmounts detach only a mount whose root is the one the caller
//     expects, named through the pinned parent directory with UMOUNT_NOFOLLOW.
//
// Every refusal wraps ErrRefused and says what was found and why it was refused.
//
// A Dir opened by Open trusts the path it is given: the prefix is the node's own layout (such
// as /var/lib/memifnet/sockets), which no pod can write to. Everything beneath it is distrusted.
package safefs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrRefused is wrapped by every error that refuses a path because it is not what the agent
// expects to find there: a symlink, an escape from the directory, a mount point on the way, a
// file where a directory should be, a mount the caller did not make.
var ErrRefused = errors.New("refused")

// refused builds an error that wraps ErrRefused (and cause, when there is one).
func refused(path, format string, a ...any) error {
	return &RefusedError{Path: path, Reason: fmt.Sprintf(format, a...)}
}

// RefusedError says which path was refused and why.
type RefusedError struct {
	Path   string
	Reason string
}

func (e *RefusedError) Error() string { return "refusing " + e.Path + ": " + e.Reason }

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Identity names a directory independently of its path: its device and inode, and the mount it
// was reached through. Device numbers of tmpfs are reused once a file system is gone and every
// tmpfs root is inode 1, so two tmpfs mounts made one after the other at one path may share device
// and inode; the mount id tells them apart (unique for the machine's uptime from Linux 6.8,
// STATX_MNT_ID_UNIQUE; before, the kernel's reusable mount id).
type Identity struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Mount uint64 `json:"mount"`
}

// IsZero reports whether the identity was never set.
func (i Identity) IsZero() bool { return i == Identity{} }

// SameFile reports whether i and o are the same directory, whatever mount shows it (a bind
// mount shows its source's root).
func (i Identity) SameFile(o Identity) bool { return i.Dev == o.Dev && i.Ino == o.Ino }

func (i Identity) String() string {
	return fmt.Sprintf("dev %d:%d ino %d mount %d", unix.Major(i.Dev), unix.Minor(i.Dev), i.Ino, i.Mount)
}

// statxMask asks for the unique mount id where the kernel has one (the kernel answers
// STATX_MNT_ID_UNIQUE when asked for both) and the reusable one elsewhere.
const statxMask = unix.STATX_BASIC_STATS | unix.STATX_MNT_ID | unix.STATX_MNT_ID_UNIQUE

// statx describes name beneath dirfd (or dirfd itself when name is "") without following it.
func statx(dirfd int, name string) (unix.Statx_t, error) {
	var stx unix.Statx_t
	flags := unix.AT_SYMLINK_NOFOLLOW | unix.AT_NO_AUTOMOUNT
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	err := unix.Statx(dirfd, name, flags, statxMask, &stx)
	return stx, err
}

func identityOfStatx(stx *unix.Statx_t) Identity {
	return Identity{Dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), Ino: stx.Ino, Mount: stx.Mnt_id}
}

// fdIdentity is the identity of what fd refers to.
func fdIdentity(fd int) (Identity, error) {
	stx, err := statx(fd, "")
	if err != nil {
		return Identity{}, err
	}
	return identityOfStatx(&stx), nil
}

// Dir is an open directory. Its methods resolve names beneath it and never outside.
type Dir struct {
	fd   int
	path string // for messages only: never resolved again
}

// Open opens a directory the caller trusts (the node's own layout, not writable by pods). The
// last component must not be a symlink.
func Open(path string) (*Dir, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("safefs: open %s: not an absolute path", path)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		var st unix.Stat_t
		if unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return nil, refused(path, "it is a symlink")
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return &Dir{fd: fd, path: filepath.Clean(path)}, nil
}

// MkdirAllOpen creates a trusted directory and its parents as needed (like os.MkdirAll, newly
// made directories get perm regardless of the umask) and opens it.
func MkdirAllOpen(path string, perm os.FileMode) (*Dir, error) {
	if err := os.MkdirAll(path, perm); err != nil {
		return nil, fmt.Errorf("safefs: %w", err)
	}
	return Open(path)
}

// Close releases the directory.
func (d *Dir) Close() error {
	if d == nil || d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// Path is the path the directory was opened by, for messages.
func (d *Dir) Path() string { return d.path }

// Fd is the directory's file descriptor, valid until Close.
func (d *Dir) Fd() int { return d.fd }

func (d *Dir) join(name string) string { return d.path + "/" + name }

// checkName accepts a relative path of one or more plain components: no empty component, no "."
// or "..", no leading slash. multi says whether more than one component is allowed.
func checkName(name string, multi bool) error {
	if name == "" || strings.HasPrefix(name, "/") {
		return fmt.Errorf("safefs: %q is not a relative name", name)
	}
	comps := strings.Split(name, "/")
	if len(comps) > 1 && !multi {
		return fmt.Errorf("safefs: %q must be a single name", name)
	}
	for _, c := range comps {
		if c == "" || c == "." || c == ".." {
			return fmt.Errorf("safefs: %q is not a clean relative name", name)
		}
	}
	return nil
}

// Identity is the identity of the directory itself.
func (d *Dir) Identity() (Identity, error) {
	id, err := fdIdentity(d.fd)
	if err != nil {
		return Identity{}, fmt.Errorf("safefs: stat %s: %w", d.path, err)
	}
	return id, nil
}

// Stat is fstat of the directory.
func (d *Dir) Stat() (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return st, fmt.Errorf("safefs: stat %s: %w", d.path, err)
	}
	return st, nil
}

// Statfs is fstatfs of the directory: the file system it is on.
func (d *Dir) Statfs() (unix.Statfs_t, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(d.fd, &st); err != nil {
		return st, fmt.Errorf("safefs: statfs %s: %w", d.path, err)
	}
	return st, nil
}

// Lstat describes name (one component) without following it.
func (d *Dir) Lstat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := checkName(name, false); err != nil {
		return st, err
	}
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, &os.PathError{Op: "lstat", Path: d.join(name), Err: err}
	}
	return st, nil
}

// OpenDir opens a directory beneath d. name may have several components; none may be a symlink
// or a mount point.
func (d *Dir) OpenDir(name string) (*Dir, error) {
	if err := checkName(name, true); err != nil {
		return nil, err
	}
	fd, err := resolve(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0, strict)
	if err != nil {
		return nil, d.explain(name, "open", err)
	}
	return &Dir{fd: fd, path: d.join(name)}, nil
}

// OpenMountDir opens name (one component), which must be the root of a mount (a tmpfs slot, a
// link, a hugetlbfs pool): the only step that may cross into another mount.
func (d *Dir) OpenMountDir(name string) (*Dir, error) {
	if err := checkName(name, false); err != nil {
		return nil, err
	}
	fd, err := resolve(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0, crossing)
	if err != nil {
		return nil, d.explain(name, "open", err)
	}
	root, err := isMountRoot(fd, d.fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("safefs: %s: %w", d.join(name), err)
	}
	if !root {
		unix.Close(fd)
		return nil, refused(d.join(name), "it is not a mount point")
	}
	return &Dir{fd: fd, path: d.join(name)}, nil
}

// Mkdir creates directory name (one component) with perm, set on the new directory's fd so the
// umask does not apply. An existing directory is fine and left as it is; anything else there (a
// symlink, a file) is refused.
func (d *Dir) Mkdir(name string, perm os.FileMode) (created bool, err error) {
	if err := checkName(name, false); err != nil {
		return false, err
	}
	err = unix.Mkdirat(d.fd, name, uint32(perm.Perm()))
	switch {
	case err == nil:
		created = true
	case errors.Is(err, unix.EEXIST):
	default:
		return false, &os.PathError{Op: "mkdir", Path: d.join(name), Err: err}
	}
	sub, err := d.OpenDir(name)
	if err != nil {
		return created, err
	}
	defer sub.Close()
	if created {
		if err := unix.Fchmod(sub.fd, uint32(perm.Perm())); err != nil {
			return created, fmt.Errorf("safefs: chmod %s: %w", sub.path, err)
		}
	}
	return created, nil
}

// MkdirAll creates name and missing parents beneath d (each with perm, each refused if it is a
// symlink or not a directory) and opens it.
func (d *Dir) MkdirAll(name string, perm os.FileMode) (*Dir, error) {
	if err := checkName(name, true); err != nil {
		return nil, err
	}
	cur := &Dir{fd: -1, path: d.path}
	parent := d
	for _, c := range strings.Split(name, "/") {
		if _, err := parent.Mkdir(c, perm); err != nil {
			cur.Close()
			return nil, err
		}
		next, err := parent.OpenDir(c)
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur, parent = next, next
	}
	return cur, nil
}

// OpenFile opens a file beneath d (flags as for open(2); O_NOFOLLOW is implied). With O_CREAT the
// new file's mode is set on its fd, so the umask does not apply.
func (d *Dir) OpenFile(name string, flags int, perm os.FileMode) (*os.File, error) {
	if err := checkName(name, true); err != nil {
		return nil, err
	}
	fd, err := resolve(d.fd, name, flags, uint32(perm.Perm()), strict)
	if err != nil {
		return nil, d.explain(name, "open", err)
	}
	f := os.NewFile(uintptr(fd), d.join(name))
	if flags&unix.O_CREAT != 0 {
		if err := f.Chmod(perm.Perm()); err != nil {
			f.Close()
			return nil, fmt.Errorf("safefs: chmod %s: %w", d.join(name), err)
		}
	}
	return f, nil
}

// ReadFile reads a regular file beneath d, at most limit bytes (a pod-written file may be large:
// more than limit is an error, not a truncated read).
func (d *Dir) ReadFile(name string, limit int64) ([]byte, error) {
	f, err := d.OpenFile(name, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safefs: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, refused(d.join(name), "it is not a regular file (%s)", st.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("safefs: read %s: %w", d.join(name), err)
	}
	if int64(len(b)) > limit {
		return nil, refused(d.join(name), "it is larger than %d bytes", limit)
	}
	return b, nil
}

// Remove removes name (one component): a file, a symlink (not what it points to) or an empty
// directory. A missing name is not an error.
func (d *Dir) Remove(name string) error {
	if err := checkName(name, false); err != nil {
		return err
	}
	err := unix.Unlinkat(d.fd, name, 0)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
		err = unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR)
	}
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return &os.PathError{Op: "remove", Path: d.join(name), Err: err}
}

// Rename renames from to to within d (one component each), replacing to if it is a file or a
// symlink.
func (d *Dir) Rename(from, to string) error {
	if err := checkName(from, false); err != nil {
		return err
	}
	if err := checkName(to, false); err != nil {
		return err
	}
	if err := unix.Renameat(d.fd, from, d.fd, to); err != nil {
		return &os.LinkError{Op: "rename", Old: d.join(from), New: d.join(to), Err: err}
	}
	return nil
}

// Sync flushes the directory itself (entries created, renamed or removed in it) to disk.
func (d *Dir) Sync() error {
	if err := unix.Fsync(d.fd); err != nil {
		return fmt.Errorf("safefs: sync %s: %w", d.path, err)
	}
	return nil
}

// explain turns a resolution failure into an error that says what was found at name.
func (d *Dir) explain(name, op string, err error) error {
	p := d.join(name)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV) {
		if what, at := d.describe(name); what != "" {
			return refused(d.join(at), "%s, and %s follows no links and crosses no mounts beneath %s", what, op, d.path)
		}
	}
	switch {
	case errors.Is(err, unix.ELOOP):
		return refused(p, "a symlink is on the way (%s follows no links beneath %s)", op, d.path)
	case errors.Is(err, unix.EXDEV):
		return refused(p, "it leaves %s or crosses a mount point", d.path)
	case errors.Is(err, unix.ENOTDIR):
		return refused(p, "a component is not a directory")
	case errors.Is(err, unix.EWOULDBLOCK):
		// The one way an O_NONBLOCK open of a regular file would block: a lease, which its
		// holder may keep until the kernel's lease-break-time.
		return &os.PathError{Op: op + " (another process holds a lease on it)", Path: p, Err: err}
	}
	return &os.PathError{Op: op, Path: p, Err: err}
}

// describe walks name from d without following anything and reports the first component that
// is a symlink, a mount point or not a directory (for error messages only).
func (d *Dir) describe(name string) (what, at string) {
	cur := d.fd
	defer func() {
		if cur != d.fd {
			unix.Close(cur)
		}
	}()
	comps := strings.Split(name, "/")
	for i, c := range comps {
		at = strings.Join(comps[:i+1], "/")
		fd, err := unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", ""
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return "", ""
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			target := make([]byte, 256)
			n, _ := unix.Readlinkat(cur, c, target)
			unix.Close(fd)
			return fmt.Sprintf("it is a symlink (to %q)", target[:max(n, 0)]), at
		case i < len(comps)-1 && st.Mode&unix.S_IFMT != unix.S_IFDIR:
			unix.Close(fd)
			return "it is not a directory", at
		}
		if root, err := isMountRoot(fd, cur); err == nil && root {
			unix.Close(fd)
			return "it is a mount point", at
		}
		if cur != d.fd {
			unix.Close(cur)
		}
		cur = fd
	}
	return "", ""
}
