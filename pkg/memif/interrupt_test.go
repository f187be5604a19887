package memif_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

// noTimeout makes Wait return only on a signal, ctx or disconnect, never on its safety timer.
var noTimeout = memif.Config{MaxSleep: time.Hour}

// waitUnmasked waits until the sleeping receiver has asked the peer for signals.
func waitUnmasked(t *testing.T, q *memif.RxQueue) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s, ok := q.RingState(); ok && s.Flags&ring.FlagMaskInt == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("receiver never unmasked its ring")
		}
		time.Sleep(time.Millisecond) // polling shared memory: there is nothing to block on
	}
}

// TestWaitWakesOnSignal: a sleeping receiver (both roles) is woken by the peer's send, and only
// by it (the safety timer is an hour).
func TestWaitWakesOnSignal(t *testing.T) {
	srv, cli := memiftest.Pair(t, noTimeout, noTimeout)
	for _, ends := range [][2]*memif.Interface{{cli, srv}, {srv, cli}} {
		tx, rx := ends[0].TxQueue(0), ends[1].RxQueue(0)
		if s, _ := rx.RingState(); s.Flags&ring.FlagMaskInt == 0 {
			t.Fatal("a polling receiver must mask interrupts")
		}
		done := make(chan error, 1)
		go func() { done <- rx.Wait(context.Background()) }()
		waitUnmasked(t, rx)
		if tx.TxBurst([][]byte{[]byte("wake up")}) != 1 {
			t.Fatal("send failed")
		}
		if err := <-done; err != nil {
			t.Fatalf("Wait = %v", err)
		}
		buf := [][]byte{make([]byte, 0, 64)}
		if n := rx.RxBurst(buf); n != 1 || string(buf[0]) != "wake up" {
			t.Fatalf("after wake-up: %d %q", n, buf[0])
		}
		if s, _ := rx.RingState(); s.Flags&ring.FlagMaskInt == 0 {
			t.Fatal("receiver did not mask again after waking")
		}
	}
}

// TestMaskedPeerNotSignalled: while the receiver polls, the sender writes no eventfd: after
// draining, a Wait finds no stale signal and sleeps until its context ends.
func TestMaskedPeerNotSignalled(t *testing.T) {
	srv, cli := memiftest.Pair(t, noTimeout, noTimeout)
	tx, rx := cli.TxQueue(0), srv.RxQueue(0)
	bufs := make([][]byte, 64)
	for i := range bufs {
		bufs[i] = make([]byte, 0, 64)
	}
	for range 10 {
		tx.TxBurst([][]byte{[]byte("a"), []byte("b")})
		rx.RxBurst(bufs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := rx.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v: a signal was sent while the receiver polled", err)
	}
}

// TestWaitReturnsAtOnceWhenPending: packets that arrived before Wait are not slept on.
func TestWaitReturnsAtOnceWhenPending(t *testing.T) {
	srv, cli := memiftest.Pair(t, noTimeout, noTimeout)
	cli.TxQueue(0).TxBurst([][]byte{[]byte("early")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.RxQueue(0).Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestWaitEndsOnDisconnectAndCancel(t *testing.T) {
	srv, cli := memiftest.Pair(t, noTimeout, noTimeout)
	rx := srv.RxQueue(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rx.Wait(ctx) }()
	waitUnmasked(t, rx)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel = %v", err)
	}
	go func() { done <- rx.Wait(context.Background()) }()
	waitUnmasked(t, rx)
	cli.Close()
	if err := <-done; !errors.Is(err, memif.ErrDown) {
		t.Fatalf("Wait across a disconnect = %v", err)
	}
	if err := rx.Wait(context.Background()); !errors.Is(err, memif.ErrDown) {
		t.Fatalf("Wait on a down queue = %v", err)
	}
}

// TestAdaptiveReceive: RxBurstWait gets every packet of a sender that pauses between bursts.
func TestAdaptiveReceive(t *testing.T) {
	srv, cli := memiftest.Pair(t, noTimeout, noTimeout)
	tx, rx := cli.TxQueue(0), srv.RxQueue(0)
	const rounds = 50
	go func() {
		for i := range rounds {
			p := []byte{byte(i)}
			for tx.TxBurst([][]byte{p}) != 1 {
			}
			time.Sleep(2 * time.Millisecond) // a bursty sender: the receiver should fall asleep between
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bufs := [][]byte{make([]byte, 0, 64)}
	for i := range rounds {
		n, err := rx.RxBurstWait(ctx, bufs, 100)
		if err != nil || n != 1 || bufs[0][0] != byte(i) {
			t.Fatalf("round %d: %d %v %v", i, n, err, bufs[0])
		}
	}
}
