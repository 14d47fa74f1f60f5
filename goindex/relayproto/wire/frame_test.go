package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/internal/prototest"
	"github.com/goindex/goindex/goindex/relayproto/snapenc"
)

// sampleMessages are the golden-file messages: every frame type, leased and
// fan-out, both snapshot encodings, an odd chunk and extreme integers.
func sampleMessages(t testing.TB) map[string]relayproto.Message {
	f := prototest.Format(t, 8)
	id := relayproto.ProducerIdentity{Pool: relayproto.PoolID{Domain: 7, DC: 3}, Incarnation: 0x1122334455667788, LayoutGeneration: 2, Format: f}
	lease := relayproto.Lease{ConsumerInstance: 42, Lane: 3, Epoch: 9}
	words := []uint64{0, 0x000000000000B49E, 0xBABF000045240000, 0xFFFFFFFFFFFFFFFF, 0, 0x0001000000000000, 0x7FFF800000010002, 0}
	return map[string]relayproto.Message{
		"snapshot_compact":       &relayproto.Snapshot{Identity: id, Lease: lease, Sequence: 7, Total: 8, Words: words},
		"snapshot_dense":         &relayproto.Snapshot{Identity: id, Lease: lease, Sequence: 7, Total: 8, Words: words, Encoding: snapenc.Dense},
		"snapshot_chunk_odd":     &relayproto.Snapshot{Identity: id, Sequence: math.MaxUint64, Total: 8, Offset: 5, Words: words[5:]},
		"delta":                  &relayproto.Delta{Identity: id, Lease: lease, Base: 7, Sequence: 8, Images: []relayproto.Image{{Bucket: 1, Word: 0x000000000000B49E}, {Bucket: 6, Word: 0}}},
		"delta_fanout":           &relayproto.Delta{Identity: id, Base: math.MaxUint64 - 1, Sequence: math.MaxUint64, Images: []relayproto.Image{{Bucket: 7, Word: 1}}},
		"drain_marker":           &relayproto.DrainMarker{Identity: id, Lease: lease, Expected: 8},
		"heartbeat_fanout":       &relayproto.Heartbeat{Identity: id, Sequence: 300},
		"load_report":            &relayproto.LoadReport{Identity: id, Sequence: 8, TimestampUnixNano: 1764684000123456789, IntervalMs: 1000, ActiveBlocks: 1 << 20, QueuedPrefillTokens: 65536, ActiveDecodeBlocks: 4096, LiveWorkers: 16, CapacityBlocks: 1 << 22, PrefillTokensPerMs: 20.5, QueueTokensPerMs: 300, DecodeBlocksPerMs: 1.25},
		"load_report_unmeasured": &relayproto.LoadReport{Identity: id},
		"load_report_stored":     &relayproto.LoadReport{Identity: id, Sequence: 8, TimestampUnixNano: 1764684000123456789, IntervalMs: 1000, ActiveBlocks: 1 << 20, LiveWorkers: 16, CapacityBlocks: 1 << 22, StoredBlocks: 1<<33 + 5},
	}
}

// TestFrame_GoldenBytes pins every frame's bytes; RELAYPROTO_UPDATE_GOLDEN=1
// rewrites testdata/*.frame.
func TestFrame_GoldenBytes(t *testing.T) {
	update := os.Getenv("RELAYPROTO_UPDATE_GOLDEN") == "1"
	for name, m := range sampleMessages(t) {
		got, err := AppendFrame(nil, m)
		if err != nil {
			t.Errorf("AppendFrame(%s): %v", name, err)
			continue
		}
		path := filepath.Join("testdata", name+".frame")
		if update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("golden %s: %v (set RELAYPROTO_UPDATE_GOLDEN=1 to create it)", path, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("AppendFrame(%s) = %x, golden %x", name, got, want)
		}
		dec, rest, err := Decode(want)
		if err != nil || len(rest) != 0 {
			t.Errorf("Decode(golden %s) = %v, %d bytes left", name, err, len(rest))
			continue
		}
		if !reflect.DeepEqual(dec, m) {
			t.Errorf("Decode(golden %s) = %+v, want %+v", name, dec, m)
		}
	}
}

