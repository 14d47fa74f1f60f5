#include "textflag.h"

// func prefetchLines(rows []uint64, offsets []uint32)
// The one assembly helper of the package: Go has no prefetch intrinsic
// outside the runtime, and a prefetch, unlike a load, retires at once, so
// the test pass overlaps with the next chunk's misses (BenchmarkProbe,
// impl=replica-fast).
TEXT ·prefetchLines(SB), NOSPLIT|NOFRAME, $0-48
	MOVQ rows_base+0(FP), AX
	MOVQ offsets_base+24(FP), SI
	MOVQ offsets_len+32(FP), CX
	TESTQ CX, CX
	JEQ done

loop:
	MOVL (SI), DX
	PREFETCHT1 (AX)(DX*8)
	ADDQ $4, SI
	DECQ CX
	JNE loop

done:
	RET
