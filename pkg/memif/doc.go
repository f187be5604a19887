// Package memif is a pure-Go memif: the shared-memory packet interface of FD.io VPP, libmemif and
// DPDK's net_memif (protocol 2.0), wire compatible with all three, with no cgo.
//
// An Interface is one memif port. Open it with a Config: a client (RoleClient) dials a socket,
// creates the shared memory and reconnects on its own after the server goes away; a server
// (RoleServer) listens, and several server interfaces (different ids) may share one socket. In a
// pod wired by memif-cni, portspec.Discover finds the ports and OpenPort opens one. Packets move
// through the interface's queues in bursts: RxQueue.RxBurst and TxQueue.TxBurst copy between
// shared memory and the caller's slices; a zero-copy client (Config.ZeroCopy) also has RxBurstZC,
// TxBurstZC and Alloc, which hand out views of a buffer Pool instead. The bursts never allocate,
// take no lock per packet, and make no system call: the eventfd signal a sleeping peer asked for is
// handed to a goroutine of the transmit queue's own, so that no peer can make a burst wait. A
// zero-copy burst, Release and Alloc lock the queue pair's pool share once per call: the control
// goroutines put a dead connection's buffers back into it and arm a new one's rings from it while
// the owner goes on releasing, and that lock is held for no longer than such a hand-over.
//
// # Who may call what, from which goroutine
//
// Open, Close and the methods of Interface (Up, Link, Err, Changed, WaitUp, Config, Stats, RxQueue,
// TxQueue) may be called from any goroutine. The handshake, reconnects and disconnects run on
// goroutines of the interface's own; they hand a connection to the data path, and take it back,
// only through each queue's guard word.
//
// Each queue has one owner: the data-path calls of a queue (RxQueue: RxBurst, RxBurstWait, Wait,
// RxBurstZC, Release; TxQueue: TxBurst, TxBurstZC, Alloc) must come from one goroutine at a time.
// Different queues may run on different goroutines in parallel, without any locking between them.
// In zero-copy mode RxQueue k and TxQueue k draw on the same share of the pool, so queue pair k is
// one owner: call both from one goroutine, and, when interfaces share a Pool (whose peers trust
// each other: PoolConfig.PeersTrustEachOther), queue pairs k of all of them. Pool.BuffersFree(k) and the queues' BuffersFree belong to that goroutine too.
// RxQueue.Forward and ForwardDrop (a forwarder's data path: received packets sent on another
// interface, with one copy or none) are data-path calls of both queues they take.
//
// Stats, RingState, Up and Index of a queue may be called from any goroutine: Stats and RingState
// take the guard for the nanoseconds of a snapshot (a burst waits that long), Up reads it.
//
// While the link is down a queue is parked: its bursts return 0 and Wait returns ErrDown, neither
// is an error to recover from; the queue comes back when the interface reconnects. The guard makes
// a disconnect wait for a running burst, so memory is never unmapped under one.
//
// Close may be called from any goroutine, also while owners are in a burst: it waits for running
// bursts, sends the peer a DISCONNECT, stops reconnecting and releases the memory. Calling it again
// does nothing. After Close, bursts return 0, Wait returns ErrDown and WaitUp returns ErrClosed.
//
// # Memory the caller holds
//
// RxBurst copies into the caller's slices and TxBurst copies out of them: they stay the caller's.
// A zero-copy Buffer's Data is a view of the pool: a received one is valid until it is released
// or sent; the pool stays mapped across reconnects, until Close (a private pool) or Pool.Close.
// Stop using buffers before then: afterwards their memory is unmapped.
//
// The peer is not trusted: every control message and descriptor is validated, and a bad one is
// dropped, counted in Stats and, for the control channel, answered with a DISCONNECT naming it.
// docs/memif.md has the details, docs/performance.md the measurements.
package memif