func TestFrame_HeaderLayout(t *testing.T) {
	m := sampleMessages(t)["delta"]
	b, err := AppendFrame([]byte("prefix"), m)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:6]) != "prefix" {
		t.Fatalf("AppendFrame overwrote dst's existing bytes")
	}
	h := b[6:]
	body := h[headerBytes:]
	if string(h[:4]) != "GIRF" || h[4] != Version || relayproto.FrameType(h[5]) != relayproto.FrameDelta || h[6] != 0 || h[7] != 0 {
		t.Errorf("header % x: want magic GIRF, version 1, type delta, reserved 0", h[:8])
	}
	if n := binary.LittleEndian.Uint32(h[8:]); int(n) != len(body) {
		t.Errorf("header length %d, body is %d bytes", n, len(body))
	}
	if sum := binary.LittleEndian.Uint32(h[12:]); sum != checksum(body) {
		t.Errorf("header checksum 0x%08x, XXH3 low 32 of the body is 0x%08x", sum, checksum(body))
	}
	if hd, err := parseHeader(h); hd.t != relayproto.FrameDelta || err != nil {
		t.Errorf("parseHeader = %v, %v; want delta", hd.t, err)
	}
}

func TestFrame_ConcatenatedFramesDecodeInOrder(t *testing.T) {
	msgs := sampleMessages(t)
	names := []string{"snapshot_compact", "delta", "drain_marker", "heartbeat_fanout", "load_report"}
	var stream []byte
	for _, n := range names {
		var err error
		if stream, err = AppendFrame(stream, msgs[n]); err != nil {
			t.Fatal(err)
		}
	}
	var d Decoder
	for _, n := range names {
		m, rest, err := d.Decode(stream)
		if err != nil {
			t.Fatalf("Decode(%s): %v", n, err)
		}
		if !reflect.DeepEqual(m, msgs[n]) {
			t.Errorf("Decode(%s) = %+v, want %+v", n, m, msgs[n])
		}
		stream = rest
	}
	if len(stream) != 0 {
		t.Errorf("%d bytes left after all frames", len(stream))
	}
}

func TestFrame_TypedDecodersRefuseOtherTypes(t *testing.T) {
	b, _ := AppendFrame(nil, sampleMessages(t)["heartbeat_fanout"])
	var d relayproto.Delta
	if _, err := decodeDelta(&d, b); !errors.Is(err, ErrMalformed) {
		t.Errorf("decodeDelta(heartbeat frame) = %v, want ErrMalformed", err)
	}
	var h relayproto.Heartbeat
	if rest, err := decodeHeartbeat(&h, b); err != nil || len(rest) != 0 || h.Sequence != 300 {
		t.Errorf("DecodeHeartbeat = %+v, %v", h, err)
	}
}

