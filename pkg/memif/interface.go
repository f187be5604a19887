package memif

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
	"github.com/memifnet/memifnet/pkg/socket"
)

// Interface is one memif interface. A client dials its socket, negotiates, and re-connects on its
// own after the server goes away; a server waits for its client on a socket it may share with
// other interfaces. Packets flow through its queues while the link is up.
type Interface struct {
	cfg Config
	log *slog.Logger
	rx  []*RxQueue
	tx  []*TxQueue

	mu      sync.Mutex
	closed  bool
	pending *socket.Conn // a handshake in progress (it also claims a server's id)
	conn    *connection  // the established connection; nil while down
	lastErr error        // why the last attempt failed or the last connection ended
	refusal error        // client: the peer refused the latest handshake (a *PeerError)
	changed chan struct{}
	link    LinkInfo

	wasUp bool          // client: the last attempt connected (only the connect loop uses it)
	stop  chan struct{} // client: closed by Close
	done  chan struct{} // client: closed when the connect loop has ended
	srv   *serverSocket // server: the shared listener

	pool *Pool // zero-copy client: the buffer pool, joined from Open to Close

	// Link counters (stats.go), under mu.
	linkUps, linkDowns uint64
	downReason         string
	downErr            error

	status *statusWriter // a port opened from port.json: its status file (status.go)
}

// LinkInfo describes the current connection.
type LinkInfo struct {
	PeerName   string // the peer's interface name (CONNECT/CONNECTED)
	PeerApp    string // the peer's application name (HELLO/INIT)
	RxQueues   int    // negotiated queues, from this side's point of view
	TxQueues   int
	RingSize   int
	Regions    int
	HugePages  bool // a client's region is backed by hugepages
	Generation int  // counts connections since Open
}

// Open creates the interface and starts connecting (client) or listening (server). It fails only
// on a bad config or when a server's socket cannot be bound; a client whose server is not there
// yet keeps trying in the background.
func Open(cfg Config) (*Interface, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	i := &Interface{
		cfg:     cfg,
		log:     cfg.Logger.With("memif", cfg.Name, "role", cfg.Role.String(), "socket", cfg.Socket, "id", cfg.ID),
		changed: make(chan struct{}),
	}
	i.rx = make([]*RxQueue, cfg.RxQueues)
	for k := range i.rx {
		i.rx[k] = &RxQueue{index: k}
		i.rx[k].maxSleep = cfg.MaxSleep
		atomic.StoreInt32(&i.rx[k].guard, guardDown)
		i.rx[k].eventfd = -1
	}
	i.tx = make([]*TxQueue, cfg.TxQueues)
	for k := range i.tx {
		i.tx[k] = &TxQueue{index: k}
		atomic.StoreInt32(&i.tx[k].guard, guardDown)
		i.tx[k].eventfd = -1
	}
	for _, q := range i.tx {
		q.kicker = newKicker()
	}
	if err := i.start(); err != nil {
		for _, q := range i.tx {
			q.kicker.stop()
		}
		return nil, err
	}
	if cfg.StatusDir != "" {
		if err := i.startStatus(cfg.StatusDir); err != nil {
			// The node loses its view of the port, the port works: no reason to fail it.
			i.log.Warn("memif: no port status file", "err", err)
		}
	}
	return i, nil
}

// start starts listening (server) or connecting (client).
func (i *Interface) start() (err error) {
	cfg := i.cfg
	if cfg.Role == RoleServer {
		srv, err := registerServer(i)
		if err != nil {
			return err
		}
		i.srv = srv
		return nil
	}
	if cfg.ZeroCopy {
		i.pool = cfg.Pool
		if i.pool == nil {
			if i.pool, err = privatePool(cfg); err != nil {
				return err
			}
		}
		if err := i.pool.join(cfg.Name); err != nil {
			return fmt.Errorf("memif %s: %w", cfg.Name, err)
		}
		for k, q := range i.rx {
			q.zc = i.pool.shares[k]
		}
		for k, q := range i.tx {
			q.zc = i.pool.shares[k]
		}
	}
	i.stop = make(chan struct{})
	i.done = make(chan struct{})
	go i.runClient()
	return nil
}

// Config returns the interface's configuration with defaults filled in.
func (i *Interface) Config() Config { return i.cfg }

