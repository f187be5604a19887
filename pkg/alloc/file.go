package alloc

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrFileInUse means another process (or another region in this one) holds a pool file.
var ErrFileInUse = errors.New("region file is in use")

// IsHugetlbfs reports whether path lies on a hugetlbfs mount.
func IsHugetlbfs(path string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Type == unix.HUGETLBFS_MAGIC, nil
}

// OpenFileRegion maps size bytes of an existing file, such as a hugepage pool unit the device
// plugin made on hugetlbfs. The file is claimed with an exclusive, non-blocking flock that lives
// as long as the region's fd: memif peers map a region from offset 0, so one file backs exactly
// one region, and two interfaces of a pod must not share a unit. A size of 0 maps the whole
// file. The file is never grown: a pool unit has a fixed size, and growing a hugetlbfs file past
// the pod's pages would fail later with SIGBUS instead of now.
func OpenFileRegion(path string, size int) (r *Region, err error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open region file %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
		}
	}()
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("open region file %s: %w", path, ErrFileInUse)
		}
		return nil, fmt.Errorf("lock region file %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat region file %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("open region file %s: not a regular file (mode %#o)", path, st.Mode)
	}
	if size == 0 {
		size = int(st.Size)
	}
	if size <= 0 {
		return nil, fmt.Errorf("open region file %s: file is empty", path)
	}
	if int64(size) > st.Size {
		return nil, fmt.Errorf("open region file %s: %w (%d < %d)", path, ErrRegionTooSmall, st.Size, size)
	}
	huge, err := IsHugetlbfs(path)
	if err != nil {
		return nil, err
	}
	if huge && size%HugePageSize != 0 {
		size += HugePageSize - size%HugePageSize
		if int64(size) > st.Size {
			return nil, fmt.Errorf("open region file %s: %w (%d bytes is not a whole number of huge pages)", path, ErrRegionTooSmall, st.Size)
		}
	}
	// MAP_POPULATE for the same reason as NewRegion: fault now, not on the data path.
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("map region file %s (%d bytes): %w", path, size, err)
	}
	// A file can never be sealed (only memfds can): it may be cut short by whoever holds it.
	return &Region{Mem: mem, Fd: fd, Huge: huge, MayFault: true}, nil
}
