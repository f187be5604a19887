#include "textflag.h"

// func store16(addr *uint16, v uint16)
// STLRH is a 16-bit store-release: earlier loads and stores complete before it is visible.
TEXT ·store16(SB), NOSPLIT, $0-10
	MOVD addr+0(FP), R0
	MOVHU v+8(FP), R1
	STLRH R1, (R0)
	RET

// func fence()
// A full barrier (inner shareable): earlier loads and stores before later ones.
TEXT ·fence(SB), NOSPLIT, $0-0
	DMB $0xb
	RET

// func storeSync16(addr *uint16, v uint16)
TEXT ·storeSync16(SB), NOSPLIT, $0-10
	MOVD addr+0(FP), R0
	MOVHU v+8(FP), R1
	STLRH R1, (R0)
	DMB $0xb
	RET
