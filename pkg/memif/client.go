package memif

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/pkg/alloc"
	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
	"github.com/memifnet/memifnet/pkg/socket"
)

// runClient connects, serves the connection until it ends, and connects again, until Close.
// Attempts back off from firstRetry, doubling up to ReconnectInterval: a server that restarts at
// once is found at once, one that stays away costs a dial per interval.
func (i *Interface) runClient() {
	defer close(i.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	delay := min(firstRetry, i.cfg.ReconnectInterval)
	for {
		err, inHandshake := i.connectOnce()
		if err != nil {
			i.setErr(err, inHandshake)
			var pe *PeerError
			if inHandshake && errors.As(err, &pe) {
				i.log.Warn("memif: server refused the connection", "reason", pe.Reason)
			} else {
				i.log.Debug("memif: connect attempt failed", "err", err)
			}
		}
		if i.connected() {
			delay = min(firstRetry, i.cfg.ReconnectInterval) // a connection was made: start over
		}
		timer.Reset(delay)
		delay = min(2*delay, i.cfg.ReconnectInterval)
		select {
		case <-i.stop:
			return
		case <-timer.C:
		}
	}
}

// connected reports, and forgets, whether the last attempt got the link up.
func (i *Interface) connected() bool {
	up := i.wasUp
	i.wasUp = false
	return up
}

// firstRetry is the first reconnect delay.
const firstRetry = 50 * time.Millisecond

// connectOnce dials, runs the handshake and serves the connection until it ends. It returns why
// the attempt failed or the connection ended, and whether that happened during the handshake.
func (i *Interface) connectOnce() (err error, inHandshake bool) {
	ctl, err := socket.Dial(i.cfg.Socket)
	if err != nil {
		return err, false
	}
	i.mu.Lock()
	if i.closed {
		i.mu.Unlock()
		ctl.Close()
		return ErrClosed, false
	}
	i.pending = ctl
	i.mu.Unlock()

	c, err := i.clientHandshake(ctl)
	if err != nil {
		i.mu.Lock()
		i.pending = nil
		i.mu.Unlock()
		ctl.Close()
		return err, true
	}
	if err := i.attach(c); err != nil {
		c.close()
		return err, false
	}
	i.wasUp = true
	reason := c.afterServe(serveConnected(c.ctl))
	i.detach(c, reason)
	return reason, false
}

// serveConnected reads the control channel of an established connection until it ends, and says
// why. Only DISCONNECT is allowed now; anything else is answered with one.
func serveConnected(ctl *socket.Conn) error {
	m, fd, err := recv(ctl)
	closeFd(fd)
	if err != nil {
		return fmt.Errorf("control channel closed: %w", err)
	}
	if d, ok := m.(socket.Disconnect); ok {
		return &PeerError{Code: d.Code, Reason: d.Reason}
	}
	return refuse(ctl, "unexpected %s message on a connected interface", m.Type())
}

func closeFd(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// clientHandshake runs the client's side of the lock-step handshake on a fresh connection.
func (i *Interface) clientHandshake(ctl *socket.Conn) (_ *connection, err error) {
	cfg := i.cfg
	_ = ctl.SetDeadline(time.Now().Add(cfg.HandshakeTimeout))
	hello, err := recvHello(ctl)
	if err != nil {
		return nil, err
	}
	numS2M := min(cfg.TxQueues, int(hello.MaxS2MRing)+1)
	numM2S := min(cfg.RxQueues, int(hello.MaxM2SRing)+1)
	log2 := min(cfg.log2RingSize(), hello.MaxLog2RingSize)
	if log2 < 1 {
		return nil, refuse(ctl, "server allows rings of 2^%d entries only", hello.MaxLog2RingSize)
	}
	var pool *alloc.Region
	if i.pool != nil {
		pool = i.pool.region
	}
	if pool != nil && hello.MaxRegion < 1 {
		return nil, refuse(ctl, "zero-copy needs 2 regions, server allows %d", int(hello.MaxRegion)+1)
	}
	c, err := newClientConnection(cfg, numS2M, numM2S, log2, pool)
	if err != nil {
		return nil, refuse(ctl, "client cannot create its memory: %v", err)
	}
	if r := c.regions[0]; r.FallbackReason != "" {
		i.log.Info("memif: region not on hugepages", "reason", r.FallbackReason)
	}
	defer func() {
		if err != nil {
			c.ctl = nil // the caller closes the socket
			c.close()
		}
	}()
	c.ctl = ctl
	c.peerApp = hello.Name
	if pool != nil {
		c.armZC(i.rx[:numM2S])
	}
	if err := c.announce(cfg, log2); err != nil {
		return nil, err
	}
	_ = ctl.SetDeadline(time.Time{})
	return c, nil
}

// recvHello reads the server's HELLO and checks its protocol versions.
func recvHello(ctl *socket.Conn) (socket.Hello, error) {
	m, err := recvNoFd(ctl)
	if err != nil {
		return socket.Hello{}, err
	}
	hello, ok := m.(socket.Hello)
	if !ok {
		return socket.Hello{}, refuse(ctl, "expected HELLO, got %s", m.Type())
	}
	if hello.MinVersion > socket.Version || hello.MaxVersion < socket.Version {
		return socket.Hello{}, refuse(ctl, "unsupported protocol versions 0x%04x..0x%04x", hello.MinVersion, hello.MaxVersion)
	}
	return hello, nil
}

// announce sends INIT, the regions, the rings and CONNECT, one at a time, each after the server
// answered the one before (ACK; CONNECTED for CONNECT).
func (c *connection) announce(cfg Config, log2 uint8) error {
	ctl := c.ctl
	send := func(msg socket.Msg, fd int) error {
		_ = ctl.SetDeadline(time.Now().Add(cfg.HandshakeTimeout))
		if err := ctl.Send(msg, fd); err != nil {
			return err
		}
		reply, err := recvNoFd(ctl)
		if err != nil {
			return err
		}
		want := socket.TypeAck
		if msg.Type() == socket.TypeConnect {
			want = socket.TypeConnected
		}
		if reply.Type() != want {
			return refuse(ctl, "expected %s after %s, got %s", want, msg.Type(), reply.Type())
		}
		if cd, ok := reply.(socket.Connected); ok {
			c.peerName = cd.Name
		}
		return nil
	}
	init := socket.Init{Version: socket.Version, ID: cfg.ID, Mode: uint8(cfg.Mode), Secret: cfg.Secret, Name: cfg.AppName}
	if err := send(init, -1); err != nil {
		return err
	}
	for k, r := range c.regions {
		if err := send(socket.AddRegion{Index: uint16(k), Size: uint64(len(r.Mem))}, r.Fd); err != nil {
			return err
		}
	}
	offsets := c.ringOffsets(log2, cfg.CacheLine)
	for dir, rings := range [][]ringInfo{c.s2m, c.m2s} {
		for k, ri := range rings {
			msg := socket.AddRing{Index: uint16(k), Region: 0, Offset: offsets[dir][k], Log2RingSize: log2}
			if dir == 0 {
				msg.Flags = socket.AddRingFlagS2M
			}
			if err := send(msg, ri.eventfd); err != nil {
				return err
			}
		}
	}
	return send(socket.Connect{Name: cfg.Name}, -1)
}

// recv reads the next control message; a malformed one is answered with a DISCONNECT naming what
// was wrong with it.
func recv(ctl *socket.Conn) (socket.Msg, int, error) {
	m, fd, err := ctl.Recv()
	var me *socket.MalformedError
	if errors.As(err, &me) {
		return nil, -1, refuse(ctl, "malformed message: %s", me.Reason)
	}
	return m, fd, err
}

// recvNoFd receives a handshake reply, turning a DISCONNECT into a *PeerError. Replies never carry
// fds: one that does is closed.
func recvNoFd(ctl *socket.Conn) (socket.Msg, error) {
	m, fd, err := recv(ctl)
	closeFd(fd)
	if err != nil {
		return nil, err
	}
	if d, ok := m.(socket.Disconnect); ok {
		return nil, &PeerError{Code: d.Code, Reason: d.Reason}
	}
	return m, nil
}

// refuse tells the peer why we give up and returns that as a protocol error.
func refuse(ctl *socket.Conn, format string, a ...any) error {
	err := protoErrorf(format, a...)
	_ = ctl.Send(socket.Disconnect{Reason: err.Error()}, -1)
	return err
}

// newClientConnection lays out the client's memory like DPDK and VPP: one region holding every
// ring (S2M rings first, then M2S) followed by one buffer per ring slot in the same order, and
// creates one interrupt eventfd per ring. In zero-copy mode region 0 holds the rings only and the
// interface's buffer pool, which outlives connections, is announced as region 1.
func newClientConnection(cfg Config, numS2M, numM2S int, log2 uint8, pool *alloc.Region) (c *connection, err error) {
	ringBytes := ring.Size(log2, cfg.CacheLine)
	nrings := numS2M + numM2S
	bufBase := (nrings*ringBytes + 63) &^ 63
	slots := 1 << log2
	size := bufBase + nrings*slots*cfg.BufferSize
	var region *alloc.Region
	switch {
	case pool != nil:
		region, err = alloc.NewRegion("memif-rings-"+cfg.Name, nrings*ringBytes, alloc.BackingMemfd)
	case cfg.NewRegion != nil:
		region, err = cfg.NewRegion("memif-"+cfg.Name, size)
		if err == nil && len(region.Mem) < size {
			err = fmt.Errorf("region of %d bytes, %d needed", len(region.Mem), size)
			region.Close()
		}
	default:
		region, err = alloc.NewRegion("memif-"+cfg.Name, size, cfg.Memory)
	}
	if err != nil {
		return nil, err
	}
	c = &connection{regions: []*alloc.Region{region}, bufSize: uint32(cfg.BufferSize)}
	if pool != nil {
		c.regions = append(c.regions, pool)
		c.pool = pool
	}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	mem := region.Mem
	for k := range nrings {
		r, err := ring.New(mem[k*ringBytes:], log2, cfg.CacheLine)
		if err != nil {
			return nil, err
		}
		r.SetCookie(ring.Cookie)
		base := uint32(bufBase + k*slots*cfg.BufferSize)
		if pool == nil {
			for s := range r.Descs {
				r.Descs[s] = ring.Desc{Length: uint32(cfg.BufferSize), Offset: base + uint32(s*cfg.BufferSize)}
			}
		}
		efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			return nil, fmt.Errorf("create ring eventfd: %w", err)
		}
		ri, err := newRingInfo(r, efd, base)
		if err != nil {
			return nil, err
		}
		if k < numS2M {
			c.s2m = append(c.s2m, ri)
		} else {
			// We receive on M2S rings and poll them: ask the server not to signal.
			r.StoreFlags(ring.FlagMaskInt)
			if pool == nil {
				// Armed before CONNECT: the server's link is up once it has CONNECT, and it may
				// send before we have read CONNECTED (attach takes the ring over as it is).
				r.StoreHead(uint16(slots))
			}
			c.m2s = append(c.m2s, ri)
		}
	}
	return c, nil
}

// ringOffsets gives the region-0 offset of each ring, by direction (0 = S2M, 1 = M2S).
func (c *connection) ringOffsets(log2 uint8, cacheLine int) [2][]uint32 {
	stride := uint32(ring.Size(log2, cacheLine))
	var o [2][]uint32
	for k := range c.s2m {
		o[0] = append(o[0], uint32(k)*stride)
	}
	for k := range c.m2s {
		o[1] = append(o[1], uint32(len(c.s2m)+k)*stride)
	}
	return o
}
