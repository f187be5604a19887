// Package ring is the memif ring in shared memory: the header with its head, tail and flags
// words, and the descriptor array. It is the only place in pkg/memif that touches shared memory
// through unsafe pointers or atomics.
//
// # Memory-ordering contract
//
// The memif protocol has exactly one writer per index: the client (slave) writes head, the server
// (master) writes tail, on every ring and in both directions. The producer of a ring first writes
// buffer data and descriptors with plain stores, then publishes its index with a store-release
// (StoreHead / StoreTail). The consumer loads the peer's index with a load-acquire (LoadHead /
// LoadTail) before it reads any descriptor or buffer named by it. Loads of one's own index are
// never needed: each side keeps its own cursor in private memory and never trusts the copy in
// shared memory.
//
// Go has no 16-bit atomics and head shares an aligned 32-bit word with flags, which the other side
// writes, so a 32-bit store would clobber the peer's flags. Stores therefore go through store16: a
// non-inlined assembly function on amd64 (a plain 16-bit MOV: x86-TSO never reorders a store
// with an earlier load or store, so it is a release store, and the call is opaque to the Go
// compiler, so no earlier memory access is moved past it) and on arm64 (STLRH, a store-release);
// other architectures use a 32-bit compare-and-swap loop that preserves the other half-word.
// Loads use sync/atomic's 32-bit load (acquire on every Go architecture) of the aligned word and
// take the half they need.
package ring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Cookie is written by the client into every ring header; the server refuses rings without it.
const Cookie uint32 = 0x03E31F20

// Ring and descriptor flags.
const (
	FlagMaskInt  uint16 = 1 // ring flag: the receiver polls and wants no eventfd signal
	DescFlagNext uint16 = 1 // descriptor flag: the packet continues in the next descriptor
)

// MaxLog2Size is the largest ring accepted: 2^15 entries, the most that free-running 16-bit
// indices can tell apart from an empty ring.
const MaxLog2Size = 15

// DescSize is the size of one descriptor.
const DescSize = 16

// Desc is one descriptor, laid out as the protocol's packed struct (naturally aligned, 16 bytes).
// Read a descriptor of the peer once into locals and validate the copy: the peer may change shared
// memory at any moment.
type Desc struct {
	Flags    uint16
	Region   uint16
	Length   uint32
	Offset   uint32
	Metadata uint32
}

var _ [DescSize - unsafe.Sizeof(Desc{})]struct{} // Desc must be exactly 16 bytes

// Header offsets for a given cache-line size: cookie at 0, flags at 4, head at 6, tail at one
// cache line, descriptors at two.
const (
	offCookie = 0
	offFlags  = 4 // flags (u16) and head (u16) share the 32-bit word at offset 4
)

// Size is the byte size of a ring with 2^log2 entries: header plus descriptors.
func Size(log2 uint8, cacheLine int) int {
	return 2*cacheLine + DescSize<<log2
}

// Ring is a view of one ring in mapped memory. The zero Ring is unusable; use New.
type Ring struct {
	hdr   unsafe.Pointer // start of the ring header in the mapping
	tail  *uint32        // the aligned word holding tail
	Descs []Desc         // the descriptor array, len == ring size
	Mask  uint16         // ring size - 1
	descs *descArray     // Descs as an array a masked 16-bit index cannot overrun (see At)
}

// descArray is as many descriptors as a 16-bit index can name. A Ring never has that many, but
// At only ever indexes it with i&Mask < Size, so the compiler's proof that a uint16 index is in
// range is all the bounds check the hot loops need.
type descArray [1 << 16]Desc

// New makes a view of the ring at the start of mem. mem must stay mapped while the view is used;
// it must hold Size(log2, cacheLine) bytes and be 8-byte aligned (atomics need aligned words).
func New(mem []byte, log2 uint8, cacheLine int) (Ring, error) {
	if log2 < 1 || log2 > MaxLog2Size {
		return Ring{}, fmt.Errorf("ring size 2^%d outside 2^1..2^%d", log2, MaxLog2Size)
	}
	if cacheLine != 64 && cacheLine != 128 {
		return Ring{}, fmt.Errorf("cache line %d: must be 64 or 128", cacheLine)
	}
	need := Size(log2, cacheLine)
	if len(mem) < need {
		return Ring{}, fmt.Errorf("ring needs %d bytes, %d available", need, len(mem))
	}
	// Safe: mem is non-empty (checked above), so &mem[0] is a valid pointer into the mapping.
	p := unsafe.Pointer(&mem[0])
	if uintptr(p)%8 != 0 {
		return Ring{}, errors.New("ring is not 8-byte aligned")
	}
	size := 1 << log2
	return Ring{
		hdr: p,
		// Safe: cacheLine+4 <= need <= len(mem), and the word is 4-aligned because p is 8-aligned
		// and cacheLine is a multiple of 8.
		tail: (*uint32)(unsafe.Add(p, cacheLine)),
		// Safe: 2*cacheLine + 16*size == need <= len(mem); Desc has alignment 4 and p+2*cacheLine
		// is 8-aligned.
		Descs: unsafe.Slice((*Desc)(unsafe.Add(p, 2*cacheLine)), size),
		Mask:  uint16(size - 1),
		// Safe as far as At goes: At masks every index to below size (see descArray).
		descs: (*descArray)(unsafe.Add(p, 2*cacheLine)),
	}, nil
}

