//go:build mips || mips64 || ppc64 || s390x

package ring

// Positions of the 16-bit fields in their 32-bit words on a big-endian machine: the protocol's
// structs are in host order, so the field at the lower address is the word's high half.
const (
	offFlagsHalf  = 4
	offHead       = 6
	offTailInWord = 0
	flagsShift    = 16
	headShift     = 0
	tailShift     = 16
)
