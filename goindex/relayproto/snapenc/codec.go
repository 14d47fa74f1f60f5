package snapenc

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// Snapshot word encodings (see Encoding). Decoders are handed a payload whose
// length the frame decoder has already bounded, and they reject every byte
// string that another word sequence would not encode to, so decoding then
// encoding reproduces the payload exactly.

// denseBytes is the dense payload size of count words.
func denseBytes(count int) int { return 8 * count }

// appendDense appends words as LE u64.
func appendDense(dst []byte, words []uint64) []byte {
	for _, w := range words {
		dst = binary.LittleEndian.AppendUint64(dst, w)
	}
	return dst
}

// decodeDense fills dst (len = count) from a payload of exactly 8·count bytes.
func decodeDense(dst []uint64, payload []byte) {
	for i := range dst {
		dst[i] = binary.LittleEndian.Uint64(payload[8*i:])
	}
}

// Slot masks for the branch-free compact codec.
const (
	slotLow  = 0x7FFF7FFF7FFF7FFF
	slotHigh = 0x8000800080008000
)

// occupancy returns bucket word w's slot-occupancy nibble: bit i is set when
// slot i (bits 16i…16i+15) is non-zero. Adding 0x7FFF to a slot's low 15
// bits carries into its top bit exactly when they are non-zero, so the top
// bits of ((w & low) + low) | w flag the non-zero slots, without branches
// (occupancy is random per bucket, so a branch per slot mispredicts half the
// time: BenchmarkSnapshot).
func occupancy(w uint64) byte {
	x := ((w & slotLow) + slotLow | w) & slotHigh
	return byte(x>>15&1 | x>>30&2 | x>>45&4 | x>>60&8)
}

// compactBytes is the compact payload size of words: one nibble per bucket
// rounded up to whole bytes, plus 2 bytes per occupied slot.
func compactBytes(words []uint64) int {
	n := (len(words) + 1) / 2
	for _, w := range words {
		n += 2 * bits.OnesCount8(occupancy(w))
	}
	return n
}

// appendCompact appends the compact encoding of words: the occupancy nibbles
// (bucket 2j in the low nibble of byte j, bucket 2j+1 in the high one; an odd
// count leaves the last high nibble 0), then every non-zero slot as LE u16,
// in bucket order and slot order within a bucket.
func appendCompact(dst []byte, words []uint64) []byte {
	masks := len(dst)
	end := masks + compactBytes(words)
	dst = slices.Grow(dst, end-masks)[:end]
	clear(dst[masks : masks+(len(words)+1)/2])
	p := masks + (len(words)+1)/2
	for i, w := range words {
		m := occupancy(w)
		dst[masks+i/2] |= m << (4 * (i & 1))
		if p+8 <= end {
			// Write every slot and advance only past occupied ones: no
			// branch per slot. The 8 bytes written stay inside the payload.
			for s := range 4 {
				binary.LittleEndian.PutUint16(dst[p:], uint16(w>>(16*s)))
				p += 2 * int(m>>s&1)
			}
			continue
		}
		for s := range 4 {
			if m>>s&1 != 0 {
				binary.LittleEndian.PutUint16(dst[p:], uint16(w>>(16*s)))
				p += 2
			}
		}
	}
	return dst
}

// nibbleShifts[m][s] is where, in the 8 bytes from a word's first
// fingerprint, slot s of a word with occupancy m starts: 16 bits times the
// occupied slots before it (0 for an empty slot, which nibbleSlots masks).
// nibbleSlots[m] has the bits of m's occupied slots set.
var nibbleShifts, nibbleSlots = func() (sh [16][4]uint8, slots [16]uint64) {
	for m := range 16 {
		rank := 0
		for s := range 4 {
			if m>>s&1 != 0 {
				sh[m][s] = uint8(16 * rank)
				slots[m] |= 0xFFFF << (16 * s)
				rank++
			}
		}
	}
	return sh, slots
}()

// checkCompact returns why payload cannot be the compact encoding of count
// words, or "", looking only at its size and occupancy masks; it runs before
// the words are allocated.
func checkCompact(count int, payload []byte) string {
	maskBytes := (count + 1) / 2
	if len(payload) < maskBytes {
		return "compact payload shorter than its occupancy masks"
	}
	masks, fps := payload[:maskBytes], payload[maskBytes:]
	if count%2 == 1 && masks[maskBytes-1]>>4 != 0 {
		return "compact padding nibble is not zero"
	}
	slots := 0
	for _, m := range masks {
		slots += bits.OnesCount8(m)
	}
	if len(fps) != 2*slots {
		return "compact fingerprint bytes do not match the occupancy masks"
	}
	return ""
}

// decodeCompact fills dst (len = count) from a payload that passed
// checkCompact and returns the reason it is not canonical, or "". Words
// whose fingerprints lie 8 or more bytes before the end are decoded without
// branches from one 8-byte load: each occupied slot takes the next 16 bits
// of it (the shifts come from a table by occupancy nibble, so no slot waits
// for the one before it), and the cursor moves once per word; the rest,
// whose reads could pass the end, take the checked path.
func decodeCompact(dst []uint64, payload []byte) string {
	masks, fps := payload[:(len(dst)+1)/2], payload[(len(dst)+1)/2:]
	p, i := 0, 0
	var bad byte
	var badSlots uint64
	for ; i < len(dst) && p+8 <= len(fps); i++ {
		m := masks[i/2] >> (4 * (i & 1)) & 0xF
		v := binary.LittleEndian.Uint64(fps[p:])
		sh := &nibbleShifts[m]
		w := (v>>sh[0]&0xFFFF | v>>sh[1]&0xFFFF<<16 | v>>sh[2]&0xFFFF<<32 | v>>sh[3]<<48) & nibbleSlots[m]
		p += 2 * bits.OnesCount8(m)
		dst[i] = w
		// An occupied slot that holds 0: its flag (occupancy's, before
		// the flags are gathered into a nibble) is missing.
		badSlots |= ((w&slotLow)+slotLow|w)&slotHigh ^ nibbleSlots[m]&slotHigh
	}
	if badSlots != 0 {
		bad = 1
	}
	for ; i < len(dst); i++ {
		m := masks[i/2] >> (4 * (i & 1)) & 0xF
		var w uint64
		for s := range 4 {
			if m&(1<<s) != 0 {
				w |= uint64(binary.LittleEndian.Uint16(fps[p:])) << (16 * s)
				p += 2
			}
		}
		dst[i] = w
		bad |= occupancy(w) ^ m
	}
	if bad != 0 {
		return "compact occupied slot holds fingerprint 0"
	}
	return ""
}
