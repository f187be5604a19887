package memif_test

// The malicious-peer suite: a hand-driven peer built from pkg/socket, pkg/alloc and the ring
// layout sends each kind of bad message and bad descriptor. Each must be refused with a DISCONNECT
// naming the reason, or dropped and counted, while the process stays healthy and leaks no fds.

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/pkg/alloc"
	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
	"github.com/memifnet/memifnet/pkg/socket"
)

// rawPeer is a memif peer driven message by message.
type rawPeer struct {
	t      *testing.T
	ctl    *socket.Conn
	region *alloc.Region
	rings  []ring.Ring // 0 = S2M, 1 = M2S (client layout below)
	efds   []int
}

const (
	rawLog2    = 4
	rawBufSize = 256
)

func dialRaw(t *testing.T, addr string) *rawPeer {
	t.Helper()
	ctl, err := socket.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &rawPeer{t: t, ctl: ctl}
	t.Cleanup(p.close)
	m := p.recv()
	if _, ok := m.(socket.Hello); !ok {
		t.Fatalf("first message %s, want HELLO", m.Type())
	}
	return p
}

func (p *rawPeer) close() {
	p.ctl.Close()
	for _, fd := range p.efds {
		unix.Close(fd)
	}
	p.efds = nil
	if p.region != nil {
		p.region.Close()
		p.region = nil
	}
}

func (p *rawPeer) recv() socket.Msg {
	p.t.Helper()
	_ = p.ctl.SetDeadline(time.Now().Add(10 * time.Second))
	m, fd, err := p.ctl.Recv()
	if fd >= 0 {
		unix.Close(fd)
	}
	if err != nil {
		p.t.Fatalf("raw peer receive: %v", err)
	}
	return m
}

func (p *rawPeer) send(m socket.Msg, fd int) {
	p.t.Helper()
	if err := p.ctl.Send(m, fd); err != nil {
		p.t.Fatalf("raw peer send %s: %v", m.Type(), err)
	}
}

func (p *rawPeer) expect(want socket.MsgType) socket.Msg {
	p.t.Helper()
	m := p.recv()
	if m.Type() != want {
		p.t.Fatalf("got %#v, want %s", m, want)
	}
	return m
}

// expectRefusal waits for a DISCONNECT whose reason contains substr, then for the peer to close.
func (p *rawPeer) expectRefusal(substr string) {
	p.t.Helper()
	m := p.recv()
	d, ok := m.(socket.Disconnect)
	if !ok || !strings.Contains(d.Reason, substr) {
		p.t.Fatalf("got %#v, want DISCONNECT with %q", m, substr)
	}
	_ = p.ctl.SetDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := p.ctl.Recv(); !errors.Is(err, io.EOF) {
		p.t.Fatalf("connection not closed after DISCONNECT: %v", err)
	}
}

func (p *rawPeer) init(id uint32) {
	p.t.Helper()
	p.send(socket.Init{Version: socket.Version, ID: id, Name: "raw"}, -1)
	p.expect(socket.TypeAck)
}

