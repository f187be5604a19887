package ring

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// shm maps anonymous shared memory, like a memif region.
func shm(t testing.TB, size int) []byte {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return mem
}

func TestLayout(t *testing.T) {
	for _, cl := range []int{64, 128} {
		mem := shm(t, Size(10, cl))
		r, err := New(mem, 10, cl)
		if err != nil {
			t.Fatal(err)
		}
		r.SetCookie(Cookie)
		r.StoreFlags(FlagMaskInt)
		r.StoreHead(0x1234)
		r.StoreTail(0xbeef)
		r.Descs[1] = Desc{Flags: DescFlagNext, Region: 2, Length: 3, Offset: 4, Metadata: 5}
		ne := binary.NativeEndian
		if ne.Uint32(mem[0:]) != Cookie || ne.Uint16(mem[4:]) != FlagMaskInt || ne.Uint16(mem[6:]) != 0x1234 ||
			ne.Uint16(mem[cl:]) != 0xbeef {
			t.Errorf("cache line %d: header % x / tail % x", cl, mem[:8], mem[cl:cl+2])
		}
		d := mem[2*cl+16:]
		if ne.Uint16(d[0:]) != 1 || ne.Uint16(d[2:]) != 2 || ne.Uint32(d[4:]) != 3 || ne.Uint32(d[8:]) != 4 || ne.Uint32(d[12:]) != 5 {
			t.Errorf("cache line %d: descriptor 1 = % x", cl, d[:16])
		}
		if r.LoadHead() != 0x1234 || r.LoadTail() != 0xbeef || r.LoadFlags() != FlagMaskInt || r.Cookie() != Cookie {
			t.Errorf("loads disagree with stores")
		}
		if Size(10, cl) != 2*cl+16*1024 {
			t.Errorf("Size(10, %d) = %d", cl, Size(10, cl))
		}
	}
}

func TestNewValidates(t *testing.T) {
	mem := shm(t, 4096)
	for _, tc := range []struct {
		mem  []byte
		log2 uint8
		cl   int
	}{
		{mem, 0, 64}, {mem, 16, 64}, {mem, 10, 64}, {mem, 4, 32}, {mem[4:], 2, 64}, {mem[:100], 1, 64},
	} {
		if _, err := New(tc.mem, tc.log2, tc.cl); err == nil {
			t.Errorf("New(len %d, log2 %d, cl %d) accepted", len(tc.mem), tc.log2, tc.cl)
		}
	}
}

// The head store must not clobber the flags the other side writes in the same word, and vice
// versa, even when both write at once.
func TestHalfWordStoresKeepNeighbour(t *testing.T) {
	mem := shm(t, Size(1, 64))
	r, _ := New(mem, 1, 64)
	var wg sync.WaitGroup
	const n = 60000
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range n {
			r.StoreHead(uint16(i))
		}
	}()
	go func() {
		defer wg.Done()
		for i := range n {
			r.StoreFlags(uint16(i) | 1)
		}
	}()
	wg.Wait()
	if h, f := r.LoadHead(), r.LoadFlags(); h != uint16(n-1) || f != uint16(n-1)|1 {
		t.Fatalf("head %#x flags %#x after concurrent stores", h, f)
	}
}

// A producer publishes descriptors with StoreHead; a consumer that load-acquires head must see
// every descriptor written before it.
func TestPublishOrdering(t *testing.T) {
	mem := shm(t, Size(4, 64))
	r, _ := New(mem, 4, 64)
	const total = 1 << 18
	done := make(chan struct{})
	go func() {
		defer close(done)
		var head uint16
		for i := uint32(0); i < total; {
			if head-r.LoadTail() == uint16(r.Size()) {
				continue
			}
			r.Descs[head&r.Mask] = Desc{Length: i, Offset: ^i}
			head++
			i++
			r.StoreHead(head)
		}
	}()
	var tail uint16
	for want := uint32(0); want < total; {
		h := r.LoadHead()
		for ; tail != h; tail++ {
			d := r.Descs[tail&r.Mask]
			if d.Length != want || d.Offset != ^want {
				t.Fatalf("descriptor %d = %+v", want, d)
			}
			want++
		}
		r.StoreTail(tail)
	}
	<-done
}

// TestPublishIsFullBarrier is the store-buffering litmus test for the interrupt hand-shake: each
// side publishes its index and then reads the other's. x86-TSO (and arm64) let a load overtake an
// earlier store, so with a plain store both sides can read the other's old value, which is the
// lost wake-up PublishHead/PublishTail exist to prevent. With a full barrier that outcome is
// forbidden. (With StoreHead in place of PublishHead the outcome shows up within a few thousand
// rounds on the 2-CPU CI machine.)
func TestPublishIsFullBarrier(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 || runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	a, _ := New(shm(t, Size(4, 64)), 4, 64)
	b, _ := New(shm(t, Size(4, 64)), 4, 64)
	const rounds = 200000
	var doneA, doneB atomic.Uint32
	var sawA, sawB [rounds]bool // whether each side saw the other's store of that round
	side := func(mine, other *Ring, myDone, otherDone *atomic.Uint32, saw *[rounds]bool, tail bool) {
		for k := uint32(1); k <= rounds; k++ {
			for otherDone.Load() < k-1 {
			}
			if tail {
				mine.PublishTail(uint16(k))
				saw[k-1] = other.LoadHead() == uint16(k)
			} else {
				mine.PublishHead(uint16(k))
				saw[k-1] = other.LoadTail() == uint16(k)
			}
			myDone.Store(k)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { side(&a, &b, &doneA, &doneB, &sawA, false) })
	wg.Go(func() { side(&b, &a, &doneB, &doneA, &sawB, true) })
	wg.Wait()
	for k := range rounds {
		if !sawA[k] && !sawB[k] {
			t.Fatalf("round %d: each side read the other's index from before its publish (store-load reordering)", k+1)
		}
	}
}

// TestIndex: Head and Tail load and store the same half-words as LoadHead/StoreHead and
// LoadTail/StoreTail, and leave the flags that share head's word alone.
func TestIndex(t *testing.T) {
	for _, cl := range []int{64, 128} {
		r, err := New(shm(t, Size(4, cl)), 4, cl)
		if err != nil {
			t.Fatal(err)
		}
		r.StoreFlags(FlagMaskInt)
		r.Head().Store(0x1234)
		r.Tail().Publish(0xbeef)
		if r.LoadHead() != 0x1234 || r.LoadTail() != 0xbeef || r.LoadFlags() != FlagMaskInt {
			t.Errorf("cache line %d: head %#x tail %#x flags %#x", cl, r.LoadHead(), r.LoadTail(), r.LoadFlags())
		}
		r.StoreHead(0x4321)
		r.StoreTail(0xfeeb)
		r.Head().Publish(r.Head().Load() + 1)
		r.Tail().Store(r.Tail().Load() + 1)
		if r.LoadHead() != 0x4322 || r.LoadTail() != 0xfeec || r.LoadFlags() != FlagMaskInt {
			t.Errorf("cache line %d: head %#x tail %#x flags %#x", cl, r.LoadHead(), r.LoadTail(), r.LoadFlags())
		}
	}
}
