package relayproto

import (
	"encoding/binary"
	"math/bits"
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

// occupancy returns bucket word w's slot-occupancy nibble: bit i is set when
// slot i (bits 16i…16i+15) is non-zero.
func occupancy(w uint64) byte {
	var m byte
	for i := range 4 {
		if uint16(w>>(16*i)) != 0 {
			m |= 1 << i
		}
	}
	return m
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
	dst = append(dst, make([]byte, (len(words)+1)/2)...)
	for i, w := range words {
		m := occupancy(w)
		dst[masks+i/2] |= m << (4 * (i & 1))
		for s := range 4 {
			if m&(1<<s) != 0 {
				dst = binary.LittleEndian.AppendUint16(dst, uint16(w>>(16*s)))
			}
		}
	}
	return dst
}

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
// checkCompact and returns the reason it is not canonical, or "".
func decodeCompact(dst []uint64, payload []byte) string {
	masks, fps := payload[:(len(dst)+1)/2], payload[(len(dst)+1)/2:]
	p := 0
	for i := range dst {
		m := masks[i/2] >> (4 * (i & 1)) & 0xF
		var w uint64
		for s := range 4 {
			if m&(1<<s) == 0 {
				continue
			}
			fp := binary.LittleEndian.Uint16(fps[p:])
			p += 2
			if fp == 0 {
				return "compact occupied slot holds fingerprint 0"
			}
			w |= uint64(fp) << (16 * s)
		}
		dst[i] = w
	}
	return ""
}
