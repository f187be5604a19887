package memif

import (
	"fmt"
	"runtime/debug"
	"sync"
	"time"
	"unsafe"

	"github.com/memifnet/memifnet/pkg/socket"
)

// A region whose file is not sealed against shrinking (alloc.Region.Truncatable: a hugepage pool
// unit this side mapped and passed to the peer, or a file the peer passed us) can be cut short
// by the peer at any time, and touching the mapping past the new end faults with SIGBUS, which
// would kill the process. On a connection with such a region, every burst and every Wait runs
// with the Go runtime's panic-on-fault set, and a fault in the connection's shared memory is
// turned into a link-down: the peer gets a DISCONNECT with the reason, Err and the log say it,
// and the interface goes on as after any disconnect (a client reconnects, a server waits). A
// connection whose regions are all sealed (memfds with F_SEAL_SHRINK: ours, DPDK's and
// libmemif's in copy mode) pays one nil check per call.
//
// Zero-copy buffers handed to the caller (RxBurstZC, Alloc) are views of the pool region and are
// touched in the caller's code, where no fault is caught: a zero-copy pool shared with an
// untrusted peer must be sealed (the default private pool is).

// FaultError is why a link went down after its shared memory faulted.
type FaultError struct {
	Addr   uintptr
	Region int
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("shared memory fault at %#x in region %d: the peer cut the region short", e.Addr, e.Region)
}

// faultTrap catches faults in one connection's shared memory.
type faultTrap struct {
	regions [][]byte
	ctl     *socket.Conn

	once sync.Once
	mu   sync.Mutex
	err  *FaultError
}

// newFaultTrap returns a trap for c, or nil when none of its regions can shrink.
func newFaultTrap(c *connection) *faultTrap {
	need := false
	for _, r := range c.regions {
		need = need || r.Truncatable
	}
	if !need {
		return nil
	}
	return &faultTrap{regions: c.mems(), ctl: c.ctl}
}

// arm turns the calling goroutine's faults into panics for the burst that follows; pass what it
// returns to caught, deferred.
func arm() bool { return debug.SetPanicOnFault(true) }

// caught ends a trapped call: it restores the goroutine's fault setting and, if the call faulted
// in the connection's shared memory, releases the queue (the call held it) and takes the link
// down. Any other panic goes on. It must be deferred directly (it calls recover).
func (t *faultTrap) caught(q *queue, armed bool) {
	debug.SetPanicOnFault(armed)
	r := recover()
	if r == nil {
		return
	}
	fe := t.owns(r)
	if fe == nil {
		panic(r)
	}
	q.release()
	t.fire(fe)
}

// owns says whether panic value r is a fault in one of the regions.
func (t *faultTrap) owns(r any) *FaultError {
	f, ok := r.(interface{ Addr() uintptr })
	if !ok {
		return nil
	}
	addr := f.Addr()
	for k, m := range t.regions {
		// Safe: only the region's bounds are compared, nothing is dereferenced.
		base := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
		if addr >= base && addr-base < uintptr(len(m)) {
			return &FaultError{Addr: addr, Region: k}
		}
	}
	return nil
}

// fire records the first fault and wakes the connection's control goroutine, which is reading
// the control socket: it sees the fault and disconnects.
func (t *faultTrap) fire(fe *FaultError) {
	t.once.Do(func() {
		t.mu.Lock()
		t.err = fe
		t.mu.Unlock()
		_ = t.ctl.SetReadDeadline(time.Unix(1, 0))
	})
}

// fault is the recorded fault, or nil.
func (t *faultTrap) fault() *FaultError {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// afterServe is what ended a connection that serveConnected stopped serving: a fault (the peer
// gets a DISCONNECT saying so) or reason.
func (c *connection) afterServe(reason error) error {
	fe := c.trap.fault()
	if fe == nil {
		return reason
	}
	_ = c.ctl.SetDeadline(time.Now().Add(time.Second))
	_ = c.ctl.Send(socket.Disconnect{Reason: fe.Error()}, -1)
	return fe
}