// makeMemory builds a one-region client layout with one S2M and one M2S ring of 2^rawLog2 slots.
func (p *rawPeer) makeMemory() {
	p.t.Helper()
	rs := ring.Size(rawLog2, 64)
	size := 2*rs + 2*(1<<rawLog2)*rawBufSize
	r, err := alloc.NewRegion("raw", size, alloc.BackingMemfd)
	if err != nil {
		p.t.Fatal(err)
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

func (p *rawPeer) bufOffset(dir, slot int) uint32 {
	return uint32(2*ring.Size(rawLog2, 64) + (dir*(1<<rawLog2)+slot)*rawBufSize)
}

func (p *rawPeer) ringMsg(dir int) socket.AddRing {
	m := socket.AddRing{Index: 0, Region: 0, Offset: uint32(dir * ring.Size(rawLog2, 64)), Log2RingSize: rawLog2}
	if dir == 0 {
		m.Flags = socket.AddRingFlagS2M
	}
	return m
}

// connect runs a complete, valid handshake as a client.
func (p *rawPeer) connect(id uint32) {
	p.t.Helper()
	p.init(id)
	p.makeMemory()
	p.handshake()
}

// handshake is the rest of a valid client's handshake once its memory is made (makeMemory or
// makeUnsealedMemory): region 0, both rings, CONNECT, each acknowledged.
func (p *rawPeer) handshake() {
	p.t.Helper()
	p.addRegion()
	p.addRings()
	p.connectAs("raw")
}

// addRegion announces p.region as region 0 and expects its ACK.
func (p *rawPeer) addRegion() {
	p.t.Helper()
	p.send(socket.AddRegion{Index: 0, Size: uint64(len(p.region.Mem))}, p.region.Fd)
	p.expect(socket.TypeAck)
}

// addRings announces both rings with their eventfds, each
// acknowledged.
func (p *rawPeer) addRings() {
	p.t.Helper()
	for dir := range 2 {
		p.send(p.ringMsg(dir), p.efds[dir])
		p.expect(socket.TypeAck)
	}
}

// connectAs sends CONNECT with the interface name and expects CONNECTED.
func (p *rawPeer) connectAs(name string) {
	p.t.Helper()
	p.send(socket.Connect{Name: name}, -1)
	p.expect(socket.TypeConnected)
}

func fdCount(t *testing.T) int {
	t.Helper()
	return testutil.OpenFds(t)
}

// waitFds waits until the process has at most want fds open (connection goroutines close theirs
// a moment after the peer sees the DISCONNECT).
func waitFds(t *testing.T, want int) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, fmt.Sprintf("at most %d fds open (more: a leak)", want), func() bool { return fdCount(t) <= want })
}

