// Package verify stamps memif-perf payloads and checks them at the receiver.
//
// A verified frame is an Ethernet frame whose payload starts with a 24-byte stamp
//
//	off  size  field
//	 0    4    magic "MFPV"
//	 4    2    stream (the sender's queue)
//	 6    2    reserved, zero
//	 8    8    sequence number, per stream, from 0
//	16    4    frame length in bytes
//	20    4    CRC-32C over stamp bytes 0..19 and the filler after the stamp
//
// followed by filler up to the frame length. Filler word k (8 bytes, little endian) is
// position(k) XOR key(stream, seq): every byte depends on its position in the frame and on the
// packet it belongs to. So a receiver that writes the segments of a chained packet at the wrong
// offsets (DPDK once wrote every segment at offset 0), or hands out stale bytes of an earlier
// packet, produces a frame that fails the check, even where the CRC would by chance match.
// All fields are little endian so that frames are comparable across hosts.
package verify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Sizes and offsets of a verified frame.
const (
	EthHeaderLen = 14
	StampLen     = 24
	// MinFrame is the smallest frame that carries a stamp.
	MinFrame = EthHeaderLen + StampLen
	// EtherType is IEEE 802 "local experimental ethertype 1": testpmd, VPP and switches forward
	// it without interpreting it.
	EtherType = 0x88b5

	magic     = 0x5650464d // "MFPV" little endian
	stampOff  = EthHeaderLen
	fillerOff = EthHeaderLen + StampLen
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// position is the filler's per-position base pattern, extended on demand up to the largest frame
// a Stamper or Checker was made for (so the data path never allocates).
func positionWords(frameLen int) []uint64 {
	n := (frameLen - fillerOff + 7) / 8
	w := make([]uint64, max(n, 0))
	x := uint64(0x9e3779b97f4a7c15)
	for k := range w {
		w[k] = splitmix(&x)
	}
	return w
}

func splitmix(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// key mixes stream and sequence so that neighbouring packets have unrelated filler.
func key(stream uint16, seq uint64) uint64 {
	x := seq ^ uint64(stream)<<48
	return splitmix(&x)
}

// EthHeader writes dst, src and the experimental EtherType into frame[0:14].
func EthHeader(frame []byte, dst, src [6]byte) {
	copy(frame[0:6], dst[:])
	copy(frame[6:12], src[:])
	binary.BigEndian.PutUint16(frame[12:14], EtherType)
}

// Stamper writes verified frames of up to maxLen bytes.
type Stamper struct {
	pos []uint64
}

// NewStamper prepares a Stamper for frames of at most maxLen bytes.
func NewStamper(maxLen int) *Stamper { return &Stamper{pos: positionWords(maxLen)} }

// Stamp fills frame[14:] (the Ethernet header is left alone) with the stamp and filler for
// (stream, seq). len(frame) is the frame length; it must be MinFrame..maxLen.
func (s *Stamper) Stamp(frame []byte, stream uint16, seq uint64) {
	st := frame[stampOff:fillerOff]
	binary.LittleEndian.PutUint32(st[0:4], magic)
	binary.LittleEndian.PutUint16(st[4:6], stream)
	binary.LittleEndian.PutUint16(st[6:8], 0)
	binary.LittleEndian.PutUint64(st[8:16], seq)
	binary.LittleEndian.PutUint32(st[16:20], uint32(len(frame)))
	fill := frame[fillerOff:]
	k := key(stream, seq)
	i := 0
	for ; i+8 <= len(fill); i += 8 {
		binary.LittleEndian.PutUint64(fill[i:], s.pos[i/8]^k)
	}
	if i < len(fill) {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], s.pos[i/8]^k)
		copy(fill[i:], w[:])
	}
	crc := crc32.Update(crc32.Checksum(st[0:20], castagnoli), castagnoli, fill)
	binary.LittleEndian.PutUint32(st[20:24], crc)
}

// Errors returned by Check, wrapped with details.
var (
	ErrShort    = errors.New("frame too short for a stamp")
	ErrMagic    = errors.New("no stamp (bad magic)")
	ErrLength   = errors.New("frame length differs from the stamped length")
	ErrChecksum = errors.New("checksum mismatch")
	ErrFiller   = errors.New("payload byte mismatch")
	ErrTooLong  = errors.New("frame longer than the checker was prepared for")
)

