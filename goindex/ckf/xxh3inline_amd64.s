#include "textflag.h"

// probeIdx0 and probeIdx1 interleave 8 fingerprints (table 1, dwords
// 0–7), 8 A buckets (table 1, dwords 8–15) and 8 B buckets (table 2,
// dwords 16–23) into 8 Probes of 3 dwords each: dwords 0–15 of the
// output, then dwords 16–23.
DATA probeIdx0<>+0(SB)/4, $0
DATA probeIdx0<>+4(SB)/4, $8
DATA probeIdx0<>+8(SB)/4, $16
DATA probeIdx0<>+12(SB)/4, $1
DATA probeIdx0<>+16(SB)/4, $9
DATA probeIdx0<>+20(SB)/4, $17
DATA probeIdx0<>+24(SB)/4, $2
DATA probeIdx0<>+28(SB)/4, $10
DATA probeIdx0<>+32(SB)/4, $18
DATA probeIdx0<>+36(SB)/4, $3
DATA probeIdx0<>+40(SB)/4, $11
DATA probeIdx0<>+44(SB)/4, $19
DATA probeIdx0<>+48(SB)/4, $4
DATA probeIdx0<>+52(SB)/4, $12
DATA probeIdx0<>+56(SB)/4, $20
DATA probeIdx0<>+60(SB)/4, $5
GLOBL probeIdx0<>(SB), RODATA|NOPTR, $64

DATA probeIdx1<>+0(SB)/4, $13
DATA probeIdx1<>+4(SB)/4, $21
DATA probeIdx1<>+8(SB)/4, $6
DATA probeIdx1<>+12(SB)/4, $14
DATA probeIdx1<>+16(SB)/4, $22
DATA probeIdx1<>+20(SB)/4, $7
DATA probeIdx1<>+24(SB)/4, $15
DATA probeIdx1<>+28(SB)/4, $23
DATA probeIdx1<>+32(SB)/8, $0
DATA probeIdx1<>+40(SB)/8, $0
DATA probeIdx1<>+48(SB)/8, $0
DATA probeIdx1<>+56(SB)/8, $0
GLOBL probeIdx1<>(SB), RODATA|NOPTR, $64

// func probes8(dst *Probe, hashes *uint64, n int, key uint64, mask uint32, delta *[1 << 16]uint32)
TEXT ·probes8(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ hashes+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ delta+40(FP), BX

	// K1: the n hashes to load.
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVDQU64.Z (SI), K1, Z0

	// hash8Keyed: h = rotl(x, 32) ^ key; h ^= rotl(h, 49) ^ rotl(h, 24);
	// h *= M; h ^= h>>35 + 8; h *= M; h ^= h>>28.
	VPBROADCASTQ key+24(FP), Z1
	VPROLQ $32, Z0, Z0
	VPXORQ Z1, Z0, Z0
	VPROLQ $49, Z0, Z2
	VPROLQ $24, Z0, Z3
	VPTERNLOGQ $0x96, Z3, Z2, Z0
	MOVQ $0x9fb21c651e98df25, AX
	VPBROADCASTQ AX, Z4
	VPMULLQ Z4, Z0, Z0
	VPSRLQ $35, Z0, Z2
	MOVQ $8, AX
	VPBROADCASTQ AX, Z5
	VPADDQ Z5, Z2, Z2
	VPXORQ Z2, Z0, Z0
	VPMULLQ Z4, Z0, Z0
	VPSRLQ $28, Z0, Z2
	VPXORQ Z2, Z0, Z0

	// probeOf: fp = m & 0xFFFF, 0 → 1 (Y6); A = (m >> 16) & mask (Y10).
	VPMOVQD Z0, Y6
	MOVL $0xFFFF, AX
	VMOVD AX, X7
	VPBROADCASTD X7, Y7
	VPAND Y7, Y6, Y6
	VPXOR Y8, Y8, Y8
	VPCMPEQD Y8, Y6, Y9
	VPSUBD Y9, Y6, Y6
	VPSRLQ $16, Z0, Z2
	VPMOVQD Z2, Y10
	MOVL mask+32(FP), AX
	VMOVD AX, X11
	VPBROADCASTD X11, Y11
	VPAND Y11, Y10, Y10

	// B = A ^ delta[fp] (Y12): every fp is in [1, 0xFFFF], so the gather
	// stays inside the table.
	VPCMPEQD Y13, Y13, Y13
	VPGATHERDD Y13, (BX)(Y6*4), Y12
	VPXOR Y12, Y10, Y12

	// Interleave into probes: Z6 = fp ‖ A, Z12 = B.
	VINSERTI64X4 $1, Y10, Z6, Z6
	VMOVDQU32 probeIdx0<>(SB), Z14
	VPERMI2D Z12, Z6, Z14
	VMOVDQU32 probeIdx1<>(SB), Z15
	VPERMI2D Z12, Z6, Z15

	// Store 3n dwords: min(16, 3n) from Z14, the rest from Z15.
	LEAQ (CX)(CX*2), DX
	MOVQ $16, R8
	CMPQ DX, R8
	CMOVQLT DX, R8
	SUBQ R8, DX
	MOVL $1, AX
	SHLXL R8, AX, AX
	DECL AX
	KMOVW AX, K2
	VMOVDQU32 Z14, K2, (DI)
	MOVL $1, AX
	SHLXL DX, AX, AX
	DECL AX
	KMOVW AX, K3
	VMOVDQU32 Z15, K3, 64(DI)
	VZEROUPPER
	RET