// RxQueue returns receive queue n (0 <= n < Config().RxQueues). Queues beyond the negotiated
// count stay down.
func (i *Interface) RxQueue(n int) *RxQueue { return i.rx[n] }

// TxQueue returns transmit queue n (0 <= n < Config().TxQueues).
func (i *Interface) TxQueue(n int) *TxQueue { return i.tx[n] }

// Up reports whether the link is connected.
func (i *Interface) Up() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.conn != nil
}

// Link describes the current connection; ok is false while down.
func (i *Interface) Link() (info LinkInfo, ok bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.link, i.conn != nil
}

// Err is why the last connection attempt failed or the last connection ended (nil if none has).
func (i *Interface) Err() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.lastErr
}

// Changed returns a channel that is closed at the next change of state: link up, link down,
// a failed attempt, or Close. Take it before looking at the state (Up, a queue's ErrDown), then
// wait on it: a change between the look and the call is not the next one, and a server's link
// may not change again. WaitUp does this.
func (i *Interface) Changed() <-chan struct{} {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.changed
}

// WaitUp waits until the link is up. It returns early with a *PeerError when the peer refused the
// latest attempt (a wrong secret, an unknown id: the reason is the peer's), with ErrClosed after
// Close, or with the context's error. A client goes on retrying after a refusal regardless.
func (i *Interface) WaitUp(ctx context.Context) error {
	for {
		i.mu.Lock()
		up, closed, err, refusal, ch := i.conn != nil, i.closed, i.lastErr, i.refusal, i.changed
		i.mu.Unlock()
		switch {
		case closed:
			return ErrClosed
		case up:
			return nil
		case refusal != nil:
			return refusal
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("memif %s: waiting for link up: %w (last error: %v)", i.cfg.Name, ctx.Err(), err)
		case <-ch:
		}
	}
}

// broadcast wakes everyone waiting on Changed. Call with mu held.
func (i *Interface) broadcast() {
	close(i.changed)
	i.changed = make(chan struct{})
}

// setErr records a failed attempt; a *PeerError during the handshake is a refusal. Call without mu.
func (i *Interface) setErr(err error, inHandshake bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.lastErr = err
	i.refusal = nil
	var pe *PeerError
	if inHandshake && errors.As(err, &pe) {
		i.refusal = err
	}
	i.broadcast()
}

// attach installs an established connection into the queues and marks the link up. It fails if
// the interface was closed meanwhile.
func (i *Interface) attach(c *connection) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return ErrClosed
	}
	var rxRings, txRings []ringInfo
	if i.cfg.Role == RoleClient {
		rxRings, txRings = c.m2s, c.s2m
	} else {
		rxRings, txRings = c.s2m, c.m2s
	}
	mems := c.mems()
	client := i.cfg.Role == RoleClient
	rxName, txName := "M2S", "S2M"
	if !client {
		rxName, txName = txName, rxName
	}
	c.brk = &breaker{ctl: c.ctl}
	c.trap = newFaultTrap(c)
	for k, ri := range txRings {
		name := fmt.Sprintf("%s ring %d", txName, k)
		if err := i.tx[k].kicker.set(ri.eventfd, name, c.brk); err != nil {
			for _, q := range i.tx[:k] {
				q.kicker.release()
			}
			return err
		}
	}
	for k, ri := range rxRings {
		q := i.rx[k]
		q.setConn(ri, mems, client, c.bufSize, c)
		q.path = pickRxPath(client, q.zc != nil)
		q.ringName = fmt.Sprintf("%s ring %d", rxName, k)
		switch {
		case q.zc != nil:
			q.adoptArmedZC(&c.armed[k])
		case client:
			// Armed when the connection's memory was made, before CONNECT (newClientConnection),
			// so that a server may send as soon as its link is up; it may have filled slots
			// already, which a refill here would clobber. Only head is stored again: DPDK's
			// server zeroes head and tail when it gets CONNECT, and the descriptors it leaves.
			q.limit = uint16(q.ring.Size())
			q.own.Store(q.limit)
		}
		q.unpark()
	}
	for k, ri := range txRings {
		q := i.tx[k]
		q.setConn(ri, mems, client, c.bufSize, c)
		q.path = pickTxPath(client, q.zc != nil)
		q.unpark()
	}
	i.pending = nil
	i.conn = c
	i.linkUps++
	i.lastErr, i.refusal = nil, nil
	i.link = LinkInfo{
		PeerName:   c.peerName,
		PeerApp:    c.peerApp,
		RxQueues:   len(rxRings),
		TxQueues:   len(txRings),
		RingSize:   rxRings[0].r.Size(),
		Regions:    len(c.regions),
		HugePages:  client && c.regions[0].Huge,
		Generation: i.link.Generation + 1,
	}
	i.broadcast()
	i.log.Info("memif link up", "peer", c.peerName, "peer_app", c.peerApp,
		"rx_queues", len(rxRings), "tx_queues", len(txRings), "ring_size", i.link.RingSize)
	return nil
}

