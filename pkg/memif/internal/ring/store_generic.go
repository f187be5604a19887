//go:build !amd64 && !arm64

package ring

import (
	"sync/atomic"
	"unsafe"
)

// store16 stores a half-word with a compare-and-swap on its aligned 32-bit word, leaving the
// other half (written by the peer) as it is. sync/atomic operations are sequentially consistent,
// so the store is at least a release.
func store16(addr *uint16, v uint16) {
	a := uintptr(unsafe.Pointer(addr))
	// Safe: every half-word we store (flags at 4, head at 6, tail at cacheLine) lies in an
	// aligned word of the ring header.
	word := (*uint32)(unsafe.Add(unsafe.Pointer(addr), -int(a&3)))
	shift := halfShift(a & 3)
	for {
		old := atomic.LoadUint32(word)
		nw := old&^(0xffff<<shift) | uint32(v)<<shift
		if atomic.CompareAndSwapUint32(word, old, nw) {
			return
		}
	}
}

// halfShift is the bit position in its word of the half-word at byte offset off (0 or 2).
func halfShift(off uintptr) uint {
	if (off == 0) == (flagsShift == 0) {
		return 0
	}
	return 16
}

var fenceWord uint32

// fence is a full memory barrier: sync/atomic read-modify-writes are sequentially consistent.
func fence() { atomic.AddUint32(&fenceWord, 0) }

// storeSync16 is store16: its compare-and-swap is already sequentially consistent.
func storeSync16(addr *uint16, v uint16) { store16(addr, v) }
