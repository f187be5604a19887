//go:build amd64 || arm64

package ring

// store16 is a 16-bit store-release; see the package comment for why it is assembly.
//
//go:noescape
func store16(addr *uint16, v uint16)

// fence is a full memory barrier: no later load is performed before an earlier store is visible.
//
//go:noescape
func fence()

// storeSync16 is a 16-bit store followed by a full barrier.
//
//go:noescape
func storeSync16(addr *uint16, v uint16)
