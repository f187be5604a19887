package memif

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
)

// ErrDown is returned by Wait on a queue that is not connected.
var ErrDown = errors.New("memif: queue is down")

// Wait sleeps until the peer signals that packets may be waiting on this queue, ctx ends, or
// Config.MaxSleep passes (then it returns nil: poll again). It holds no OS thread while it sleeps: the
// ring's eventfd sits in the Go runtime's poller. While sleeping the queue asks the peer for
// signals (MASK_INT cleared); while polling it asks for none (MASK_INT set), so a busy queue costs
// the peer no system calls. Call it from the queue's owner goroutine, between bursts.
func (q *RxQueue) Wait(ctx context.Context) error {
	if !q.acquire() {
		return ErrDown
	}
	if t := q.trap; t != nil {
		defer t.caught(&q.queue, arm())
	}
	f, rc, brk, name := q.efile, q.erc, q.brk, q.ringName
	// Unmask, then look again: a packet published before the peer could see the unmask would
	// otherwise never be signalled.
	q.ring.StoreFlags(0)
	ring.Fence()
	pending := q.pending()
	q.release()
	if pending || f == nil {
		q.mask()
		return nil
	}
	err := sleepOn(ctx, f, rc, q.maxSleep)
	q.mask()
	var bad *badEventfd
	if errors.As(err, &bad) {
		brk.fire(&EventfdError{Ring: name, Problem: bad.problem})
		return nil // the link goes down at once: the next call says so
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if errors.Is(err, os.ErrClosed) {
		return ErrDown // disconnected while we slept
	}
	return nil
}

// RxBurstWait polls up to spins times and then sleeps in Wait until packets arrive: the adaptive
// mode, busy while traffic flows, asleep when it stops. It returns the packets received, or an
// error when ctx ends or the queue goes down.
func (q *RxQueue) RxBurstWait(ctx context.Context, pkts [][]byte, spins int) (int, error) {
	for {
		for range max(spins, 1) {
			if n := q.RxBurst(pkts); n > 0 {
				return n, nil
			}
		}
		if err := q.Wait(ctx); err != nil {
			return 0, err
		}
	}
}

// pending reports whether the peer has published descriptors we have not consumed. Guard held.
func (q *RxQueue) pending() bool {
	return q.peer.Load() != q.cursor
}

// mask goes back to polling: the peer need not signal.
func (q *RxQueue) mask() {
	if !q.acquire() {
		return
	}
	if t := q.trap; t != nil {
		defer t.caught(&q.queue, arm())
	}
	q.ring.StoreFlags(ring.FlagMaskInt)
	q.release()
}

// sleepOn sleeps in the runtime poller until the eventfd is signalled (then drains it), the
// deadline passes or ctx ends. The peer shares the eventfd's open file description, and with it
// O_NONBLOCK: a peer that clears the flag would turn a plain read(2) into one that sleeps in the
// kernel, past every deadline (and Close would wait for it), and one that drains the counter
// between the poller's wake-up and our read would make that read sleep too. So the fd is never
// read(2): the drain is a preadv2 with RWF_NOWAIT, non-blocking per call whatever the shared
// flag says (kernels whose eventfd refuses the flag leave the counter undrained: the poller is
// edge-triggered, so each signal still wakes us once). A peer that clears O_NONBLOCK is
// disconnected all the same (brk), as its fd is no longer one this side may block on.
func sleepOn(ctx context.Context, f *os.File, rc syscall.RawConn, maxSleep time.Duration) error {
	deadline := time.Now().Add(maxSleep)
	ctxDeadline, hasDeadline := ctx.Deadline()
	if hasDeadline && ctxDeadline.Before(deadline) {
		deadline = ctxDeadline
	}
	if err := f.SetReadDeadline(deadline); err != nil {
		return err
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
		defer stop()
	}
	calls := 0
	var bad error
	err := rc.Read(func(fd uintptr) bool {
		calls++
		if calls == 1 {
			if bad = checkNonblock(int(fd)); bad != nil {
				return true
			}
		}
		// A signal already counted ends the wait at once; after a wake-up, whatever the peer did
		// to the counter meanwhile, the wait is over (poll again).
		return drain(int(fd)) || calls > 1
	})
	if bad != nil {
		return &badEventfd{problem: bad.Error()}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if hasDeadline && !time.Now().Before(ctxDeadline) {
			// The context's own timer may not have fired yet: say so ourselves.
			return context.DeadlineExceeded
		}
		return nil
	}
	if err != nil {
		return os.ErrClosed // the only other error of a poller read: the fd was closed under us
	}
	return nil
}

// badEventfd is sleepOn's report of an eventfd the peer misused.
type badEventfd struct{ problem string }

func (e *badEventfd) Error() string { return e.problem }

// drain empties an eventfd's counter without ever blocking and reports whether it held a signal.
func drain(fd int) bool {
	var b [8]byte
	n, err := unix.Preadv2(fd, [][]byte{b[:]}, -1, unix.RWF_NOWAIT)
	return err == nil && n == 8
}

// checkNonblock refuses an eventfd whose shared O_NONBLOCK the peer cleared.
func checkNonblock(fd int) error {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return fmt.Errorf("fcntl: %w", err)
	}
	if fl&unix.O_NONBLOCK == 0 {
		return errors.New("the peer cleared O_NONBLOCK on it, which would make this side block")
	}
	return nil
}

