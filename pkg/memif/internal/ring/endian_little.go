//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package ring

// Positions of the 16-bit fields in their 32-bit words on a little-endian machine.
const (
	offFlagsHalf  = 4  // byte offset of flags in the header
	offHead       = 6  // byte offset of head in the header
	offTailInWord = 0  // byte offset of tail inside its word
	flagsShift    = 0  // flags = word >> flagsShift
	headShift     = 16 // head = word >> headShift
	tailShift     = 0
)
