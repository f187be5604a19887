package release

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestStore32PublishesEarlierWrites: a lock whose unlock is Store32 keeps a plain counter exact
// under contention (it would lose increments if the store overtook the writes before it).
func TestStore32PublishesEarlierWrites(t *testing.T) {
	var lock int32
	counter := 0
	const goroutines, rounds = 4, 100000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range rounds {
				for !atomic.CompareAndSwapInt32(&lock, 0, 1) {
				}
				counter++
				Store32(&lock, 0)
			}
		})
	}
	wg.Wait()
	if counter != goroutines*rounds {
		t.Fatalf("counter %d, want %d", counter, goroutines*rounds)
	}
	if atomic.LoadInt32(&lock) != 0 {
		t.Fatal("lock left taken")
	}
}
