package safefs

import (
	"errors"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// How a name is resolved beneath a directory.
type policy int

const (
	// strict: no symlink, no magic link, no escape, no mount point anywhere on the way.
	strict policy = iota
	// crossing: as strict, but the last component may be the root of another mount. Used for
	// one-component names only (a slot, a link, a pool: each is its own mount).
	crossing
)

func (p policy) resolveFlags() uint64 {
	f := uint64(unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS)
	if p == strict {
		f |= unix.RESOLVE_NO_XDEV
	}
	return f
}

var (
	openat2Once sync.Once
	haveOpenat2 bool
	// forceWalk makes resolve use the component walk even where openat2 exists (tests).
	forceWalk bool
)

// useOpenat2 probes once whether the kernel (and any seccomp filter) allows openat2.
func useOpenat2() bool {
	if forceWalk {
		return false
	}
	openat2Once.Do(func() {
		fd, err := unix.Openat2(unix.AT_FDCWD, ".", &unix.OpenHow{
			Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH,
		})
		if err == nil {
			unix.Close(fd)
			haveOpenat2 = true
		}
	})
	return haveOpenat2
}

// resolve opens name beneath dirfd with flags (O_CLOEXEC and O_NOFOLLOW are added) under policy
// p. Errors are ELOOP for a symlink, EXDEV for an escape or a mount crossing, ENOTDIR for a
// non-directory on the way, or whatever open(2) says.
func resolve(dirfd int, name string, flags int, mode uint32, p policy) (int, error) {
	flags |= unix.O_CLOEXEC | unix.O_NOFOLLOW
	var fd int
	var err error
	if useOpenat2() {
		fd, err = openat2(dirfd, name, &unix.OpenHow{Flags: uint64(flags), Mode: uint64(mode), Resolve: p.resolveFlags()})
	} else {
		fd, err = walk(dirfd, name, flags, mode, p)
	}
	if err != nil || flags&unix.O_PATH == 0 {
		return fd, err
	}
	// O_PATH|O_NOFOLLOW opens a trailing symlink itself instead of refusing it.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		unix.Close(fd)
		return -1, unix.ELOOP
	}
	return fd, nil
}

// eagainTries bounds the attempts of an openat2 that fails EAGAIN. openat2 asks for a retry
// with EAGAIN when a rename or mount elsewhere raced a scoped ".." lookup (rare, and over at once:
// names here have no ".." at all), but EAGAIN is also EWOULDBLOCK, which an O_NONBLOCK open of a
// file under a lease returns until the lease holder lets go, or the kernel's lease-break-time (45 s
// by default) passes. A pod can take a lease on a file of its own, so retrying until success
// would let it hold an agent in a loop; a few tries tell the two apart.
const eagainTries = 4

// openat2 is unix.Openat2, retried on EINTR and on EAGAIN at most eagainTries times (the last
// error is returned: EWOULDBLOCK when a lease blocks the open).
func openat2(dirfd int, name string, how *unix.OpenHow) (int, error) {
	for again := 0; ; {
		fd, err := unix.Openat2(dirfd, name, how)
		switch {
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EAGAIN):
			if again++; again == eagainTries {
				return fd, err
			}
		default:
			return fd, err
		}
	}
}

// walk is resolve for kernels without openat2: one component at a time, each opened O_PATH with
// O_NOFOLLOW from the fd of its parent, so no path is ever resolved twice. A symlink is ELOOP; a
// component on another mount than its parent is EXDEV (except the last one under crossing).
func walk(dirfd int, name string, flags int, mode uint32, p policy) (int, error) {
	comps := strings.Split(name, "/")
	cur := dirfd
	closeCur := func() {
		if cur != dirfd {
			unix.Close(cur)
		}
	}
	defer func() { closeCur() }()
	for i, c := range comps {
		if c == "" || c == "." || c == ".." {
			return -1, unix.EXDEV
		}
		last := i == len(comps)-1
		var fd int
		var err error
		if last {
			fd, err = unix.Openat(cur, c, flags, mode)
		} else {
			fd, err = unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			// O_PATH|O_NOFOLLOW opens a symlink itself rather than failing.
			unix.Close(fd)
			return -1, unix.ELOOP
		}
		if !last && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(fd)
			return -1, unix.ENOTDIR
		}
		if !(last && p == crossing) {
			root, err := isMountRoot(fd, cur)
			if err != nil {
				unix.Close(fd)
				return -1, err
			}
			if root {
				unix.Close(fd)
				return -1, unix.EXDEV
			}
		}
		closeCur()
		cur = fd
	}
	fd := cur
	cur = dirfd // keep the result open
	return fd, nil
}

// forceMntIDCompare makes isMountRoot compare mount ids even where statx reports
// STATX_ATTR_MOUNT_ROOT (tests).
var forceMntIDCompare bool

// isMountRoot reports whether fd is the root of a mount. parent is the fd of the directory it was
// opened from; it is used when the kernel cannot say directly (before Linux 5.8), by comparing the
// mount ids of the two.
func isMountRoot(fd, parent int) (bool, error) {
	stx, err := statx(fd, "")
	if err != nil {
		return false, err
	}
	if !forceMntIDCompare && stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	pstx, err := statx(parent, "")
	if err != nil {
		return false, err
	}
	return differentMounts(&stx, &pstx), nil
}

// differentMounts compares the mount ids of two statx results (the device numbers on kernels
// before 5.8, which miss a bind mount of the same file system: only a case we refuse anyway).
func differentMounts(a, b *unix.Statx_t) bool {
	const ids = unix.STATX_MNT_ID | unix.STATX_MNT_ID_UNIQUE
	if a.Mask&ids != 0 && a.Mask&ids == b.Mask&ids {
		return a.Mnt_id != b.Mnt_id
	}
	return a.Dev_major != b.Dev_major || a.Dev_minor != b.Dev_minor
}
