package memif

import (
	"fmt"
	"runtime/debug"
	"sync"
	"time"
	"unsafe"

	"github.com/memifnet/memifnet/pkg/socket"
)

// A region that can fault (alloc.Region.MayFault) kills the process that touches the hole with
// SIGBUS. Two kinds: a file not sealed against shrinking (a hugepage pool unit this side mapped
// and passed to the peer, or a file the peer passed us), which the peer can cut short at any
// time; and hugetlbfs memory, sealed or not, where the peer can punch a hole (fallocate; no seal
// but F_SEAL_WRITE prevents that, and a shared writable mapping rules that seal out) that is
// refilled on the next touch only if a free huge page is left, and where a peer region this side
// maps without a reservation (MAP_NORESERVE, so that a sparse peer region reserves nothing here)
// is filled on first touch the same way. On a connection with such a region, every burst and
// every Wait runs with the Go runtime's panic-on-fault set, and a fault in the connection's shared
// memory is turned into a link-down: the peer gets a DISCONNECT with the reason, Err and the log
// say it, and the interface goes on as after any disconnect (a client reconnects, a server waits).
// A connection whose regions are all sealed memfds of ordinary memory (ours, DPDK's and
// libmemif's in copy mode; a hole punched there is refilled with a fresh page) pays one nil check
// per call.
//
// Zero-copy buffers handed to the caller (RxBurstZC, Alloc) are views of the pool region and are
// touched in the caller's code, where no fault is caught: that is why a zero-copy pool must be a
// sealed memfd of ordinary memory (NewPool refuses anything else).

// FaultError is why a link went down after its shared memory faulted.
type FaultError struct {
	Addr   uintptr
	Region int
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("shared memory fault at %#x in region %d: the peer cut the region short or punched a hole in it", e.Addr, e.Region)
}

// faultTrap catches faults in one connection's shared memory.
type faultTrap struct {
	regions [][]byte
	brk     *breaker // the connection's: a fault ends it
}

// newFaultTrap returns a trap for c, or nil when none of its regions can fault.
func newFaultTrap(c *connection) *faultTrap {
	need := false
	for _, r := range c.regions {
		need = need || r.MayFault
	}
	if !need {
		return nil
	}
	return &faultTrap{regions: c.mems(), brk: c.brk}
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
	t.brk.fire(fe)
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

// breaker ends a connection from the data path: a fault in shared memory or a misbehaving
// eventfd is recorded here, and the connection's control goroutine, which is reading the control
// socket, is woken to disconnect with that reason.
type breaker struct {
	ctl *socket.Conn

	once sync.Once
	mu   sync.Mutex
	err  error
}

// fire records the first reason and wakes the control goroutine.
func (b *breaker) fire(err error) {
	b.once.Do(func() {
		b.mu.Lock()
		b.err = err
		b.mu.Unlock()
		_ = b.ctl.SetReadDeadline(time.Unix(1, 0))
	})
}

// reason is what fire recorded, or nil.
func (b *breaker) reason() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// afterServe is what ended a connection that serveConnected stopped serving: a reason the data
// path found (the peer gets a DISCONNECT saying so) or reason.
func (c *connection) afterServe(reason error) error {
	err := c.brk.reason()
	if err == nil {
		return reason
	}
	_ = c.ctl.SetDeadline(time.Now().Add(time.Second))
	_ = c.ctl.Send(socket.Disconnect{Reason: err.Error()}, -1)
	return err
}