func TestHostileClientMessages(t *testing.T) {
	addr := memiftest.UniqueSocket()
	srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr, ID: 7, HandshakeTimeout: 300 * time.Millisecond})
	memfd := func(size int64) int {
		fd, _ := unix.MemfdCreate("bad", unix.MFD_CLOEXEC)
		unix.Ftruncate(fd, size)
		return fd
	}
	cases := []struct {
		name   string
		run    func(p *rawPeer)
		reason string
	}{
		{"wrong version", func(p *rawPeer) { p.send(socket.Init{Version: 0x0100, ID: 7}, -1) }, "unsupported protocol version"},
		{"not INIT first", func(p *rawPeer) { p.send(socket.AddRegion{Size: 4096}, -1) }, "expected INIT"},
		{"INIT with fd", func(p *rawPeer) {
			fd := memfd(4096)
			defer unix.Close(fd)
			p.send(socket.Init{Version: socket.Version, ID: 7}, fd)
		}, "must not carry"},
		{"unknown id", func(p *rawPeer) { p.send(socket.Init{Version: socket.Version, ID: 8}, -1) }, "ID not found"},
		{"region without fd", func(p *rawPeer) { p.init(7); p.send(socket.AddRegion{Size: 4096}, -1) }, "missing region fd"},
		{"region out of order", func(p *rawPeer) {
			p.init(7)
			fd := memfd(4096)
			defer unix.Close(fd)
			p.send(socket.AddRegion{Index: 1, Size: 4096}, fd)
		}, "out of order"},
		{"region larger than its file", func(p *rawPeer) {
			p.init(7)
			fd := memfd(4096)
			defer unix.Close(fd)
			p.send(socket.AddRegion{Size: 1 << 20}, fd)
		}, "smaller than its announced size"},
		{"region fd not a file", func(p *rawPeer) {
			p.init(7)
			efd, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
			defer unix.Close(efd)
			p.send(socket.AddRegion{Size: 8}, efd)
		}, "not a regular file"},
		{"region of size 0", func(p *rawPeer) {
			p.init(7)
			fd := memfd(4096)
			defer unix.Close(fd)
			p.send(socket.AddRegion{Size: 0}, fd)
		}, "size 0"},
		{"too many regions", func(p *rawPeer) {
			p.init(7)
			fd := memfd(4096)
			defer unix.Close(fd)
			for k := range 256 {
				p.send(socket.AddRegion{Index: uint16(k), Size: 4096}, fd)
				p.expect(socket.TypeAck)
			}
			p.send(socket.AddRegion{Index: 256, Size: 4096}, fd)
		}, "out of order"},
	}
	ringCase := func(name string, mutate func(*socket.AddRing), withFd bool, reason string) {
		cases = append(cases, struct {
			name   string
			run    func(p *rawPeer)
			reason string
		}{name, func(p *rawPeer) {
			p.init(7)
			p.makeMemory()
			p.addRegion()
			m := p.ringMsg(0)
			mutate(&m)
			fd := -1
			if withFd {
				fd = p.efds[0]
			}
			p.send(m, fd)
		}, reason})
	}
	ringCase("ring without eventfd", func(*socket.AddRing) {}, false, "missing ring eventfd")
	// A ring's interrupt fd that is no eventfd: Wait would spin on it or block for ever.
	notEventfd := func(name string, mk func() int, reason string) {
		cases = append(cases, struct {
			name   string
			run    func(p *rawPeer)
			reason string
		}{name, func(p *rawPeer) {
			p.init(7)
			p.makeMemory()
			p.addRegion()
			fd := mk()
			defer unix.Close(fd)
			p.send(p.ringMsg(0), fd)
		}, reason})
	}
	notEventfd("ring interrupt fd is a file", func() int { return memfd(4096) }, "ring interrupt fd: it is /memfd:bad")
	notEventfd("ring interrupt fd is a pipe", func() int {
		var fds [2]int
		_ = unix.Pipe2(fds[:], unix.O_CLOEXEC)
		unix.Close(fds[1])
		return fds[0]
	}, "ring interrupt fd: it is pipe:")
	notEventfd("ring interrupt fd is a socket", func() int {
		fds, _ := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		unix.Close(fds[1])
		return fds[0]
	}, "ring interrupt fd: it is socket:")
	notEventfd("ring interrupt fd is an epoll fd", func() int {
		fd, _ := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		return fd
	}, "ring interrupt fd: it is anon_inode:[eventpoll], not an eventfd")
	ringCase("ring in unknown region", func(m *socket.AddRing) { m.Region = 1 }, true, "only 1 regions")
	ringCase("ring past region end", func(m *socket.AddRing) { m.Offset = 1 << 20 }, true, "ends past region")
	ringCase("ring offset overflowing 32 bits", func(m *socket.AddRing) { m.Offset = 0xffffff80 }, true, "ends past region")
	ringCase("ring log2 0", func(m *socket.AddRing) { m.Log2RingSize = 0 }, true, "log2 ring size 0")
	ringCase("ring log2 16", func(m *socket.AddRing) { m.Log2RingSize = 16 }, true, "log2 ring size 16")
	ringCase("ring private header", func(m *socket.AddRing) { m.PrivateHdrSize = 64 }, true, "private header")
	ringCase("ring index over queues", func(m *socket.AddRing) { m.Index = 1 }, true, "out of order")
	ringCase("ring misaligned", func(m *socket.AddRing) { m.Offset = 4 }, true, "aligned")
	cases = append(cases,
		struct {
			name   string
			run    func(p *rawPeer)
			reason string
		}{"connect without rings", func(p *rawPeer) {
			p.init(7)
			p.send(socket.Connect{}, -1)
		}, "at least one each"},
		struct {
			name   string
			run    func(p *rawPeer)
			reason string
		}{"bad cookie", func(p *rawPeer) {
			p.init(7)
			p.makeMemory()
			p.rings[1].SetCookie(0xbadc0de)
			p.addRegion()
			p.addRings()
			p.send(socket.Connect{}, -1)
		}, "cookie"},
		struct {
			name   string
			run    func(p *rawPeer)
			reason string
		}{"HELLO from a client", func(p *rawPeer) { p.init(7); p.send(socket.Hello{}, -1) }, "unexpected HELLO"},
		struct {
			name   string
			run    func(p *rawPeer)
			reason string
		}{"unexpected message after connect", func(p *rawPeer) {
			p.connect(7)
			p.send(socket.Ack{}, -1)
		}, "unexpected ACK"},
	)

	before := fdCount(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := dialRaw(t, addr)
			p.t = t
			tc.run(p)
			p.expectRefusal(tc.reason)
			p.close()
		})
	}
	// A peer that stalls is cut off after the handshake timeout.
	t.Run("stall", func(t *testing.T) {
		p := dialRaw(t, addr)
		_ = p.ctl.SetDeadline(time.Now().Add(10 * time.Second))
		if _, _, err := p.ctl.Recv(); !errors.Is(err, io.EOF) {
			t.Fatalf("stalled peer: %v, want the server to close", err)
		}
		p.close()
	})
	waitFds(t, before)

	// The server is still healthy: a real client connects and exchanges traffic.
	cli := open(t, memif.Config{Role: memif.RoleClient, Socket: addr, ID: 7})
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	if err := waitUp(t, srv); err != nil {
		t.Fatal(err)
	}
	exchange(t, srv, cli)
}