// At is the descriptor of free-running index i (i is masked to the ring size).
func (r *Ring) At(i uint16) *Desc { return &r.descs[i&r.Mask] }

// Size is the number of entries.
func (r *Ring) Size() int { return len(r.Descs) }

// flagsWord is the aligned 32-bit word at offset 4 holding flags and head.
func (r *Ring) flagsWord() *uint32 {
	// Safe: the header is at least 2*64 bytes and 8-aligned (New), so offset 4 is an aligned
	// in-bounds word.
	return (*uint32)(unsafe.Add(r.hdr, offFlags))
}

// Cookie reads the cookie. It is written before the ring is announced, so a plain load suffices.
func (r *Ring) Cookie() uint32 { return *(*uint32)(unsafe.Add(r.hdr, offCookie)) }

// SetCookie writes the cookie (client, before announcing the ring).
func (r *Ring) SetCookie(v uint32) { *(*uint32)(unsafe.Add(r.hdr, offCookie)) = v }

// LoadHead load-acquires head (written by the client).
func (r *Ring) LoadHead() uint16 { return uint16(atomic.LoadUint32(r.flagsWord()) >> headShift) }

// LoadFlags load-acquires flags (written by the ring's receiver).
func (r *Ring) LoadFlags() uint16 { return uint16(atomic.LoadUint32(r.flagsWord()) >> flagsShift) }

// LoadTail load-acquires tail (written by the server).
func (r *Ring) LoadTail() uint16 { return uint16(atomic.LoadUint32(r.tail) >> tailShift) }

// StoreHead store-releases head: every earlier write (descriptors, buffers) is visible to a peer
// that load-acquires the new value. Client only.
func (r *Ring) StoreHead(v uint16) { store16((*uint16)(unsafe.Add(r.hdr, offHead)), v) }

// PublishHead is StoreHead followed by a full barrier (on amd64 a locked add on the stack, see
// store_amd64.s): for a producer that reads MASK_INT next (see Fence).
func (r *Ring) PublishHead(v uint16) { storeSync16((*uint16)(unsafe.Add(r.hdr, offHead)), v) }

// PublishTail is StoreTail followed by a full barrier; see PublishHead.
func (r *Ring) PublishTail(v uint16) {
	storeSync16((*uint16)(unsafe.Add(unsafe.Pointer(r.tail), offTailInWord)), v)
}

// StoreTail store-releases tail. Server only.
func (r *Ring) StoreTail(v uint16) {
	// Safe: the tail half-word lies inside the aligned tail word.
	store16((*uint16)(unsafe.Add(unsafe.Pointer(r.tail), offTailInWord)), v)
}

// Index is one of a ring's two indices, head or tail. The client writes head and reads tail, the
// server the other way round, on every ring: a queue picks its own index and its peer's once, when
// it connects, and then loads and stores them without asking which is which. The same atomics as
// LoadHead/StoreHead (see the package comment); the zero Index is unusable.
type Index struct {
	word  *uint32 // the aligned word holding the index (head shares its word with flags)
	half  *uint16 // the index itself
	shift uint8   // index = word >> shift
}

// Head is the ring's head index (written by the client).
func (r *Ring) Head() Index {
	// Safe: head lies inside the aligned word at offFlags (see flagsWord).
	return Index{word: r.flagsWord(), half: (*uint16)(unsafe.Add(r.hdr, offHead)), shift: headShift}
}

// Tail is the ring's tail index (written by the server).
func (r *Ring) Tail() Index {
	// Safe: the tail half-word lies inside the aligned tail word.
	return Index{word: r.tail, half: (*uint16)(unsafe.Add(unsafe.Pointer(r.tail), offTailInWord)), shift: tailShift}
}

// Load load-acquires the index.
func (x Index) Load() uint16 { return uint16(atomic.LoadUint32(x.word) >> x.shift) }

// Store store-releases the index: every earlier write is visible to a peer that loads the new
// value. Only the index's writer may store it.
func (x Index) Store(v uint16) { store16(x.half, v) }

// Publish is Store followed by a full barrier, for a producer that reads MASK_INT next (see Fence).
func (x Index) Publish(v uint16) { storeSync16(x.half, v) }

// StoreFlags store-releases flags. Only the ring's receiver writes them.
func (r *Ring) StoreFlags(v uint16) { store16((*uint16)(unsafe.Add(r.hdr, offFlagsHalf)), v) }

// Fence orders this side's earlier stores (an index it just published, a flag it just cleared)
// before its later loads (the peer's flags or index). Both sides of the interrupt hand-shake need
// it: the consumer clears MASK_INT and then re-reads the index, the producer publishes the index
// and then reads MASK_INT; without the barrier each could read the other's old value and the
// consumer would sleep with packets waiting.
func Fence() { fence() }
