package verify

import (
	"bytes"
	"errors"
	"testing"
)

func frame(s *Stamper, size int, stream uint16, seq uint64) []byte {
	f := make([]byte, size)
	EthHeader(f, [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2})
	s.Stamp(f, stream, seq)
	return f
}

func TestRoundTrip(t *testing.T) {
	s, c := NewStamper(9000), NewChecker(9000)
	for _, size := range []int{MinFrame, MinFrame + 1, 60, 64, 65, 127, 1500, 2048, 2049, 9000} {
		for _, seq := range []uint64{0, 1, 1 << 40} {
			f := frame(s, size, 3, seq)
			stream, got, err := c.Check(f)
			if err != nil || stream != 3 || got != seq {
				t.Fatalf("size %d seq %d: Check = (%d, %d, %v), want (3, %d, nil)", size, seq, stream, got, err, seq)
			}
		}
	}
}

// Every single-byte change after the Ethernet header must fail, wherever it is.
func TestEveryByteMatters(t *testing.T) {
	s, c := NewStamper(300), NewChecker(300)
	for _, size := range []int{MinFrame, 61, 300} {
		good := frame(s, size, 1, 7)
		for i := EthHeaderLen; i < size; i++ {
			f := bytes.Clone(good)
			f[i] ^= 0x20
			if _, _, err := c.Check(f); err == nil {
				t.Fatalf("size %d: flipping byte %d was not detected", size, i)
			}
		}
	}
}

// chainAtOffsetZero reproduces a receiver bug DPDK shipped: every segment of a chained packet is
// copied to offset 0 of the receive buffer while the length still adds up.
func chainAtOffsetZero(pkt []byte, seg int, stale []byte) []byte {
	out := bytes.Clone(stale[:len(pkt)])
	for off := 0; off < len(pkt); off += seg {
		copy(out, pkt[off:min(off+seg, len(pkt))])
	}
	return out
}

func TestDetectsChainWrittenAtOffsetZero(t *testing.T) {
	s, c := NewStamper(9000), NewChecker(9000)
	for _, tc := range []struct{ size, seg int }{{9000, 2048}, {512, 128}, {4096, 2048}, {2049, 2048}} {
		want := frame(s, tc.size, 0, 42)
		// The receive buffer held an earlier packet of the same stream, and a zeroed one.
		for _, stale := range [][]byte{frame(s, tc.size, 0, 41), make([]byte, tc.size)} {
			got := chainAtOffsetZero(want, tc.seg, stale)
			if _, _, err := c.Check(got); err == nil {
				t.Errorf("size %d seg %d: chain written at offset 0 passed verification", tc.size, tc.seg)
			}
		}
		// Also when only the segments after the first land at the wrong place, and the first
		// (holding the stamp) survives: a position-independent check would pass this one.
		got := bytes.Clone(want)
		copy(got[tc.seg:], want[:tc.seg]) // second segment overwritten by a copy of the first
		if _, _, err := c.Check(got); !errors.Is(err, ErrFiller) {
			t.Errorf("size %d seg %d: misplaced later segment: err = %v, want ErrFiller", tc.size, tc.seg, err)
		}
	}
}

func TestDetectsStaleAndTruncated(t *testing.T) {
	s, c := NewStamper(1500), NewChecker(1500)
	old, cur := frame(s, 1500, 0, 1), frame(s, 1500, 0, 2)
	// The stamp of the new packet over the payload of the old one (a receiver that copied only
	// the first descriptor's bytes into a recycled buffer).
	mixed := bytes.Clone(old)
	copy(mixed, cur[:128])
	if _, _, err := c.Check(mixed); !errors.Is(err, ErrFiller) {
		t.Errorf("stale payload: err = %v, want ErrFiller", err)
	}
	if _, _, err := c.Check(cur[:1400]); !errors.Is(err, ErrLength) {
		t.Errorf("truncated: err = %v, want ErrLength", err)
	}
	if _, _, err := c.Check(cur[:20]); !errors.Is(err, ErrShort) {
		t.Errorf("short: err = %v, want ErrShort", err)
	}
	// The checksum guards the stamp fields that the filler does not cover.
	bad := bytes.Clone(cur)
	bad[EthHeaderLen+6] = 1 // reserved field
	if _, _, err := c.Check(bad); !errors.Is(err, ErrChecksum) {
		t.Errorf("reserved field changed: err = %v, want ErrChecksum", err)
	}
	if _, _, err := NewChecker(100).Check(cur); !errors.Is(err, ErrTooLong) {
		t.Errorf("frame over the checker's size: err = %v, want ErrTooLong", err)
	}
}

func TestSequence(t *testing.T) {
	var s Sequence
	for _, x := range []struct {
		stream uint16
		seq    uint64
		inSeq  bool
	}{
		{0, 0, true}, {0, 1, true}, {1, 0, true}, {0, 4, false}, // 2 and 3 lost
		{0, 3, false},                             // late
		{0, 5, true}, {1, 1, true}, {1, 1, false}, // duplicate
	} {
		if got := s.Observe(x.stream, x.seq); got != x.inSeq {
			t.Fatalf("Observe(%d, %d) = %v, want %v", x.stream, x.seq, got, x.inSeq)
		}
	}
	if s.Lost != 2 || s.Late != 2 || s.InSeq != 5 {
		t.Fatalf("lost=%d late=%d inseq=%d, want 2 2 5", s.Lost, s.Late, s.InSeq)
	}
}

func BenchmarkCheck1500(b *testing.B) {
	s, c := NewStamper(1500), NewChecker(1500)
	f := frame(s, 1500, 0, 9)
	b.SetBytes(1500)
	for b.Loop() {
		if _, _, err := c.Check(f); err != nil {
			b.Fatal(err)
		}
	}
}