// TestHostileDatagrams writes datagrams that are not memif messages at all, through a bare
// socket: the server answers each with a DISCONNECT saying what is wrong.
func TestHostileDatagrams(t *testing.T) {
	addr := memiftest.UniqueSocket()
	open(t, memif.Config{Role: memif.RoleServer, Socket: addr})
	unknown := make([]byte, socket.MsgSize)
	unknown[0] = 42
	for _, tc := range []struct {
		name   string
		data   []byte
		reason string
	}{
		{"short", make([]byte, 5), "invalid message size 5"},
		{"long", make([]byte, 200), "invalid message size"},
		{"unknown type", unknown, "unknown message type 42"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if err := unix.Connect(fd, &unix.SockaddrUnix{Name: addr}); err != nil {
				t.Fatal(err)
			}
			tv := unix.Timeval{Sec: 10}
			_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
			buf := make([]byte, 256)
			if n, err := unix.Read(fd, buf); err != nil || n != socket.MsgSize {
				t.Fatalf("hello: %d %v", n, err)
			}
			if _, err := unix.Write(fd, tc.data); err != nil {
				t.Fatal(err)
			}
			n, err := unix.Read(fd, buf)
			if err != nil {
				t.Fatal(err)
			}
			m, err := socket.Decode(buf[:n])
			if d, ok := m.(socket.Disconnect); err != nil || !ok || !strings.Contains(d.Reason, tc.reason) {
				t.Fatalf("reply %#v %v, want DISCONNECT %q", m, err, tc.reason)
			}
		})
	}
}

