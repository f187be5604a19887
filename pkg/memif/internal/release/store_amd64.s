//go:build !race

#include "textflag.h"

// func Store32(addr *int32, v int32)
// A plain MOVL: on x86-TSO a store is never reordered with earlier loads or stores.
TEXT ·Store32(SB), NOSPLIT, $0-12
	MOVQ addr+0(FP), AX
	MOVL v+8(FP), BX
	MOVL BX, (AX)
	RET
