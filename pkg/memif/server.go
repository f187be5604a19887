package memif

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/memifnet/memifnet/pkg/alloc"
	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
	"github.com/memifnet/memifnet/pkg/socket"
)

// Limits a server announces in HELLO.
const (
	helloMaxRegion = 255
	maxRegions     = helloMaxRegion + 1
)

// servers maps a socket address to the listener its server interfaces share.
var servers = struct {
	sync.Mutex
	m map[string]*serverSocket
}{m: map[string]*serverSocket{}}

// serverSocket is one listening socket and the server interfaces (by id) it hosts. Each accepted
// client is served on its own goroutine, so clients of different ids connect concurrently.
type serverSocket struct {
	addr string
	ln   *socket.Listener
	log  *slog.Logger

	mu     sync.Mutex
	closed bool // the listener is closed: the accept loop ends (no interface is not enough, see acceptLoop)
	ifaces map[uint32]*Interface
	conns  map[*socket.Conn]struct{} // every accepted connection, closed when the socket stops
	wg     sync.WaitGroup            // the accept loop and connection goroutines
	// per interface: connection goroutines that may still touch it
	serving map[*Interface]*sync.WaitGroup
}

func socketKey(addr string) string {
	if socket.IsAbstract(addr) {
		return addr
	}
	if abs, err := filepath.Abs(addr); err == nil {
		return abs
	}
	return filepath.Clean(addr)
}

// registerServer adds a server interface to the listener of its socket, creating it if needed.
func registerServer(i *Interface) (*serverSocket, error) {
	key := socketKey(i.cfg.Socket)
	servers.Lock()
	defer servers.Unlock()
	s := servers.m[key]
	if s == nil {
		ln, err := socket.Listen(i.cfg.Socket)
		if err != nil {
			return nil, err
		}
		s = &serverSocket{
			addr: i.cfg.Socket, ln: ln, log: i.cfg.Logger.With("memif_socket", i.cfg.Socket),
			ifaces:  map[uint32]*Interface{i.cfg.ID: i},
			conns:   map[*socket.Conn]struct{}{},
			serving: map[*Interface]*sync.WaitGroup{i: {}},
		}
		servers.m[key] = s
		// Accepting once the interface is in: a redialling client never hears "ID not found".
		s.wg.Add(1)
		go s.acceptLoop()
		return s, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.ifaces[i.cfg.ID]; dup {
		return nil, fmt.Errorf("memif: socket %s already has a server interface with id %d", i.cfg.Socket, i.cfg.ID)
	}
	s.ifaces[i.cfg.ID] = i
	s.serving[i] = &sync.WaitGroup{}
	return s, nil
}

// unregister removes a closed interface and waits until no connection goroutine touches it; the
// last interface to leave stops the listener.
func (s *serverSocket) unregister(i *Interface) {
	s.mu.Lock()
	delete(s.ifaces, i.cfg.ID)
	wg := s.serving[i]
	delete(s.serving, i)
	last := len(s.ifaces) == 0
	s.mu.Unlock()
	wg.Wait()
	if !last {
		return
	}
	servers.Lock()
	s.mu.Lock()
	if len(s.ifaces) != 0 { // another interface joined meanwhile: keep listening
		s.mu.Unlock()
		servers.Unlock()
		return
	}
	delete(servers.m, socketKey(s.addr))
	s.closed = true
	s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	servers.Unlock()
	s.wg.Wait()
}

// acceptLoop serves until unregister closes the listener. A socket with no interface is not a
// stopped one (another may join as the last leaves); its client is served like any other ("ID
// not found" until one joins): ending the loop there left the listener bound and deaf for good.
func (s *serverSocket) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("memif: accept failed", "err", err)
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE: don't spin
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// hello is what this socket offers: the largest queue counts of its interfaces. It also returns
// the shortest handshake timeout among them, which bounds the wait for INIT.
func (s *serverSocket) hello() (socket.Hello, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := socket.Hello{
		Name: "memifnet", MinVersion: socket.Version, MaxVersion: socket.Version,
		MaxRegion: helloMaxRegion, MaxLog2RingSize: ring.MaxLog2Size,
	}
	timeout := DefaultHandshakeTimeout
	for _, i := range s.ifaces {
		h.MaxS2MRing = max(h.MaxS2MRing, uint16(i.cfg.RxQueues-1))
		h.MaxM2SRing = max(h.MaxM2SRing, uint16(i.cfg.TxQueues-1))
		h.Name = i.cfg.AppName
		timeout = min(timeout, i.cfg.HandshakeTimeout)
	}
	return h, timeout
}

// serve runs the server's side of the handshake for one client, then serves the connection.
func (s *serverSocket) serve(ctl *socket.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, ctl)
		s.mu.Unlock()
		ctl.Close()
	}()
	i, wg, init, err := s.bind(ctl)
	if err != nil {
		s.log.Info("memif: refused client", "reason", err)
		return
	}
	defer wg.Done()
	c, err := i.serverHandshake(ctl, init.Name)
	if err != nil {
		i.mu.Lock()
		if i.pending == ctl {
			i.pending = nil
		}
		i.mu.Unlock()
		i.setErr(err, true)
		i.log.Info("memif: handshake with client failed", "err", err)
		return
	}
	// Up before CONNECTED goes out: once the client sees its link up, ours is too.
	if err := i.attach(c); err != nil {
		_ = ctl.Send(socket.Disconnect{Reason: "interface closed"}, -1)
		c.ctl = nil
		c.close()
		return
	}
	reason := error(nil)
	if err := ctl.Send(socket.Connected{Name: i.cfg.Name}, -1); err != nil {
		reason = err
	} else {
		reason = c.afterServe(serveConnected(ctl))
	}
	// detach closes ctl with the rest of the connection (closing it twice is harmless); c.ctl is
	// not cleared here, since Close reads it under the interface's lock.
	i.detach(c, reason)
}