// TestHostileDescriptors: a connected raw client puts bad descriptors and bad head values on the
// server's receive ring and bad armed buffers on its transmit ring.
func TestHostileDescriptors(t *testing.T) {
	addr := memiftest.UniqueSocket()
	srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr})
	p := dialRaw(t, addr)
	p.connect(0)
	if err := waitUp(t, srv); err != nil {
		t.Fatal(err)
	}
	s2m, m2s := &p.rings[0], &p.rings[1]
	rx := srv.RxQueue(0)
	bufs := make([][]byte, 64)
	for i := range bufs {
		bufs[i] = make([]byte, 0, 4096)
	}
	mem := p.region.Mem
	var head uint16
	put := func(d ring.Desc) {
		s2m.Descs[head&s2m.Mask] = d
		head++
	}
	good := func(slot int, text string) ring.Desc {
		off := p.bufOffset(0, slot)
		copy(mem[off:], text)
		return ring.Desc{Length: uint32(len(text)), Offset: off}
	}
	size := uint32(len(mem))

	// Each bad descriptor is dropped and counted; the good ones around them arrive intact.
	put(good(0, "first"))
	put(ring.Desc{Region: 1, Length: 10})                                 // no such region
	put(ring.Desc{Offset: size - 4, Length: 8})                           // runs past the region
	put(ring.Desc{Offset: 0xfffffff0, Length: 0x20})                      // offset+length overflows 32 bits
	put(ring.Desc{Offset: 0, Length: 0})                                  // empty
	put(ring.Desc{Flags: ring.DescFlagNext, Offset: size - 2, Length: 4}) // bad segment in a chain
	put(ring.Desc{Offset: 0, Length: 4})                                  //   its last segment
	put(good(1, "last"))
	s2m.StoreHead(head)
	if n := rx.RxBurst(bufs); n != 2 || string(bufs[0]) != "first" || string(bufs[1]) != "last" {
		t.Fatalf("RxBurst = %d %q %q", n, bufs[0], bufs[1])
	}
	if st := rx.Stats(); st.BadDescs != 5 || st.Drops != 5 || st.Packets != 2 {
		t.Fatalf("stats %+v, want 5 bad descriptors dropped", st)
	}
	if got := s2m.LoadTail(); got != head {
		t.Fatalf("tail %d, want every descriptor released (%d)", got, head)
	}

	// An incomplete chain waits for its last segment.
	put(ring.Desc{Flags: ring.DescFlagNext, Offset: p.bufOffset(0, 2), Length: 3})
	copy(mem[p.bufOffset(0, 2):], "abc")
	s2m.StoreHead(head)
	if n := rx.RxBurst(bufs); n != 0 {
		t.Fatalf("incomplete chain delivered (%d)", n)
	}
	put(good(3, "def"))
	s2m.StoreHead(head)
	if n := rx.RxBurst(bufs); n != 1 || string(bufs[0]) != "abcdef" {
		t.Fatalf("completed chain: %d %q", n, bufs[0])
	}

	// A chain that never ends fills the whole ring: it is dropped, not waited for forever.
	for range 1 << rawLog2 {
		put(ring.Desc{Flags: ring.DescFlagNext, Offset: p.bufOffset(0, 0), Length: 1})
	}
	s2m.StoreHead(head)
	if n := rx.RxBurst(bufs); n != 0 || s2m.LoadTail() != head {
		t.Fatalf("endless chain: %d packets, tail %d head %d", n, s2m.LoadTail(), head)
	}

	// A head far beyond the ring is clamped to one ring's worth of (validated) descriptors.
	before := rx.Stats()
	s2m.StoreHead(head + 40000)
	rx.RxBurst(bufs)
	if tail := s2m.LoadTail(); tail-head > 1<<rawLog2 {
		t.Fatalf("consumed %d descriptors of a %d ring", tail-head, 1<<rawLog2)
	}
	if after := rx.Stats(); after.Packets+after.Drops-before.Packets-before.Drops > 1<<rawLog2 {
		t.Fatalf("more packets than ring slots from one bogus head: %+v", after)
	}

	// Server transmit into buffers the client armed badly: bad slots are handed back empty and
	// counted, good ones carry the packet.
	tx := srv.TxQueue(0)
	m2s.Descs[0] = ring.Desc{Region: 3, Length: 100}
	m2s.Descs[1] = ring.Desc{Offset: size - 10, Length: 100}
	m2s.Descs[2] = ring.Desc{Offset: p.bufOffset(1, 2), Length: rawBufSize}
	m2s.StoreHead(3)
	if n := tx.TxBurst([][]byte{[]byte("to a good buffer")}); n != 1 {
		t.Fatalf("TxBurst = %d", n)
	}
	if st := tx.Stats(); st.BadDescs != 2 || st.Packets != 1 {
		t.Fatalf("tx stats %+v", st)
	}
	if m2s.LoadTail() != 3 || m2s.Descs[0].Length != 0 || m2s.Descs[1].Length != 0 ||
		string(mem[p.bufOffset(1, 2):][:m2s.Descs[2].Length]) != "to a good buffer" {
		t.Fatalf("tail %d descs %+v", m2s.LoadTail(), m2s.Descs[:3])
	}
	// Armed more than the ring holds: the server never writes past one ring of slots.
	m2s.StoreHead(3 + 50000)
	for i := range m2s.Descs {
		m2s.Descs[i] = ring.Desc{Offset: p.bufOffset(1, i), Length: rawBufSize}
	}
	pkts := make([][]byte, 100)
	for i := range pkts {
		pkts[i] = []byte("x")
	}
	if n := tx.TxBurst(pkts); n != 1<<rawLog2 {
		t.Fatalf("TxBurst into a bogus head took %d", n)
	}
}

