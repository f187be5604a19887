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
// XCHG with a memory operand is implicitly locked: a store and a full barrier in one instruction,
// cheaper than MOVW followed by MFENCE.
TEXT ·storeSync16(SB), NOSPLIT, $0-10
	MOVQ addr+0(FP), AX
	MOVW v+8(FP), BX
	XCHGW BX, (AX)
	RET
