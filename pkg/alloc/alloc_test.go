package alloc

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestNewRegionMemfd(t *testing.T) {
	r, err := NewRegion("test", 10000, BackingMemfd)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.Mem) != 3*os.Getpagesize() && len(r.Mem) < 10000 {
		t.Fatalf("size %d", len(r.Mem))
	}
	seals, err := unix.FcntlInt(uintptr(r.Fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		t.Fatalf("seals %#x, %v: want F_SEAL_SHRINK", seals, err)
	}
	if err := unix.Ftruncate(r.Fd, 10); err == nil {
		t.Fatal("sealed region could be shrunk")
	}
	// A peer mapping the same fd sees our writes.
	dup, _ := unix.Dup(r.Fd)
	peer, err := MapRegion(dup, uint64(len(r.Mem)))
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	r.Mem[len(r.Mem)-1] = 0x5a
	if peer.Mem[len(peer.Mem)-1] != 0x5a {
		t.Fatal("mappings do not share memory")
	}
}

func TestNewRegionAutoFallsBackOrUsesHugepages(t *testing.T) {
	r, err := NewRegion("test", 1<<20, BackingAuto)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Huge {
		if len(r.Mem)%HugePageSize != 0 || r.FallbackReason != "" {
			t.Fatalf("hugepage region of %d bytes, reason %q", len(r.Mem), r.FallbackReason)
		}
	} else if r.FallbackReason == "" {
		t.Fatal("plain memory without a fallback reason")
	}
	t.Logf("huge=%v fallback=%q", r.Huge, r.FallbackReason)
}

func TestMapRegionRejectsLies(t *testing.T) {
	fd, _ := unix.MemfdCreate("small", unix.MFD_CLOEXEC)
	unix.Ftruncate(fd, 4096)
	if _, err := MapRegion(fd, 8192); !errors.Is(err, ErrRegionTooSmall) {
		t.Fatalf("announced 8192 of a 4096-byte file: %v", err)
	}
	// MapRegion owns the fd: it was closed on error.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
		t.Fatal("fd left open after a failed map")
	}
	efd, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if _, err := MapRegion(efd, 8); err == nil {
		t.Fatal("mapped an eventfd")
	}
	fd, _ = unix.MemfdCreate("zero", unix.MFD_CLOEXEC)
	if _, err := MapRegion(fd, 0); err == nil {
		t.Fatal("mapped size 0")
	}
	fd, _ = unix.MemfdCreate("huge", unix.MFD_CLOEXEC)
	if _, err := MapRegion(fd, 1<<50); err == nil {
		t.Fatal("mapped 2^50 bytes")
	}
}

func TestPool(t *testing.T) {
	p := NewPool(8, 4096, 2048)
	got := make([]uint32, 5)
	if n := p.Get(got); n != 5 || p.Available() != 3 {
		t.Fatalf("Get = %d, available %d", n, p.Available())
	}
	for i, idx := range got {
		if idx != uint32(i) {
			t.Fatalf("got %v, want 0..4 in order", got)
		}
	}
	more := make([]uint32, 5)
	if n := p.Get(more); n != 3 {
		t.Fatalf("second Get = %d, want the 3 left", n)
	}
	seen := map[uint32]bool{}
	for _, idx := range append(got, more[:3]...) {
		if seen[idx] || idx >= 8 {
			t.Fatalf("index %d handed out twice or out of range", idx)
		}
		seen[idx] = true
	}
	p.Put(got)
	p.Put(more[:3])
	if p.Available() != 8 {
		t.Fatalf("available %d after returning all", p.Available())
	}
	if p.Offset(3) != 4096+3*2048 {
		t.Fatalf("offset %d", p.Offset(3))
	}
	defer func() {
		if recover() == nil {
			t.Fatal("double free not caught")
		}
	}()
	p.Put([]uint32{1})
}

func TestPoolNoAllocs(t *testing.T) {
	p := NewPool(1024, 0, 2048)
	buf := make([]uint32, 32)
	if a := testing.AllocsPerRun(1000, func() { p.Put(buf[:p.Get(buf)]) }); a != 0 {
		t.Fatalf("%v allocs per get/put", a)
	}
}