// acceptRaw accepts one client and sends it hello; the test drives the rest by hand.
func acceptRaw(t *testing.T, ln *socket.Listener, hello socket.Hello) *rawPeer {
	t.Helper()
	ctl, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	p := &rawPeer{t: t, ctl: ctl}
	t.Cleanup(p.close)
	p.send(hello, -1)
	return p
}

var goodHello = socket.Hello{Name: "raw", MinVersion: socket.Version, MaxVersion: socket.Version, MaxRegion: 255, MaxLog2RingSize: 14}

func TestHostileServerMessages(t *testing.T) {
	addr := memiftest.UniqueSocket()
	ln, err := socket.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cli := open(t, memif.Config{Role: memif.RoleClient, Socket: addr, ReconnectInterval: 10 * time.Millisecond})
	before := fdCount(t)
	badVersion := goodHello
	badVersion.MinVersion, badVersion.MaxVersion = 0x0300, 0x0301
	badLog2 := goodHello
	badLog2.MaxLog2RingSize = 0
	for _, tc := range []struct {
		name   string
		hello  socket.Msg
		after  func(p *rawPeer)
		reason string
	}{
		{"not HELLO first", socket.Ack{}, nil, "expected HELLO"},
		{"version", badVersion, nil, "unsupported protocol versions"},
		{"log2 0", badLog2, nil, "allows rings of 2^0"},
		{"wrong reply", goodHello, func(p *rawPeer) { p.expect(socket.TypeInit); p.send(socket.Connected{}, -1) }, "expected ACK after INIT, got CONNECTED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctl, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			p := &rawPeer{t: t, ctl: ctl}
			p.send(tc.hello, -1)
			if tc.after != nil {
				tc.after(p)
			}
			p.expectRefusal(tc.reason)
			p.close()
		})
	}
	waitFds(t, before+1) // +1: the client's next dial, which nobody accepts
	if cli.Up() {
		t.Fatal("client up after bad servers")
	}
}

// rawServerUntilConnect accepts one client on ln and answers its handshake up to and including
// CONNECT, which it leaves unanswered: the client's region is mapped (closed with the test) and
// its rings are 0 = S2M, 1 = M2S.
func rawServerUntilConnect(t *testing.T, ln *socket.Listener) (*rawPeer, *alloc.Region, [2]ring.Ring) {
	t.Helper()
	p, regs, rings := rawServerRegionsUntilConnect(t, ln)
	return p, regs[0], rings
}

// rawServerRegionsUntilConnect is rawServerUntilConnect for a client announcing any number of
// regions (a zero-copy client's pool is region 1); the rings are in region 0.
func rawServerRegionsUntilConnect(t *testing.T, ln *socket.Listener) (*rawPeer, []*alloc.Region, [2]ring.Ring) {
	t.Helper()
	p := acceptRaw(t, ln, goodHello)
	p.expect(socket.TypeInit)
	p.send(socket.Ack{}, -1)
	var regs []*alloc.Region
	var rings [2]ring.Ring
	for {
		_ = p.ctl.SetDeadline(time.Now().Add(10 * time.Second))
		m, fd, err := p.ctl.Recv()
		if err != nil {
			t.Fatalf("waiting for CONNECT: %v", err)
		}
		switch m := m.(type) {
		case socket.AddRegion:
			reg, err := alloc.MapRegion(fd, m.Size)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { reg.Close() })
			regs = append(regs, reg)
		case socket.AddRing:
			unix.Close(fd)
			r, err := ring.New(regs[0].Mem[m.Offset:], m.Log2RingSize, 64)
			if err != nil {
				t.Fatal(err)
			}
			rings[1-m.Flags&1] = r
		case socket.Connect:
			return p, regs, rings
		default:
			t.Fatalf("got %#v before CONNECT", m)
		}
		p.send(socket.Ack{}, -1)
	}
}

