//go:build !race

package release

// Store32 stores v at addr with release ordering: every earlier load and store of this goroutine
// is visible before v is. Being an assembly function, it is never inlined, and the compiler keeps
// the accesses written before the call before it.
//
//go:noescape
func Store32(addr *int32, v int32)