// bind sends HELLO, reads INIT and claims the interface it names. Every refusal is sent to the
// client as DISCONNECT with the reason.
func (s *serverSocket) bind(ctl *socket.Conn) (*Interface, *sync.WaitGroup, socket.Init, error) {
	hello, timeout := s.hello()
	_ = ctl.SetDeadline(time.Now().Add(timeout))
	if err := ctl.Send(hello, -1); err != nil {
		return nil, nil, socket.Init{}, err
	}
	m, fd, err := recv(ctl)
	closeFd(fd)
	if err != nil {
		return nil, nil, socket.Init{}, err
	}
	if fd >= 0 {
		return nil, nil, socket.Init{}, refuse(ctl, "INIT must not carry a file descriptor")
	}
	init, ok := m.(socket.Init)
	if !ok {
		return nil, nil, socket.Init{}, refuse(ctl, "expected INIT, got %s", m.Type())
	}
	if init.Version != socket.Version {
		return nil, nil, socket.Init{}, refuse(ctl, "unsupported protocol version 0x%04x", init.Version)
	}
	s.mu.Lock()
	i := s.ifaces[init.ID]
	wg := s.serving[i]
	if i != nil {
		wg.Add(1)
	}
	s.mu.Unlock()
	if i == nil {
		return nil, nil, socket.Init{}, refuse(ctl, "ID not found")
	}
	if reason := i.claim(ctl, init); reason != "" {
		wg.Done()
		return nil, nil, socket.Init{}, refuse(ctl, "%s", reason)
	}
	return i, wg, init, nil
}

// claim checks a client's INIT against the interface and reserves the interface for it. A
// refusal's reason uses the words libmemif, VPP and DPDK send, so that peers' logs read alike.
func (i *Interface) claim(ctl *socket.Conn, init socket.Init) (refusal string) {
	if Mode(init.Mode) != i.cfg.Mode {
		return fmt.Sprintf("mode mismatch: client %s, server %s", Mode(init.Mode), i.cfg.Mode)
	}
	if i.cfg.Secret != "" {
		if init.Secret == "" {
			return "Secret required"
		}
		if init.Secret != i.cfg.Secret {
			return "Incorrect secret"
		}
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return "ID not found"
	}
	if i.conn != nil || i.pending != nil {
		return "Already connected"
	}
	i.pending = ctl
	return ""
}

// pendingRing is a ring announced by ADD_RING, mapped at CONNECT.
type pendingRing struct {
	msg     socket.AddRing
	eventfd int
}

// serverHandshake acknowledges the client's regions and rings, validating each before use, and
// returns the connection on CONNECT (the caller replies CONNECTED). Any violation ends it with a
// DISCONNECT naming the reason.
func (i *Interface) serverHandshake(ctl *socket.Conn, peerApp string) (_ *connection, err error) {
	c := &connection{ctl: ctl, peerApp: peerApp}
	var rings [2][]pendingRing // by direction: 0 = S2M, 1 = M2S
	defer func() {
		if err != nil {
			for _, rs := range rings {
				for _, r := range rs {
					closeFd(r.eventfd)
				}
			}
			c.ctl = nil
			c.close()
		}
	}()
	if err := ctl.Send(socket.Ack{}, -1); err != nil {
		return nil, err
	}
	for {
		_ = ctl.SetDeadline(time.Now().Add(i.cfg.HandshakeTimeout))
		m, fd, err := recv(ctl)
		if err != nil {
			return nil, err
		}
		switch msg := m.(type) {
		case socket.AddRegion:
			if err := i.addRegion(c, msg, fd); err != nil {
				return nil, refuse(ctl, "%s", err)
			}
		case socket.AddRing:
			if err := i.checkRing(c, rings, msg, fd); err != nil {
				closeFd(fd)
				return nil, refuse(ctl, "%s", err)
			}
			dir := 1
			if msg.Flags&socket.AddRingFlagS2M != 0 {
				dir = 0
			}
			rings[dir] = append(rings[dir], pendingRing{msg: msg, eventfd: fd})
		case socket.Connect:
			closeFd(fd)
			if err := i.mapRings(c, &rings); err != nil {
				return nil, refuse(ctl, "%s", err)
			}
			c.peerName = msg.Name
			_ = ctl.SetDeadline(time.Time{})
			return c, nil
		case socket.Disconnect:
			closeFd(fd)
			return nil, &PeerError{Code: msg.Code, Reason: msg.Reason}
		default:
			closeFd(fd)
			return nil, refuse(ctl, "unexpected %s message during handshake", m.Type())
		}
		if err := ctl.Send(socket.Ack{}, -1); err != nil {
			return nil, err
		}
	}
}