// TestHostileServerDescriptors: a raw server fills the client's receive ring with bad descriptors
// and lies about its tail.
func TestHostileServerDescriptors(t *testing.T) {
	addr := memiftest.UniqueSocket()
	ln, err := socket.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cli := open(t, memif.Config{Role: memif.RoleClient, Socket: addr, RingSize: 16, BufferSize: 256})
	p, reg, rings := rawServerUntilConnect(t, ln)
	p.send(socket.Connected{Name: "raw"}, -1)
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	m2s := &rings[1]
	armed := m2s.LoadHead()
	if armed != 16 {
		t.Fatalf("client armed %d slots, want the whole ring", armed)
	}
	// The client reads only the length from a descriptor: the buffer behind a slot is the one it
	// armed there, wherever the server points region and offset.
	goodDesc := m2s.Descs[2]
	copy(reg.Mem[goodDesc.Offset:], "ok")
	m2s.Descs[0] = ring.Desc{Length: 0}   // empty
	m2s.Descs[1] = ring.Desc{Length: 257} // more than the 256-byte buffer
	m2s.Descs[2] = ring.Desc{Region: 9, Offset: uint32(len(reg.Mem)) - 1, Length: 2}
	m2s.StoreTail(3)
	rx := cli.RxQueue(0)
	bufs := [][]byte{make([]byte, 0, 256), make([]byte, 0, 256), make([]byte, 0, 256)}
	if n := rx.RxBurst(bufs); n != 1 || string(bufs[0]) != "ok" {
		t.Fatalf("RxBurst = %d %q", n, bufs[0])
	}
	if st := rx.Stats(); st.BadDescs != 2 {
		t.Fatalf("stats %+v", st)
	}
	// Once half the ring is free the client re-arms it with its own buffers, whatever the server
	// wrote into those descriptors.
	for i := 3; i < 8; i++ {
		m2s.Descs[i] = ring.Desc{Length: 1}
	}
	m2s.StoreTail(8)
	five := [][]byte{make([]byte, 0, 256), make([]byte, 0, 256), make([]byte, 0, 256), make([]byte, 0, 256), make([]byte, 0, 256)}
	if n := rx.RxBurst(five); n != 5 {
		t.Fatalf("RxBurst = %d, want 5", n)
	}
	if m2s.LoadHead() != 24 || m2s.Descs[0].Region != 0 || m2s.Descs[0].Length != 256 || m2s.Descs[0].Offset == 0 {
		t.Fatalf("head %d desc0 %+v", m2s.LoadHead(), m2s.Descs[0])
	}
	// A tail beyond what was armed is clamped to the armed slots.
	for i := range m2s.Descs {
		m2s.Descs[i].Length = 1
	}
	m2s.StoreTail(3 + 30000)
	many := make([][]byte, 64)
	for i := range many {
		many[i] = make([]byte, 0, 256)
	}
	if n := rx.RxBurst(many); n != 16 {
		t.Fatalf("RxBurst after a bogus tail = %d, want the 16 armed slots", n)
	}
	// A server that writes our S2M tail past our head cannot make us overwrite unreleased
	// buffers: the ring reads as full.
	rings[0].StoreTail(5000)
	tx := cli.TxQueue(0)
	if n := tx.TxBurst([][]byte{[]byte("x")}); n != 0 {
		t.Fatalf("TxBurst with a bogus tail took %d", n)
	}
}