// TestFrame_EveryBitFlipAndTruncationIsDetected flips each bit of each
// golden frame and cuts it at every length: decoding must fail (the
// checksum covers the body, the header is checked field by field).
func TestFrame_EveryBitFlipAndTruncationIsDetected(t *testing.T) {
	for name, m := range sampleMessages(t) {
		frame, err := AppendFrame(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		for i := range frame {
			for bit := range 8 {
				c := bytes.Clone(frame)
				c[i] ^= 1 << bit
				if got, _, err := Decode(c); err == nil {
					t.Errorf("%s with bit %d of byte %d flipped decoded to %+v", name, bit, i, got)
				}
			}
		}
		for n := range len(frame) {
			if _, _, err := Decode(frame[:n]); err == nil {
				t.Errorf("%s cut to %d of %d bytes decoded", name, n, len(frame))
			}
		}
	}
}

func TestFrame_CorruptBodyIsAChecksumError(t *testing.T) {
	frame, _ := AppendFrame(nil, sampleMessages(t)["delta"])
	frame[len(frame)-1] ^= 0xFF
	var fe *FrameError
	_, _, err := Decode(frame)
	if !errors.Is(err, ErrChecksum) || !errors.As(err, &fe) || fe.Offset != 12 || fe.Lane != -1 {
		t.Errorf("Decode(corrupt body) = %v, want a *FrameError with ErrChecksum at byte 12", err)
	}
}

// reframe rewrites frame's body with body and fixes length and checksum.
func reframe(frame []byte, body []byte) []byte {
	out := append(bytes.Clone(frame[:headerBytes]), body...)
	binary.LittleEndian.PutUint32(out[8:], uint32(len(body)))
	binary.LittleEndian.PutUint32(out[12:], checksum(body))
	return out
}

func TestFrame_SizeLimitsAreCheckedBeforeAllocating(t *testing.T) {
	f := prototest.Format(t, 1<<20)
	id := prototest.Identity(f, 1, 1)

	// Encoders refuse over-limit messages and leave dst as it was.
	dst := []byte("keep")
	if out, err := appendDelta(dst, &relayproto.Delta{Identity: id, Images: make([]relayproto.Image, relayproto.MaxDeltaImages+1)}); !errors.Is(err, ErrTooLarge) || string(out) != "keep" {
		t.Errorf("appendDelta(MaxDeltaImages+1) = %v, dst %q; want ErrTooLarge and dst unchanged", err, out)
	}
	if out, err := appendSnapshot(dst, &relayproto.Snapshot{Identity: id, Total: 1 << 20, Words: make([]uint64, relayproto.MaxChunkWords+1)}); !errors.Is(err, ErrTooLarge) || string(out) != "keep" {
		t.Errorf("appendSnapshot(MaxChunkWords+1) = %v, dst %q; want ErrTooLarge and dst unchanged", err, out)
	}
	// The largest legal frames fit MaxFrameBytes.
	big, err := appendDelta(nil, &relayproto.Delta{Identity: id, Images: make([]relayproto.Image, relayproto.MaxDeltaImages)})
	if err != nil || len(big) > MaxFrameBytes {
		t.Errorf("appendDelta(MaxDeltaImages) = %d bytes, %v; want ≤ %d", len(big), err, MaxFrameBytes)
	}
	full := make([]uint64, relayproto.MaxChunkWords)
	for i := range full {
		full[i] = 0x0001000100010001
	}
	big, err = appendSnapshot(nil, &relayproto.Snapshot{Identity: id, Total: 1 << 20, Words: full})
	if err != nil || len(big) > MaxFrameBytes {
		t.Errorf("appendSnapshot(MaxChunkWords, all full) = %d bytes, %v; want ≤ %d", len(big), err, MaxFrameBytes)
	}

	// A header claiming a body over the limit is refused from the header.
	h, _ := AppendFrame(nil, sampleMessages(t)["heartbeat_fanout"])
	binary.LittleEndian.PutUint32(h[8:], MaxFrameBytes)
	if _, _, err := Decode(h); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Decode(body length %d) = %v, want ErrTooLarge", MaxFrameBytes, err)
	}

	// A snapshot claiming more words than a chunk may hold, or a delta bin
	// larger than MaxDeltaImages, is refused before any words are allocated.
	snap, _ := AppendFrame(nil, sampleMessages(t)["snapshot_dense"])
	body := bytes.Clone(snap[headerBytes:])
	countAt := bytes.Index(body, []byte{0x01, 0x08, 0xc4}) // encoding 1, count 8, bin8 header
	if countAt < 0 {
		t.Fatalf("snapshot body layout changed: % x", body)
	}
	huge := append(append(bytes.Clone(body[:countAt+1]), 0xce, 0x00, 0x08, 0x00, 0x01), body[countAt+2:]...) // count = MaxChunkWords+1
	var s relayproto.Snapshot
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := decodeSnapshot(&s, reframe(snap, huge)); !errors.Is(err, ErrTooLarge) {
			t.Errorf("decodeSnapshot(count %d) = %v, want ErrTooLarge", relayproto.MaxChunkWords+1, err)
		}
	})
	if s.Words != nil {
		t.Errorf("a refused snapshot allocated %d words", len(s.Words))
	}
	if allocs > 30 {
		t.Errorf("refusing an oversized snapshot made %v allocations", allocs)
	}
}

func TestFrame_DecoderRejectsHostileFields(t *testing.T) {
	base, _ := AppendFrame(nil, sampleMessages(t)["heartbeat_fanout"])
	body := base[headerBytes:]
	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"trailing byte", append(bytes.Clone(body), 0x00), ErrMalformed},
		{"signed sequence", append(bytes.Clone(body[:len(body)-3]), 0xd1, 0x01, 0x2c), ErrMalformed},
		{"nil sequence", append(bytes.Clone(body[:len(body)-3]), 0xc0), ErrMalformed},
		{"not an array", []byte{0x80}, ErrMalformed},
		{"empty body", nil, ErrMalformed},
		{"too many fields", append([]byte{0x94}, body[1:]...), ErrMalformed},
	} {
		if _, _, err := Decode(reframe(base, tc.body)); !errors.Is(err, tc.want) {
			t.Errorf("Decode(heartbeat, %s) = %v, want %v", tc.name, err, tc.want)
		}
	}
	// Leases the decoder would reject are refused by the encoders.
	hid := prototest.Identity(prototest.Format(t, 8), 1, 1)
	for _, l := range []relayproto.Lease{{ConsumerInstance: 1}, {Lane: relayproto.MaxLanes, Epoch: 1}} {
		if _, err := appendHeartbeat(nil, &relayproto.Heartbeat{Identity: hid, Lease: l}); !errors.Is(err, ErrMalformed) {
			t.Errorf("appendHeartbeat(%v) = %v, want ErrMalformed", l, err)
		}
	}
	// A bad format inside the identity is ErrBadFormat.
	f := prototest.Format(t, 8)
	id := prototest.Identity(f, 1, 1)
	id.Format.Buckets = 12
	if _, err := appendHeartbeat(nil, &relayproto.Heartbeat{Identity: id}); !errors.Is(err, relayproto.ErrBadFormat) {
		t.Errorf("appendHeartbeat(12 buckets) = %v, want ErrBadFormat", err)
	}
	good, _ := AppendFrame(nil, &relayproto.Heartbeat{Identity: prototest.Identity(f, 1, 1)})
	b := bytes.Clone(good[headerBytes:])
	at := bytes.IndexByte(b, 0x08) // the bucket count
	b[at] = 0x0c
	if _, _, err := Decode(reframe(good, b)); !errors.Is(err, relayproto.ErrBadFormat) {
		t.Errorf("Decode(heartbeat with 12 buckets) = %v, want ErrBadFormat", err)
	}
	// NaN and negative rates are refused both ways.
	r := *sampleMessages(t)["load_report"].(*relayproto.LoadReport)
	r.QueueTokensPerMs = math.NaN()
	if _, err := appendLoadReport(nil, &r); !errors.Is(err, ErrMalformed) {
		t.Errorf("appendLoadReport(NaN rate) = %v, want ErrMalformed", err)
	}
	lr, _ := AppendFrame(nil, sampleMessages(t)["load_report"])
	lb := bytes.Clone(lr[headerBytes:])
	binary.BigEndian.PutUint64(lb[len(lb)-8:], math.Float64bits(-1))
	if _, _, err := Decode(reframe(lr, lb)); !errors.Is(err, ErrMalformed) {
		t.Errorf("Decode(load report with rate -1) = %v, want ErrMalformed", err)
	}
}

