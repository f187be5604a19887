package testutil

import (
	"os"
	"testing"
	"time"
)

// Eventually polls cond until it holds and fails the test (what: the condition awaited) if it
// does not within d. For state that changes in the background and signals nothing a test could
// wait on (a watcher, a connection goroutine closing its fds, a file a daemon writes); where
// there is a signal, wait on it instead.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// OpenFds is the number of fds this process holds: a leak check compares it before and after.
func OpenFds(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
