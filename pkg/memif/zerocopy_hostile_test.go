package memif_test

// A zero-copy client's application reads and writes pool buffers itself, where no fault is
// trapped: memory it shares with the server must be memory the server cannot make fault.

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/pkg/alloc"
	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
	"github.com/memifnet/memifnet/pkg/socket"
)

// TestZeroCopyClientSurvivesHostileServer: a zero-copy client port opened with OpenPort in a pod
// that was granted a hugepage pool unit. A hostile server tries to truncate, shrink, grow and
// re-seal every region it received: each attempt fails with EPERM. It punches a hole into the
// pool, the one change left to it: the application reads the received packet's bytes as zeros,
// without a fault. The pool unit is not shared at all.
func TestZeroCopyClientSurvivesHostileServer(t *testing.T) {
	unit := filepath.Join(t.TempDir(), "hugepool-n0-000")
	if err := os.WriteFile(unit, make([]byte, 8<<20), 0o666); err != nil {
		t.Fatal(err)
	}
	t.Setenv(portspec.EnvPools, unit)
	addr := memiftest.UniqueSocket()
	ln, err := socket.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	spec := portspec.PortSpec{Version: "1", Name: "east", Role: "client", Mode: "ethernet", Socket: addr,
		Queues: 1, RingSize: 16, BufferSize: 256, ZeroCopy: true, Peer: "host"}
	cli, err := memif.OpenPort(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c := acceptClient(t, ln)
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	if len(c.regs) != 2 {
		t.Fatalf("%d regions, want rings and pool", len(c.regs))
	}
	for k := len(c.regs) - 1; k >= 0; k-- { // the pool first
		r := c.regs[k]
		size := int64(len(r.Mem))
		for _, attack := range []struct {
			name string
			do   func() error
		}{
			{"truncate to 0", func() error { return unix.Ftruncate(r.Fd, 0) }},
			{"shrink by a page", func() error { return unix.Ftruncate(r.Fd, size-4096) }},
			{"grow", func() error { return unix.Ftruncate(r.Fd, 2*size) }},
			{"grow by fallocate", func() error { return unix.Fallocate(r.Fd, 0, size, 4096) }},
			{"seal against writes", func() error {
				_, err := unix.FcntlInt(uintptr(r.Fd), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE)
				return err
			}},
		} {
			if err := attack.do(); !errors.Is(err, unix.EPERM) {
				// Stop here: touching a region cut short would kill the test process.
				t.Fatalf("region %d: %s: %v, want EPERM", k, attack.name, err)
			}
		}
	}

	// The server sends a packet into the first buffer the client armed (a pool buffer).
	pool, m2s := c.regs[1], &c.rings[1]
	if m2s.LoadHead() == 0 || m2s.Descs[0].Region != 1 {
		t.Fatalf("receive ring armed up to %d, first descriptor %+v: want pool buffers", m2s.LoadHead(), m2s.Descs[0])
	}
	want := []byte("a packet in the zero-copy pool")
	d := &m2s.Descs[0]
	copy(pool.Mem[d.Offset:], want)
	d.Length = uint32(len(want))
	m2s.StoreTail(1)
	bufs := make([]memif.Buffer, 4)
	if n := cli.RxQueue(0).RxBurstZC(bufs); n != 1 || !bytes.Equal(bufs[0].Data, want) {
		t.Fatalf("RxBurstZC = %d %q, want %q", n, bufs[0].Data, want)
	}
	// The hole: the application's view now reads as zeros (a fresh page), and never faults.
	if err := unix.Fallocate(pool.Fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, int64(len(pool.Mem))); err != nil {
		t.Fatal(err)
	}
	if got := bufs[0].Data; !bytes.Equal(got, make([]byte, len(want))) {
		t.Fatalf("after the hole the buffer holds %q, want zeros", got)
	}
	cli.RxQueue(0).Release(bufs[:1])
	// The pool unit was never shared: it holds no ring and no packet.
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, make([]byte, len(b))) {
		t.Fatal("the zero-copy port wrote into the pool unit")
	}
}

// TestNewPoolRefusesMemoryThatMayFault: a zero-copy pool on a file (a pool unit) or on hugetlbfs
// memory is refused with the reason, through NewPool and through a zero-copy Config.
func TestNewPoolRefusesMemoryThatMayFault(t *testing.T) {
	unit := filepath.Join(t.TempDir(), "unit")
	if err := os.WriteFile(unit, make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	fromUnit := func(_ string, size int) (*alloc.Region, error) { return alloc.OpenFileRegion(unit, size) }
	const reason = "can fault when the peer truncates it or punches a hole"
	_, err := memif.NewPool(memif.PoolConfig{Name: "p", Pairs: 1, Buffers: 64, BufferSize: 2048, NewRegion: fromUnit})
	if err == nil || !strings.Contains(err.Error(), reason) {
		t.Fatalf("pool on a file: %v, want %q", err, reason)
	}
	_, err = memif.NewPool(memif.PoolConfig{Name: "p", Pairs: 1, Buffers: 64, BufferSize: 2048, Memory: alloc.BackingHugepages})
	if err == nil || !strings.Contains(err.Error(), reason) {
		t.Fatalf("pool on hugepages: %v, want %q", err, reason)
	}
	_, err = memif.Open(memif.Config{Role: memif.RoleClient, Socket: memiftest.UniqueSocket(), ZeroCopy: true,
		NewRegion: fromUnit, Logger: memiftest.QuietLogger()})
	if err == nil || !strings.Contains(err.Error(), reason) {
		t.Fatalf("zero-copy client on a file: %v, want %q", err, reason)
	}
	// The file is free again: the refused region was closed.
	r, err := alloc.OpenFileRegion(unit, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	p, err := memif.NewPool(memif.PoolConfig{Name: "p", Pairs: 1, Buffers: 64, BufferSize: 2048})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
}
