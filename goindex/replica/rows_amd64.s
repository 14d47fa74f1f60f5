#include "textflag.h"

// The row kernels of rows.go. Arguments (ABI0, on the stack):
//   rows+0 (base, len, cap), ps+24 (base, len, cap), field+48, stride+56,
//   groups+64 (base, len, cap), masks+88 (base, len, cap).
// Registers: SI rows, DI probe, R12 probes left, R9/R10 groups base/len,
// R8 mask, DX row address, R13 need, BX group index, CX group offset.

// func prefetchRowsT1(rows []uint64, ps []ckf.Probe, field rowField, stride uint64, groups []uint32, masks []uint64)
TEXT ·prefetchRowsT1(SB), NOSPLIT, $0-112
	MOVQ rows_base+0(FP), SI
	MOVQ ps_base+24(FP), DI
	MOVQ masks_len+96(FP), R12
	MOVQ groups_base+64(FP), R9
	MOVQ groups_len+72(FP), R10
	MOVQ masks_base+88(FP), R8
	TESTQ R12, R12
	JEQ pdone

ploop:
	MOVQ field+48(FP), AX
	MOVL (DI)(AX*1), DX
	IMULQ stride+56(FP), DX
	LEAQ (SI)(DX*8), DX
	MOVQ (R8), R13
	XORL BX, BX
	TESTQ R10, R10
	JEQ pnext

pgroup:
	MOVL (R9)(BX*4), CX
	MOVQ R13, AX
	SHRQ CX, AX
	TESTB $0xff, AX
	JEQ pskip
	PREFETCHT1 (DX)(CX*8)

pskip:
	INCQ BX
	CMPQ BX, R10
	JLT pgroup

pnext:
	ADDQ $12, DI
	ADDQ $8, R8
	DECQ R12
	JNE ploop

pdone:
	RET

// func testRowsAVX512(rows []uint64, ps []ckf.Probe, field rowField, stride uint64, groups []uint32, masks []uint64)
TEXT ·testRowsAVX512(SB), NOSPLIT, $0-112
	MOVQ rows_base+0(FP), SI
	MOVQ ps_base+24(FP), DI
	MOVQ masks_len+96(FP), R12
	MOVQ groups_base+64(FP), R9
	MOVQ groups_len+72(FP), R10
	MOVQ masks_base+88(FP), R8
	TESTQ R12, R12
	JEQ tdone

tloop:
	MOVWLZX (DI), AX
	VPBROADCASTW AX, Z0
	MOVQ field+48(FP), AX
	MOVL (DI)(AX*1), DX
	IMULQ stride+56(FP), DX
	LEAQ (SI)(DX*8), DX
	MOVQ (R8), R13
	XORL R14, R14
	XORL BX, BX
	TESTQ R10, R10
	JEQ tstore

tgroup:
	MOVL (R9)(BX*4), CX
	SHRXQ CX, R13, AX
	TESTB $0xff, AX
	JEQ tskip
	VPCMPEQW (DX)(CX*8), Z0, K1
	VPMOVM2W K1, Z1
	VPTESTMQ Z1, Z1, K2
	KMOVB K2, AX
	SHLXQ CX, AX, AX
	ORQ AX, R14

tskip:
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

// func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET
