package memif

import (
	"encoding/binary"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/pkg/socket"
)

// TestKickerReleaseFreesBlockedWrite plays a peer that won the race between the kicker's
// O_NONBLOCK check and its write: the write blocks on a full, blocking eventfd. Releasing the
// target (a disconnect) must not wait for it, must drain the counter so that the write completes,
// and the kicker must then close its fd and serve the next connection.
func TestKickerReleaseFreesBlockedWrite(t *testing.T) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC) // blocking, as the peer left it
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	var full [8]byte
	binary.NativeEndian.PutUint64(full[:], 0xfffffffffffffffe)
	if _, err := unix.Write(efd, full[:]); err != nil {
		t.Fatal(err)
	}
	entered, returned := make(chan int, 2), make(chan error, 2)
	k := startKicker(func(fd int) error {
		entered <- fd
		_, err := unix.Write(fd, eventfdOne[:]) // no check: the peer cleared the flag after it
		returned <- err
		return nil
	})
	defer k.stop()
	ctl := socketPairConn(t)
	before := eventfds(t)
	if err := k.set(efd, "S2M ring 0", &breaker{ctl: ctl}); err != nil {
		t.Fatal(err)
	}
	k.ch <- struct{}{}
	<-entered
	select {
	case err := <-returned:
		t.Fatalf("the write into a full blocking eventfd returned (%v): the test proves nothing", err)
	default:
	}
	done := make(chan struct{})
	go func() { k.release(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("release waited for the blocked write")
	}
	if err := <-returned; err != nil {
		t.Fatalf("the blocked write ended with %v, want it completed by the drain", err)
	}
	// The kicker closes its dup once the write is back.
	deadline := time.Now().Add(10 * time.Second)
	for eventfds(t) != before {
		if time.Now().After(deadline) {
			t.Fatalf("%d eventfds open, want %d: the kicker kept its dup", eventfds(t), before)
		}
		time.Sleep(time.Millisecond) // polling the kernel's fd table: there is nothing to wait on
	}
	// It serves the next connection.
	if err := k.set(efd, "S2M ring 0", &breaker{ctl: ctl}); err != nil {
		t.Fatal(err)
	}
	k.ch <- struct{}{}
	<-entered
	if err := <-returned; err != nil {
		t.Fatalf("second kick: %v", err)
	}
}

// eventfds counts the eventfds this process holds.
func eventfds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == "anon_inode:[eventfd]" {
			n++
		}
	}
	return n
}

// socketPairConn is a control connection nobody reads, for a breaker.
func socketPairConn(t *testing.T) *socket.Conn {
	t.Helper()
	addr := "@memif-kicker-test-" + t.Name()
	ln, err := socket.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	c, err := socket.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