// Checker verifies frames of up to maxLen bytes.
type Checker struct {
	pos []uint64
}

// NewChecker prepares a Checker for frames of at most maxLen bytes.
func NewChecker(maxLen int) *Checker { return &Checker{pos: positionWords(maxLen)} }

// Check verifies every byte after the Ethernet header and returns the stream and sequence number.
func (c *Checker) Check(frame []byte) (stream uint16, seq uint64, err error) {
	if len(frame) < MinFrame {
		return 0, 0, fmt.Errorf("%w: %d bytes", ErrShort, len(frame))
	}
	st := frame[stampOff:fillerOff]
	if m := binary.LittleEndian.Uint32(st[0:4]); m != magic {
		return 0, 0, fmt.Errorf("%w: %#08x", ErrMagic, m)
	}
	stream = binary.LittleEndian.Uint16(st[4:6])
	seq = binary.LittleEndian.Uint64(st[8:16])
	if l := binary.LittleEndian.Uint32(st[16:20]); int(l) != len(frame) {
		return stream, seq, fmt.Errorf("%w: stream %d seq %d: stamped %d, got %d", ErrLength, stream, seq, l, len(frame))
	}
	fill := frame[fillerOff:]
	if (len(fill)+7)/8 > len(c.pos) {
		return stream, seq, fmt.Errorf("%w: %d bytes", ErrTooLong, len(frame))
	}
	// Filler first: it names the first bad byte, which the CRC cannot.
	k := key(stream, seq)
	i := 0
	for ; i+8 <= len(fill); i += 8 {
		if got, want := binary.LittleEndian.Uint64(fill[i:]), c.pos[i/8]^k; got != want {
			return stream, seq, fillerError(stream, seq, fill[i:i+8], want, fillerOff+i)
		}
	}
	if i < len(fill) {
		want := c.pos[i/8] ^ k
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], want)
		for j := range fill[i:] {
			if fill[i+j] != w[j] {
				return stream, seq, fmt.Errorf("%w: stream %d seq %d: byte %d is %#02x, want %#02x",
					ErrFiller, stream, seq, fillerOff+i+j, fill[i+j], w[j])
			}
		}
	}
	crc := crc32.Update(crc32.Checksum(st[0:20], castagnoli), castagnoli, fill)
	if want := binary.LittleEndian.Uint32(st[20:24]); crc != want {
		return stream, seq, fmt.Errorf("%w: stream %d seq %d: %#08x, stamped %#08x", ErrChecksum, stream, seq, crc, want)
	}
	return stream, seq, nil
}

func fillerError(stream uint16, seq uint64, got []byte, want uint64, off int) error {
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], want)
	for j := range got {
		if got[j] != w[j] {
			off += j
			return fmt.Errorf("%w: stream %d seq %d: byte %d is %#02x, want %#02x", ErrFiller, stream, seq, off, got[j], w[j])
		}
	}
	return fmt.Errorf("%w: stream %d seq %d at byte %d", ErrFiller, stream, seq, off)
}

// Sequence tracks the sequence numbers of the streams one receiver sees, to count lost and
// reordered packets. Each stream's numbers must arrive as 0, 1, 2, ...
type Sequence struct {
	next  map[uint16]uint64
	Lost  uint64 // packets skipped over (a gap in the numbers)
	Late  uint64 // packets older than one already seen: reordered or duplicated
	InSeq uint64 // packets that arrived exactly in order
}

// Observe records one packet and reports whether it was the expected next one.
func (s *Sequence) Observe(stream uint16, seq uint64) bool {
	if s.next == nil {
		s.next = make(map[uint16]uint64, 4)
	}
	next := s.next[stream]
	switch {
	case seq == next:
		s.InSeq++
		s.next[stream] = seq + 1
		return true
	case seq > next:
		s.Lost += seq - next
		s.next[stream] = seq + 1
	default:
		s.Late++
	}
	return false
}
