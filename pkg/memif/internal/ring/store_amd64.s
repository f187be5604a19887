#include "textflag.h"

// func store16(addr *uint16, v uint16)
// A plain MOVW: on x86-TSO a store is never reordered with earlier loads or stores, so this is a
// store-release. Being an assembly function, it is never inlined, and the Go compiler keeps every
// memory access written before the call before it.
TEXT ·store16(SB), NOSPLIT, $0-10
	MOVQ addr+0(FP), AX
	MOVW v+8(FP), BX
	MOVW BX, (AX)
	RET

// func fence()
// MFENCE orders every earlier store before every later load: x86-TSO lets a load overtake an
// earlier store to another address, which would let a producer read a stale MASK_INT after
// publishing and skip a wake-up its peer now waits for.
TEXT ·fence(SB), NOSPLIT, $0-0
	MFENCE
	RET

// func storeSync16(addr *uint16, v uint16)
// A plain MOVW and then a locked add of zero to our own stack (Linux's smp_mb on x86-64): a store
// and a full barrier. Not XCHG on the index, although that is one instruction: a locked
// instruction on the index line can only ask for that line once the earlier stores (descriptor,
// payload) have drained, so the peer's copies of both are taken away one after the other; the
// plain MOVW lets the CPU fetch all of them at once, and the locked add on a line no other core
// touches then only waits for that. Measured (BenchmarkPingPongCrossCore, 4 interleaved rounds):
// a round trip 730 -> 615 ns. 0(SP) is this function's return address: adding zero to it
// atomically changes nothing, and no other thread writes this goroutine's stack.
TEXT ·storeSync16(SB), NOSPLIT, $0-10
	MOVQ addr+0(FP), AX
	MOVW v+8(FP), BX
	MOVW BX, (AX)
	LOCK
	ADDL $0, 0(SP)
	RET
