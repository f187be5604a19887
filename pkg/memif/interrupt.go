package memif

import (
	"context"
	"errors"
	"os"
	"time"

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
	f := q.efile
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
	err := sleepOn(ctx, f, q.maxSleep)
	q.mask()
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
	if q.client {
		return q.ring.LoadTail() != q.cursor
	}
	return q.ring.LoadHead() != q.cursor
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

// sleepOn blocks in the runtime poller until the eventfd is signalled, drains it, and returns.
func sleepOn(ctx context.Context, f *os.File, maxSleep time.Duration) error {
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
	var b [8]byte
	_, err := f.Read(b[:])
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if hasDeadline && !time.Now().Before(ctxDeadline) {
			// The context's own timer may not have fired yet: say so ourselves.
			return context.DeadlineExceeded
		}
		return nil
	}
	return err
}
