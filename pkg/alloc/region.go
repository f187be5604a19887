package alloc

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// HugePageSize is the huge page size used for hugetlbfs-backed regions (the x86-64 and arm64
// default).
const HugePageSize = 2 << 20

// Backing selects the memory behind a new region.
type Backing int

const (
	// BackingAuto uses hugepages when the kernel can provide them now, else plain memfd.
	BackingAuto Backing = iota
	// BackingMemfd uses ordinary shared memory.
	BackingMemfd
	// BackingHugepages requires hugepages and fails without them.
	BackingHugepages
)

// Region is a mapped shared memory region. The creator owns its fd and passes it to a peer; a
// peer's region is mapped from the fd it sent.
type Region struct {
	Mem  []byte // the mapping; len(Mem) is the usable size
	Fd   int    // the backing file; -1 once closed
	Huge bool   // backed by hugepages
	// MayFault says touching the mapping can fault (SIGBUS) because of what another holder of the
	// fd (a memif peer) does: the file is not sealed against shrinking, so it can be cut short; or
	// it is on hugetlbfs, where a hole punched into it (fallocate, which only F_SEAL_WRITE would
	// stop) or a page never faulted in is filled on touch only while a free huge page is left.
	// A sealed memfd of ordinary memory cannot fault: a punched hole is refilled with a new page.
	MayFault bool
	// FallbackReason says why BackingAuto used plain memory; empty otherwise.
	FallbackReason string
}

// NewRegion creates, sizes, seals (against shrinking, growing and further seals) and maps a region
// of at least size bytes, faulting every page in so that its creator pays for the memory.
// With BackingAuto it tries hugepages first and falls back to plain memfd, recording why in
// FallbackReason.
func NewRegion(name string, size int, backing Backing) (*Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("create region %s: size %d must be positive", name, size)
	}
	if backing != BackingMemfd {
		r, err := newMemfdRegion(name, roundUp(size, HugePageSize), unix.MFD_HUGETLB)
		if err == nil {
			r.Huge, r.MayFault = true, true
			return r, nil
		}
		if backing == BackingHugepages {
			return nil, err
		}
		r, err2 := newMemfdRegion(name, roundUp(size, os.Getpagesize()), 0)
		if err2 != nil {
			return nil, err2
		}
		r.FallbackReason = err.Error()
		return r, nil
	}
	return newMemfdRegion(name, roundUp(size, os.Getpagesize()), 0)
}

func newMemfdRegion(name string, size int, flags int) (r *Region, err error) {
	kind := "memfd"
	if flags&unix.MFD_HUGETLB != 0 {
		kind = "hugetlbfs memfd"
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|flags)
	if err != nil {
		return nil, fmt.Errorf("create %s region %s: %w", kind, name, err)
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
		}
	}()
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return nil, fmt.Errorf("size %s region %s to %d bytes: %w", kind, name, size, err)
	}
	// A peer that maps the region must never see it shrink under it (it would fault). Growing is
	// sealed too (the size is the announced one), and so is sealing: a peer that added
	// F_SEAL_FUTURE_WRITE would keep every later peer from mapping the region writable.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, regionSeals); err != nil {
		return nil, fmt.Errorf("seal %s region %s: %w", kind, name, err)
	}
	// MAP_POPULATE faults the pages in now rather than on the data path; for hugetlbfs the
	// reservation is made here, so a shortage is an error now and never a SIGBUS later.
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("map %s region %s (%d bytes): %w", kind, name, size, err)
	}
	return &Region{Mem: mem, Fd: fd}, nil
}

// regionSeals are the seals NewRegion puts on its memfds.
const regionSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// ErrRegionTooSmall means a peer's region fd is smaller than the size it announced.
var ErrRegionTooSmall = errors.New("region file is smaller than its announced size")

// MapRegion maps size bytes of a peer's region fd. It takes ownership of fd (closed on error
// too). The file must really be that large: touching a mapping past the end of its file would
// fault, so a peer that lies about the size is refused here. A hugetlbfs file is mapped without a
// reservation (MAP_NORESERVE): pages the peer left out would otherwise be reserved here, out of
// the node's huge pages, for as long as the peer keeps the file, and a sparse region would make
// this side pay for the peer's memory. Such a region MayFault (its holes fill on touch only while
// huge pages are free): touch it only with faults trapped.
func MapRegion(fd int, size uint64) (*Region, error) {
	r, err := mapRegion(fd, size)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return r, nil
}

func mapRegion(fd int, size uint64) (*Region, error) {
	if size == 0 {
		return nil, errors.New("map region: size 0")
	}
	if size > maxMapSize {
		return nil, fmt.Errorf("map region: size %d over the %d-byte limit", size, uint64(maxMapSize))
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("map region: stat fd: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("map region: fd is not a regular file (mode %#o)", st.Mode)
	}
	if uint64(st.Size) < size {
		return nil, fmt.Errorf("map region: %w (%d < %d)", ErrRegionTooSmall, st.Size, size)
	}
	huge, err := fdOnHugetlbfs(fd)
	if err != nil {
		return nil, fmt.Errorf("map region: %w", err)
	}
	flags := unix.MAP_SHARED
	if huge {
		flags |= unix.MAP_NORESERVE
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		return nil, fmt.Errorf("map region of %d bytes: %w", size, err)
	}
	return &Region{Mem: mem, Fd: fd, Huge: huge, MayFault: huge || truncatable(fd)}, nil
}

// maxMapSize bounds a peer's region: descriptor offsets are 32-bit, so nothing past 4 GiB plus one
// largest ring is ever addressed, but zero-copy peers announce whole memory segments; 64 GiB of
// address space is plenty and keeps a hostile size from exhausting it.
const maxMapSize = 64 << 30

// Close unmaps the region and closes its fd.
func (r *Region) Close() error {
	var errs []error
	if r.Mem != nil {
		if err := unix.Munmap(r.Mem); err != nil {
			errs = append(errs, fmt.Errorf("unmap region: %w", err))
		}
		r.Mem = nil
	}
	if r.Fd >= 0 {
		if err := unix.Close(r.Fd); err != nil {
			errs = append(errs, fmt.Errorf("close region fd: %w", err))
		}
		r.Fd = -1
	}
	return errors.Join(errs...)
}

func roundUp(n, to int) int { return (n + to - 1) / to * to }

// fdOnHugetlbfs reports whether fd's file is on hugetlbfs (a hugetlbfs memfd is too).
func fdOnHugetlbfs(fd int) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return false, fmt.Errorf("statfs fd: %w", err)
	}
	return st.Type == unix.HUGETLBFS_MAGIC, nil
}

// truncatable reports whether fd's file can shrink: only a memfd sealed with F_SEAL_SHRINK
// cannot (F_GET_SEALS fails on other files).
func truncatable(fd int) bool {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	return err != nil || seals&unix.F_SEAL_SHRINK == 0
}
