package tsc

import (
	"testing"
	"time"
)

// TestReadAdvances: the counter moves forward, and its rate is a plausible CPU or 1 GHz clock.
func TestReadAdvances(t *testing.T) {
	s := Start()
	a := Read()
	deadline := time.Now().Add(20 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	b := Read()
	if b <= a {
		t.Fatalf("counter went from %d to %d", a, b)
	}
	if mhz := s.MHz(); mhz < 100 || mhz > 10000 {
		t.Fatalf("counter rate %.1f MHz: not a clock of this world", mhz)
	}
}

func BenchmarkRead(b *testing.B) {
	var x uint64
	for b.Loop() {
		x += Read()
	}
	_ = x
}

func BenchmarkTimeNow(b *testing.B) {
	var x int64
	for b.Loop() {
		x += time.Now().UnixNano()
	}
	_ = x
}
