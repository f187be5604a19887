package memif

import (
	"unsafe"

	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
)

// unsafeDescBytes views a ring's descriptors as bytes, so the fuzzer can write them raw.
func unsafeDescBytes(r ring.Ring) []byte {
	// Safe: Descs is a live slice of 16-byte descriptors in mapped memory.
	return unsafe.Slice((*byte)(unsafe.Pointer(&r.Descs[0])), len(r.Descs)*ring.DescSize)
}