// EventfdError is why a link went down after the peer misused a ring's interrupt eventfd.
type EventfdError struct {
	Ring    string // "S2M ring 0", "M2S ring 1"
	Problem string
}

func (e *EventfdError) Error() string {
	return fmt.Sprintf("interrupt eventfd of %s: %s", e.Ring, e.Problem)
}

// A kicker signals the peer of one transmit queue on a goroutine of its own: TxBurst hands it
// the kick through a channel of one slot and never waits, so no peer can make a burst block.
// Kernels up to this one (6.18) refuse RWF_NOWAIT on an eventfd write (EOPNOTSUPP), and the
// peer shares the fd's O_NONBLOCK: a write(2) of the signal can block in the kernel whenever the
// peer clears the flag and fills the counter (2^64-2). Checking the flag first does not make the
// write safe (the peer may clear it in between), but it makes the kicker the only thing that can
// ever block, and such a peer is found out: a cleared flag, or a full counter (EAGAIN, which an
// honest peer cannot cause: it would take 2^64 signals), ends the link with an EventfdError. A
// kicker the peer does get to block in a write is released at disconnect: the drain empties the
// counter, which completes the write. One kicker per queue for the interface's life bounds the
// threads a peer can hold this way to the number of transmit queues.
type kicker struct {
	ch    chan struct{} // a pending kick; TxBurst sends without waiting
	quit  chan struct{}
	write func(fd int) error // kickOnce

	mu  sync.Mutex
	cur *kickTarget // the connection's eventfd; nil while down
	old *kickTarget // a released target whose write is still blocked
}

// kickTarget is one connection's eventfd of a ring, a dup the kicker owns: it is closed once it
// is released and no write is in flight, so a write never reaches a reused fd number.
type kickTarget struct {
	fd       int
	ring     string
	brk      *breaker
	inflight bool
	released bool
}

func newKicker() *kicker { return startKicker(kickOnce) }

// startKicker starts a kicker that signals with write (tests stand in for the peer's race).
func startKicker(write func(fd int) error) *kicker {
	k := &kicker{ch: make(chan struct{}, 1), quit: make(chan struct{}), write: write}
	go k.run()
	return k
}

func (k *kicker) run() {
	for {
		select {
		case <-k.quit:
			return
		case <-k.ch:
		}
		k.mu.Lock()
		t := k.cur
		if t == nil {
			k.mu.Unlock()
			continue
		}
		t.inflight = true
		k.mu.Unlock()
		err := k.write(t.fd)
		k.mu.Lock()
		t.inflight = false
		if t.released {
			unix.Close(t.fd)
			if k.old == t {
				k.old = nil
			}
		}
		k.mu.Unlock()
		if err != nil {
			t.brk.fire(&EventfdError{Ring: t.ring, Problem: err.Error()})
		}
	}
}

// kickOnce adds 1 to the peer's counter.
func kickOnce(fd int) error {
	if err := checkNonblock(fd); err != nil {
		return err
	}
	_, err := unix.Write(fd, eventfdOne[:])
	if errors.Is(err, unix.EAGAIN) {
		return errors.New("its counter is full, which only a peer writing huge values to it can do")
	}
	return err
}

// set points the kicker at a new connection's eventfd (duplicated: the connection closes its own).
func (k *kicker) set(efd int, ring string, brk *breaker) error {
	fd, err := unix.FcntlInt(uintptr(efd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s eventfd: %w", ring, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.old != nil && k.old.inflight {
		drain(k.old.fd) // the peer may have let go meanwhile: try to free the write again
	}
	k.cur = &kickTarget{fd: fd, ring: ring, brk: brk}
	return nil
}

// release detaches the current eventfd; a write still blocked on it is freed by draining the
// counter, and the fd is closed when that write returns.
func (k *kicker) release() {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.cur
	if t == nil {
		return
	}
	k.cur = nil
	t.released = true
	if !t.inflight {
		unix.Close(t.fd)
		return
	}
	drain(t.fd)
	k.old = t
}

// stop ends the kicker goroutine (at Close); a write blocked on a released fd ends it later.
func (k *kicker) stop() {
	k.release()
	close(k.quit)
}