func TestFrame_DecoderReusesBuffers(t *testing.T) {
	frame, _ := AppendFrame(nil, sampleMessages(t)["delta"])
	var d Decoder
	if _, _, err := d.Decode(frame); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := d.Decode(frame); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Decoder.Decode(delta) allocates %v times per frame, want 0", allocs)
	}
}

// TestFrame_LoadReportStoredBlocksBothWays holds the stored-blocks counter
// to its compatibility rule: a report without it (testdata/load_report.frame,
// written before the field existed) decodes with 0, a report whose counter
// is 0 is written exactly as before (so decoders that know only 12 fields
// take it), a counted report has the 13th field, and the non-canonical or
// hostile forms are refused.
func TestFrame_LoadReportStoredBlocksBothWays(t *testing.T) {
	old, err := os.ReadFile(filepath.Join("testdata", "load_report.frame"))
	if err != nil {
		t.Fatal(err)
	}
	var d Decoder
	counted := *sampleMessages(t)["load_report"].(*relayproto.LoadReport)
	counted.StoredBlocks = 12345
	frame, err := AppendFrame(nil, &counted)
	if err != nil {
		t.Fatal(err)
	}
	if got := frame[headerBytes]; got != 0x90|loadFieldsAll {
		t.Errorf("AppendFrame(StoredBlocks 12345) body opens with 0x%02x, want a %d-element array", got, loadFieldsAll)
	}
	m, _, err := d.Decode(frame)
	if err != nil || m.(*relayproto.LoadReport).StoredBlocks != 12345 {
		t.Errorf("Decode(counted report) = %+v, %v; want StoredBlocks 12345", m, err)
	}
	// The same Decoder then reads a report without the field as 0, not as
	// the previous report's counter.
	m, _, err = d.Decode(old)
	if err != nil || m.(*relayproto.LoadReport).StoredBlocks != 0 {
		t.Errorf("Decode(12-field golden) = %+v, %v; want StoredBlocks 0", m, err)
	}
	uncounted := counted
	uncounted.StoredBlocks = 0
	if b, err := AppendFrame(nil, &uncounted); err != nil || !bytes.Equal(b, old) {
		t.Errorf("AppendFrame(StoredBlocks 0) = %x, %v; want the 12-field golden %x", b, err, old)
	}
	body := old[headerBytes:]
	grow := func(n byte, tail ...byte) []byte {
		return append(append([]byte{0x90 | n}, body[1:]...), tail...)
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"13 fields holding 0", grow(13, 0x00)},
		{"13 fields, signed counter", grow(13, 0xd0, 0x05)},
		{"13 fields, nil counter", grow(13, 0xc0)},
		{"13 fields, counter missing", grow(13)},
		{"14 fields", grow(14, 0x05, 0x05)},
		{"11 fields", append([]byte{0x90 | 11}, body[1:len(body)-9]...)},
	} {
		var r relayproto.LoadReport
		if _, err := DecodeLoadReport(&r, reframe(old, tc.body)); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeLoadReport(%s) = %v, want ErrMalformed", tc.name, err)
		}
	}
}
