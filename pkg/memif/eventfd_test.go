package memif_test

// A ring's interrupt eventfd is one open file description shared by both peers, and so is its
// O_NONBLOCK flag. These tests play a peer that clears the flag and fills or leaves empty the
// counter, in both roles: no library call may block on it, and the peer is disconnected with a
// reason naming the eventfd.

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/pkg/alloc"
	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
	"github.com/memifnet/memifnet/pkg/socket"
)

// returnsWithin runs f and fails the test if it has not returned after d: the call blocked.
func returnsWithin(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s blocked for %v", what, d)
	}
}

// clearNonblock clears O_NONBLOCK in the open file description an eventfd shares with the peer.
func clearNonblock(t *testing.T, fd int) {
	t.Helper()
	if err := unix.SetNonblock(fd, false); err != nil {
		t.Fatal(err)
	}
}

// fillCounter writes the largest value an eventfd counter holds: the next write of 1 would block
// (or fail with EAGAIN).
func fillCounter(t *testing.T, fd int) {
	t.Helper()
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], 0xfffffffffffffffe)
	if _, err := unix.Write(fd, b[:]); err != nil {
		t.Fatal(err)
	}
}

// TestHostileClientEventfd: a raw client misuses the eventfds of its rings against a Go server.
func TestHostileClientEventfd(t *testing.T) {
	addr := memiftest.UniqueSocket()
	srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr, ID: 7, MaxSleep: time.Hour})
	before := fdCount(t)
	// armOne gives the server one buffer to send into on the M2S ring, whose receiver (the raw
	// client) leaves MASK_INT clear: the server signals after sending.
	armOne := func(p *rawPeer) {
		m2s := &p.rings[1]
		m2s.Descs[0] = ring.Desc{Offset: p.bufOffset(1, 0), Length: rawBufSize}
		m2s.StoreHead(1)
	}
	for _, tc := range []struct {
		name   string
		attack func(p *rawPeer)
		call   func()
		reason string
	}{
		{"Wait on a ring whose eventfd was made blocking", func(p *rawPeer) { clearNonblock(t, p.efds[0]) }, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_ = srv.RxQueue(0).Wait(ctx)
		}, "interrupt eventfd of S2M ring 0: the peer cleared O_NONBLOCK"},
		{"TxBurst into a full, blocking eventfd", func(p *rawPeer) {
			armOne(p)
			clearNonblock(t, p.efds[1])
			fillCounter(t, p.efds[1])
		}, func() { srv.TxQueue(0).TxBurst([][]byte{[]byte("kick")}) }, "interrupt eventfd of M2S ring 0: the peer cleared O_NONBLOCK"},
		{"TxBurst into a full eventfd", func(p *rawPeer) {
			armOne(p)
			fillCounter(t, p.efds[1])
		}, func() { srv.TxQueue(0).TxBurst([][]byte{[]byte("kick")}) }, "interrupt eventfd of M2S ring 0: its counter is full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := dialRaw(t, addr)
			p.t = t
			p.connect(7)
			if err := waitUp(t, srv); err != nil {
				t.Fatal(err)
			}
			tc.attack(p)
			returnsWithin(t, 10*time.Second, tc.name, tc.call)
			p.expectRefusal(tc.reason)
			p.close()
		})
	}
	waitFds(t, before)

	// The server serves the next client as before, signals included.
	cli := open(t, memif.Config{Role: memif.RoleClient, Socket: addr, ID: 7, MaxSleep: time.Hour})
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	if err := waitUp(t, srv); err != nil {
		t.Fatal(err)
	}
	exchange(t, srv, cli)
	returnsWithin(t, 10*time.Second, "server Close", func() { srv.Close() })
}

// rawServerConn is a raw server's view of a connected Go client: its regions (0 holds the rings)
// and rings, and the rings' eventfds (0 = S2M, 1 = M2S).
type rawServerConn struct {
	*rawPeer
	regs  []*alloc.Region
	rings [2]ring.Ring
	efds  [2]int
}

// acceptClient runs the server's side of a valid handshake with the next Go client.
func acceptClient(t *testing.T, ln *socket.Listener) *rawServerConn {
	t.Helper()
	p := acceptRaw(t, ln, goodHello)
	c := &rawServerConn{rawPeer: p, efds: [2]int{-1, -1}}
	t.Cleanup(func() {
		for _, fd := range c.efds {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
		for _, r := range c.regs {
			r.Close()
		}
	})
	p.expect(socket.TypeInit)
	p.send(socket.Ack{}, -1)
	for {
		_ = p.ctl.SetDeadline(time.Now().Add(10 * time.Second))
		m, fd, err := p.ctl.Recv()
		if err != nil {
			t.Fatal(err)
		}
		switch m := m.(type) {
		case socket.AddRegion:
			r, err := alloc.MapRegion(fd, m.Size)
			if err != nil {
				t.Fatal(err)
			}
			c.regs = append(c.regs, r)
		case socket.AddRing:
			dir := 1 - int(m.Flags&socket.AddRingFlagS2M)
			c.efds[dir] = fd
			if c.rings[dir], err = ring.New(c.regs[m.Region].Mem[m.Offset:], m.Log2RingSize, 64); err != nil {
				t.Fatal(err)
			}
		case socket.Connect:
			p.send(socket.Connected{Name: "raw"}, -1)
			return c
		default:
			t.Fatalf("handshake: got %s", m.Type())
		}
		p.send(socket.Ack{}, -1)
	}
}

// TestHostileServerEventfd: a raw server misuses the eventfds a Go client created and passed it.
func TestHostileServerEventfd(t *testing.T) {
	addr := memiftest.UniqueSocket()
	ln, err := socket.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cli := open(t, memif.Config{Role: memif.RoleClient, Socket: addr, MaxSleep: time.Hour, ReconnectInterval: 10 * time.Millisecond})

	// The client sleeps on its M2S ring's eventfd, which the server made blocking.
	c := acceptClient(t, ln)
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	clearNonblock(t, c.efds[1])
	returnsWithin(t, 10*time.Second, "client Wait", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_ = cli.RxQueue(0).Wait(ctx)
	})
	c.expectRefusal("interrupt eventfd of M2S ring 0: the peer cleared O_NONBLOCK")

	// The client reconnects; now the server fills the S2M ring's eventfd (it leaves MASK_INT
	// clear, so the client signals after sending) and makes it blocking.
	c = acceptClient(t, ln)
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	if c.rings[0].LoadFlags()&ring.FlagMaskInt != 0 {
		t.Fatal("the client masked the server's receive ring: it would never signal")
	}
	clearNonblock(t, c.efds[0])
	fillCounter(t, c.efds[0])
	returnsWithin(t, 10*time.Second, "client TxBurst", func() {
		if n := cli.TxQueue(0).TxBurst([][]byte{[]byte("kick")}); n != 1 {
			t.Errorf("TxBurst = %d", n)
		}
	})
	c.expectRefusal("interrupt eventfd of S2M ring 0: the peer cleared O_NONBLOCK")
	returnsWithin(t, 10*time.Second, "client Close", func() { cli.Close() })
}
