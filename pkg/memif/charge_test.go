package memif_test

// What a client can make a server pay for: the server maps the client's regions, and every page
// of them its bursts touch that the client left out is allocated on the server's account. These
// tests play a client that announces more than the server admits, and one whose region is a
// sparse hugetlbfs memfd.

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
	"github.com/memifnet/memifnet/pkg/socket"
)

// sparseMemfd is a memfd of size bytes the caller never touches.
func sparseMemfd(t *testing.T, name string, size int64, flags int) int {
	t.Helper()
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|flags)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	return fd
}

// TestServerRefusesRegionsOverItsLimit: a client announcing more region bytes than the server's
// MaxRegionBytes (in one region or in all) is refused with a DISCONNECT naming the limit; up to
// the limit it is served.
func TestServerRefusesRegionsOverItsLimit(t *testing.T) {
	addr := memiftest.UniqueSocket()
	open(t, memif.Config{Role: memif.RoleServer, Socket: addr, ID: 1, MaxRegionBytes: 1 << 20})
	open(t, memif.Config{Role: memif.RoleServer, Socket: addr, ID: 2}) // the default limit
	before := fdCount(t)
	addRegion := func(p *rawPeer, index uint16, size int64) {
		fd := sparseMemfd(t, "sparse", size, 0)
		defer unix.Close(fd)
		p.send(socket.AddRegion{Index: index, Size: uint64(size)}, fd)
	}

	p := dialRaw(t, addr)
	p.init(1)
	addRegion(p, 0, 512<<10)
	p.expect(socket.TypeAck)
	addRegion(p, 1, 512<<10) // exactly the limit in all
	p.expect(socket.TypeAck)
	addRegion(p, 2, 4096)
	p.expectRefusal("over the server's region limit of 1048576 bytes (MaxRegionBytes): 1052672 in all")
	p.close()

	p = dialRaw(t, addr)
	p.init(1)
	addRegion(p, 0, 2<<20)
	p.expectRefusal("over the server's region limit of 1048576 bytes (MaxRegionBytes): 2097152 in all")
	p.close()

	// The default: a sparse gigabyte costs the client nothing and is refused.
	p = dialRaw(t, addr)
	p.init(2)
	addRegion(p, 0, 1<<30)
	p.expectRefusal("over the server's region limit of 268435456 bytes (MaxRegionBytes)")
	p.close()
	waitFds(t, before)
}

// hugepagesReserved is HugePages_Rsvd of /proc/meminfo: huge pages promised to mappings and not
// yet faulted in.
func hugepagesReserved(t *testing.T) int {
	t.Helper()
	m, err := testutil.Hugepages()
	if err != nil {
		t.Fatal(err)
	}
	return m.Reserved
}

// TestServerReservesNoHugepagesForClient: a client announces a sparse hugetlbfs memfd (64 MiB,
// none of it faulted in) as region 1. A server that maps it with a reservation takes 32 of the
// node's huge pages for as long as the client keeps the memfd, after the connection is gone:
// the reservation belongs to the file. The server maps it without one, and after the disconnect
// holds no mapping and no fd of it.
func TestServerReservesNoHugepagesForClient(t *testing.T) {
	const size, pages = 64 << 20, 32
	testutil.NeedHugepages(t, pages)
	addr := memiftest.UniqueSocket()
	srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr, ID: 7})
	before := fdCount(t)
	p := dialRaw(t, addr)
	p.init(7)
	p.makeMemory()
	p.addRegion()
	huge := sparseMemfd(t, "memif-sparse-huge", size, unix.MFD_HUGETLB)
	defer func() {
		if huge >= 0 {
			unix.Close(huge)
		}
	}()
	p.send(socket.AddRegion{Index: 1, Size: size}, huge)
	p.expect(socket.TypeAck)
	p.addRings()
	p.connectAs("raw")
	if err := waitUp(t, srv); err != nil {
		t.Fatal(err)
	}
	if n := mappingsOf(t, "memif-sparse-huge"); n != 1 {
		t.Fatalf("%d mappings of the client's hugetlbfs region while connected, want the server's one", n)
	}
	p.send(socket.Disconnect{Reason: "bye"}, -1)
	p.close()
	waitFds(t, before+1) // +1: the client still holds its hugetlbfs memfd
	if n := mappingsOf(t, "memif-sparse-huge"); n != 0 {
		t.Fatalf("%d mappings of the client's region left after the disconnect", n)
	}
	// What the server reserved would go only when the file does: close it and look. The two
	// readings are microseconds apart, so other processes' huge pages hardly move in between.
	held := hugepagesReserved(t)
	unix.Close(huge)
	huge = -1
	if freed := held - hugepagesReserved(t); freed >= pages {
		t.Fatalf("closing the client's memfd released %d reserved huge pages: the server had reserved them, and kept them after the disconnect", freed)
	}
}

// mappingsOf counts this process's mappings of memfds named name.
func mappingsOf(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "/memfd:"+name+" ")
}
