package memif_test

// A peer that cuts short a region it holds the fd of (one not sealed against shrinking) makes
// the other side's next touch of that memory fault with SIGBUS. These tests play it both ways and
// check that the faulting side takes the link down with a reason instead of dying.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/pkg/alloc"
	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

// makeUnsealedMemory is makeMemory on a memfd without F_SEAL_SHRINK: the raw peer can truncate it.
func (p *rawPeer) makeUnsealedMemory() {
	p.t.Helper()
	rs := ring.Size(rawLog2, 64)
	size := 2*rs + 2*(1<<rawLog2)*rawBufSize
	fd, err := unix.MemfdCreate("unsealed", unix.MFD_CLOEXEC)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		p.t.Fatal(err)
	}
	r, err := alloc.MapRegion(fd, uint64(size))
	if err != nil {
		p.t.Fatal(err)
	}
	if !r.MayFault {
		p.t.Fatal("an unsealed memfd is reported sealed")
	}
	p.region = r
	for k := range 2 {
		rg, err := ring.New(r.Mem[k*rs:], rawLog2, 64)
		if err != nil {
			p.t.Fatal(err)
		}
		rg.SetCookie(ring.Cookie)
		p.rings = append(p.rings, rg)
		efd, _ := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		p.efds = append(p.efds, efd)
	}
}

// sendRaw puts one packet on the raw client's S2M ring.
func (p *rawPeer) sendRaw(seq uint16, payload []byte) {
	off := p.bufOffset(0, int(seq)&(1<<rawLog2-1))
	copy(p.region.Mem[off:], payload)
	*p.rings[0].At(seq) = ring.Desc{Region: 0, Length: uint32(len(payload)), Offset: off}
	p.rings[0].PublishHead(seq + 1)
}

// TestServerSurvivesClientTruncatingItsRegion: a hostile client passes an unsealed memfd, then
// truncates it. The Go server's next burst faults inside the region: it must not crash, must send
// the client a DISCONNECT naming the fault, report it in Err, and serve the next client.
func TestServerSurvivesClientTruncatingItsRegion(t *testing.T) {
	addr := memiftest.UniqueSocket()
	srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr, ID: 7})
	before := fdCount(t)
	p := dialRaw(t, addr)
	p.init(7)
	p.makeUnsealedMemory()
	p.handshake()
	if err := waitUp(t, srv); err != nil {
		t.Fatal(err)
	}
	rx := srv.RxQueue(0)
	buf := [][]byte{make([]byte, 0, rawBufSize)}
	p.sendRaw(0, []byte("before the cut"))
	if n := rx.RxBurst(buf); n != 1 || string(buf[0]) != "before the cut" {
		t.Fatalf("RxBurst = %d %q", n, buf[0])
	}
	// The cut. From here on the raw peer must not touch its own mapping either.
	if err := unix.Ftruncate(p.region.Fd, 0); err != nil {
		t.Fatal(err)
	}
	if n := rx.RxBurst(buf); n != 0 {
		t.Fatalf("RxBurst on a cut region = %d", n)
	}
	if n := srv.TxQueue(0).TxBurst([][]byte{[]byte("x")}); n != 0 {
		t.Fatalf("TxBurst on a cut region = %d", n)
	}
	p.expectRefusal("the peer cut the region short")
	p.region.Mem = nil // unmapped by nobody: the region is gone; close only the fd
	p.close()
	deadline := time.Now().Add(5 * time.Second)
	var fe *memif.FaultError
	for !errors.As(srv.Err(), &fe) {
		if time.Now().After(deadline) {
			t.Fatalf("server Err = %v, want a FaultError", srv.Err())
		}
		time.Sleep(time.Millisecond) // polling Err: the disconnect runs on the control goroutine
	}
	if fe.Region != 0 {
		t.Fatalf("fault in region %d, want 0", fe.Region)
	}
	waitFds(t, before)

	// The next client is served as if nothing happened.
	cli := open(t, memif.Config{Role: memif.RoleClient, Socket: addr, ID: 7})
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	want := []byte("after the cut")
	if n := cli.TxQueue(0).TxBurst([][]byte{want}); n != 1 {
		t.Fatalf("TxBurst = %d", n)
	}
	waitPacket(t, rx, want)
}

func waitPacket(t *testing.T, rx *memif.RxQueue, want []byte) {
	t.Helper()
	buf := [][]byte{make([]byte, 0, 2048)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := rx.RxBurstWait(ctx, buf, 100)
	if err != nil || n != 1 || !bytes.Equal(buf[0], want) {
		t.Fatalf("RxBurstWait = %d %q %v, want %q", n, buf[0], err, want)
	}
}

// TestClientSurvivesPeerTruncatingItsPoolUnit: a client whose region is a file (a hugepage pool
// unit: files cannot be sealed) passes its fd to the server; a hostile server truncates it. The
// client must take the link down with the reason, not crash; while the file stays short its
// reconnect attempts fail with a clear error, and once the file is whole again it reconnects.
func TestClientSurvivesPeerTruncatingItsPoolUnit(t *testing.T) {
	unit := filepath.Join(t.TempDir(), "hugepool-n0-000")
	const unitSize = 8 << 20
	if err := os.WriteFile(unit, make([]byte, unitSize), 0o666); err != nil {
		t.Fatal(err)
	}
	srv, cli := memiftest.Pair(t, memif.Config{}, memif.Config{
		NewRegion: func(_ string, size int) (*alloc.Region, error) { return alloc.OpenFileRegion(unit, size) },
	})
	msg := []byte("packet in the pool unit")
	if n := cli.TxQueue(0).TxBurst([][]byte{msg}); n != 1 {
		t.Fatalf("TxBurst = %d", n)
	}
	waitPacket(t, srv.RxQueue(0), msg)

	// The hostile server cuts the client's region (it holds the fd; here: the same file).
	if err := os.Truncate(unit, 0); err != nil {
		t.Fatal(err)
	}
	if n := cli.TxQueue(0).TxBurst([][]byte{msg}); n != 0 {
		t.Fatalf("TxBurst into a cut region = %d", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	var fe *memif.FaultError
	for !errors.As(cli.Err(), &fe) {
		if time.Now().After(deadline) {
			t.Fatalf("client Err = %v, want a FaultError", cli.Err())
		}
		time.Sleep(time.Millisecond) // polling Err: the disconnect runs on the control goroutine
	}
	// While the unit is short, reconnecting fails and says why.
	for !strings.Contains(errString(cli.Err()), "smaller than its announced size") {
		if time.Now().After(deadline) {
			t.Fatalf("client Err = %v, want the short region named", cli.Err())
		}
		time.Sleep(time.Millisecond) // the reconnect loop runs on its own
	}
	if err := os.Truncate(unit, unitSize); err != nil {
		t.Fatal(err)
	}
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	if err := waitUp(t, srv); err != nil {
		t.Fatal(err)
	}
	msg = []byte("the unit is whole again")
	if n := cli.TxQueue(0).TxBurst([][]byte{msg}); n != 1 {
		t.Fatalf("TxBurst = %d", n)
	}
	waitPacket(t, srv.RxQueue(0), msg)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