func (i *Interface) addRegion(c *connection, msg socket.AddRegion, fd int) error {
	if fd < 0 {
		return errors.New("missing region fd")
	}
	if int(msg.Index) != len(c.regions) || len(c.regions) >= maxRegions {
		closeFd(fd)
		return fmt.Errorf("region index %d out of order (expected %d, at most %d)", msg.Index, len(c.regions), helloMaxRegion)
	}
	var total uint64
	for _, r := range c.regions {
		total += uint64(len(r.Mem))
	}
	if limit := i.cfg.MaxRegionBytes; msg.Size > limit || total+msg.Size > limit {
		closeFd(fd)
		// The reason must fit DISCONNECT's 96 bytes: the limit first.
		return fmt.Errorf("over the server's region limit of %d bytes (MaxRegionBytes): %d in all", limit, total+msg.Size)
	}
	r, err := alloc.MapRegion(fd, msg.Size)
	if err != nil {
		return fmt.Errorf("region %d: %v", msg.Index, err)
	}
	c.regions = append(c.regions, r)
	return nil
}

func (i *Interface) checkRing(c *connection, rings [2][]pendingRing, msg socket.AddRing, fd int) error {
	if fd < 0 {
		return errors.New("missing ring eventfd")
	}
	// Any other kind of fd would break Wait: a file or a pipe is not pollable the same way, and
	// Wait would spin on it or block forever.
	if err := checkEventfd(fd); err != nil {
		return fmt.Errorf("ring interrupt fd: %v", err)
	}
	dir, limit, name := 1, i.cfg.TxQueues, "M2S"
	if msg.Flags&socket.AddRingFlagS2M != 0 {
		dir, limit, name = 0, i.cfg.RxQueues, "S2M"
	}
	if int(msg.Index) != len(rings[dir]) || int(msg.Index) >= limit {
		return fmt.Errorf("%s ring index %d out of order or over the %d queues of interface %d", name, msg.Index, limit, i.cfg.ID)
	}
	if msg.PrivateHdrSize != 0 {
		return fmt.Errorf("private header size %d not supported", msg.PrivateHdrSize)
	}
	if msg.Log2RingSize < 1 || msg.Log2RingSize > ring.MaxLog2Size {
		return fmt.Errorf("log2 ring size %d outside 1..%d", msg.Log2RingSize, ring.MaxLog2Size)
	}
	if len(rings[0])+len(rings[1]) > 0 {
		first := rings[0]
		if len(first) == 0 {
			first = rings[1]
		}
		if first[0].msg.Log2RingSize != msg.Log2RingSize {
			return fmt.Errorf("ring sizes differ (2^%d and 2^%d)", first[0].msg.Log2RingSize, msg.Log2RingSize)
		}
	}
	if int(msg.Region) >= len(c.regions) {
		return fmt.Errorf("ring in region %d, only %d regions announced", msg.Region, len(c.regions))
	}
	end := uint64(msg.Offset) + uint64(ring.Size(msg.Log2RingSize, i.cfg.CacheLine))
	if end > uint64(len(c.regions[msg.Region].Mem)) {
		return fmt.Errorf("ring at offset %d of 2^%d entries ends past region %d (%d bytes)",
			msg.Offset, msg.Log2RingSize, msg.Region, len(c.regions[msg.Region].Mem))
	}
	if msg.Offset%8 != 0 {
		return fmt.Errorf("ring offset %d not 8-byte aligned", msg.Offset)
	}
	return nil
}

// mapRings makes ring views of the announced rings and checks their cookies.
func (i *Interface) mapRings(c *connection, rings *[2][]pendingRing) error {
	if len(rings[0]) == 0 || len(rings[1]) == 0 {
		return fmt.Errorf("client announced %d S2M and %d M2S rings; at least one each needed", len(rings[0]), len(rings[1]))
	}
	for dir := range rings {
		for k := range rings[dir] {
			pr := &rings[dir][k]
			mem := c.regions[pr.msg.Region].Mem[pr.msg.Offset:]
			r, err := ring.New(mem, pr.msg.Log2RingSize, i.cfg.CacheLine)
			if err != nil {
				return err
			}
			if r.Cookie() != ring.Cookie {
				return fmt.Errorf("ring cookie mismatch (%#x)", r.Cookie())
			}
			ri, err := newRingInfo(r, pr.eventfd, 0)
			pr.eventfd = -1 // owned by ri now, or closed
			if err != nil {
				return err
			}
			if dir == 0 {
				// We receive on S2M rings and poll them: ask the client not to signal.
				r.StoreFlags(ring.FlagMaskInt)
				c.s2m = append(c.s2m, ri)
			} else {
				c.m2s = append(c.m2s, ri)
			}
		}
	}
	// The connection owns the eventfds now.
	rings[0], rings[1] = nil, nil
	return nil
}
