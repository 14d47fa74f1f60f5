#include "textflag.h"

// The row kernels of rows.go. Arguments (ABI0, on the stack): rows+0
// (base, len, cap), ps+24 (base, len, cap), stride+48, groups+56 (base,
// len, cap); testRowsAVX512 also need+80 and hits+88 (base, len, cap).
// Registers: SI rows, DI probe, R12 probes left, R9/R10 groups base/len,
// DX row A address, AX row B address, BX group index, CX group offset.

// func prefetchRowsT1(rows []uint64, ps []ckf.Probe, stride uint64, groups []uint32)
TEXT ·prefetchRowsT1(SB), NOSPLIT, $0-80
	MOVQ rows_base+0(FP), SI
	MOVQ ps_base+24(FP), DI
	MOVQ ps_len+32(FP), R12
	MOVQ stride+48(FP), R11
	MOVQ groups_base+56(FP), R9
	MOVQ groups_len+64(FP), R10
	TESTQ R12, R12
	JEQ pdone

ploop:
	MOVL 4(DI), DX
	IMULQ R11, DX
	LEAQ (SI)(DX*8), DX
	MOVL 8(DI), AX
	IMULQ R11, AX
	LEAQ (SI)(AX*8), AX
	XORL BX, BX
	TESTQ R10, R10
	JEQ pnext

pgroup:
	MOVL (R9)(BX*4), CX
	PREFETCHT1 (DX)(CX*8)
	PREFETCHT1 (AX)(CX*8)
	INCQ BX
	CMPQ BX, R10
	JLT pgroup

pnext:
	ADDQ $12, DI
	DECQ R12
	JNE ploop

pdone:
	RET

// Further registers: R13 need, R8 hits, R14 the probe's hits, R11 scratch.
//
// func testRowsAVX512(rows []uint64, ps []ckf.Probe, stride uint64, groups []uint32, need uint64, hits []uint64)
TEXT ·testRowsAVX512(SB), NOSPLIT, $0-112
	MOVQ rows_base+0(FP), SI
	MOVQ ps_base+24(FP), DI
	MOVQ ps_len+32(FP), R12
	MOVQ groups_base+56(FP), R9
	MOVQ groups_len+64(FP), R10
	MOVQ need+80(FP), R13
	MOVQ hits_base+88(FP), R8
	TESTQ R12, R12
	JEQ tdone

tloop:
	MOVWLZX (DI), AX
	VPBROADCASTW AX, Z0
	MOVL 4(DI), DX
	IMULQ stride+48(FP), DX
	LEAQ (SI)(DX*8), DX
	MOVL 8(DI), AX
	IMULQ stride+48(FP), AX
	LEAQ (SI)(AX*8), AX
	XORL R14, R14
	XORL BX, BX
	TESTQ R10, R10
	JEQ tstore

tgroup:
	MOVL (R9)(BX*4), CX
	VPCMPEQW (DX)(CX*8), Z0, K1
	VPCMPEQW (AX)(CX*8), Z0, K2
	KORD K1, K2, K1
	VPMOVM2W K1, Z1
	VPTESTMQ Z1, Z1, K2
	KMOVB K2, R11
	SHLXQ CX, R11, R11
	ORQ R11, R14
	INCQ BX
	CMPQ BX, R10
	JLT tgroup

tstore:
	ANDQ R13, R14
	MOVQ R14, (R8)
	ADDQ $12, DI
	ADDQ $8, R8
	DECQ R12
	JNE tloop

tdone:
	VZEROUPPER
	RET

// func storeColumnMOV(dst *uint64, stride uintptr, words []uint64)
TEXT ·storeColumnMOV(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ stride+8(FP), DX
	SHLQ $3, DX
	MOVQ words_base+16(FP), SI
	MOVQ words_len+24(FP), CX
	TESTQ CX, CX
	JEQ sdone

sloop:
	MOVQ (SI), AX
	MOVQ AX, (DI)
	ADDQ $8, SI
	ADDQ DX, DI
	DECQ CX
	JNE sloop

sdone:
	RET
