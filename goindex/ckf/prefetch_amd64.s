#include "textflag.h"

// func prefetchLines(addrs []uintptr)
TEXT ·prefetchLines(SB), NOSPLIT, $0-24
	MOVQ addrs_base+0(FP), AX
	MOVQ addrs_len+8(FP), CX
	TESTQ CX, CX
	JEQ done

loop:
	MOVQ (AX), DX
	PREFETCHT0 (DX)
	ADDQ $8, AX
	DECQ CX
	JNZ loop

done:
	RET
