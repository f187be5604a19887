//go:build !amd64 || race

package release

import "sync/atomic"

// Store32 stores v at addr with (at least) release ordering: sync/atomic's Store, sequentially
// consistent, which on arm64 is already a single store-release (STLR).
func Store32(addr *int32, v int32) { atomic.StoreInt32(addr, v) }