// setConn points the queue at a ring of a new connection. The queue must be parked.
func (q *queue) setConn(ri ringInfo, mems [][]byte, client bool, bufSize uint32, c *connection) {
	q.ring = ri.r
	q.trap = c.trap
	q.brk = c.brk
	q.erc = ri.erc
	q.regions = mems
	q.eventfd = ri.eventfd
	q.efile = ri.efile
	q.bufRegion = 0
	q.bufBase = ri.bufBase
	q.bufSize = bufSize
	q.bufs = nil
	if client {
		q.bufs = mems[0]
	}
	q.cursor, q.limit, q.reclaim = 0, 0, 0
	q.own, q.peer = ri.r.Tail(), ri.r.Head()
	if client {
		q.own, q.peer = q.peer, q.own
	}
	if q.zc != nil {
		q.slots = make([]uint32, ri.r.Size())
		q.scratch = make([]uint32, ri.r.Size())
	}
	if !client {
		// The tail is ours; start where the ring says, as the client initialised it.
		q.cursor = ri.r.LoadTail()
		q.limit = q.cursor + uint16(ri.r.Size()) // Rx: a ring's worth past our tail
	}
}

// detach takes the connection down: queues parked, memory unmapped, fds closed.
func (i *Interface) detach(c *connection, reason error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.pending == c.ctl {
		i.pending = nil
	}
	if i.conn != c {
		return
	}
	for _, q := range i.rx {
		q.park()
	}
	for _, q := range i.tx {
		q.park()
	}
	for _, q := range i.rx {
		q.recoverZC(true)
		q.clearConn()
	}
	for _, q := range i.tx {
		q.recoverZC(false)
		q.clearConn()
		q.kicker.release()
	}
	if err := c.close(); err != nil {
		i.log.Warn("memif: releasing connection resources", "err", err)
	}
	i.conn = nil
	i.lastErr = reason
	i.recordDown(reason)
	i.broadcast()
	i.log.Info("memif link down", "reason", reason)
}

// clearConn drops the queue's references to unmapped memory. The queue must be parked.
func (q *queue) clearConn() {
	q.ring, q.peer, q.own = ring.Ring{}, ring.Index{}, ring.Index{}
	q.regions, q.bufs = nil, nil
	q.eventfd, q.efile, q.erc = -1, nil, nil
	q.trap, q.brk = nil, nil
}

// Close disconnects (sending DISCONNECT with a reason to the peer), stops reconnecting, releases
// all memory and, for the last server interface on a socket, stops listening.
func (i *Interface) Close() error {
	i.mu.Lock()
	if i.closed {
		i.mu.Unlock()
		return nil
	}
	i.closed = true
	status := i.status
	ctl := i.pending
	if i.conn != nil {
		ctl = i.conn.ctl
	}
	i.broadcast()
	i.mu.Unlock()

	if ctl != nil {
		// Best effort: the peer may be gone already.
		_ = ctl.Send(socket.Disconnect{Reason: "interface closed"}, -1)
		ctl.Close() // wakes the goroutine serving the connection, which detaches it
	}
	if i.cfg.Role == RoleClient {
		close(i.stop)
		<-i.done
		if i.pool != nil {
			// Buffers the application still holds die with a private pool.
			if err := i.pool.leave(); err != nil {
				return fmt.Errorf("memif %s: release zero-copy pool: %w", i.cfg.Name, err)
			}
		}
	} else {
		i.srv.unregister(i)
	}
	for _, q := range i.tx {
		q.kicker.stop()
	}
	if status != nil {
		status.close() // after the link is down: its last word is the final counters
	}
	return nil
}
