package wire

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/internal/prototest"
)

// addGoldenSeeds seeds f with every golden frame and a few concatenations.
// FuzzDecode checks that no input panics the generic decoder, and that a
// decoded message re-encodes to a frame that decodes to the same message.
func FuzzDecode(f *testing.F) {
	prototest.AddFrameSeeds(f, "testdata")
	f.Fuzz(func(t *testing.T, src []byte) {
		for len(src) > 0 {
			m, rest, err := Decode(src)
			if err != nil {
				return
			}
			if len(rest) >= len(src) {
				t.Fatalf("Decode consumed nothing")
			}
			again, err := AppendFrame(nil, m)
			if err != nil {
				t.Fatalf("AppendFrame(decoded %v): %v", m.Type(), err)
			}
			m2, tail, err := Decode(again)
			if err != nil || len(tail) != 0 || !reflect.DeepEqual(m, m2) {
				t.Fatalf("re-decoded %v differs: %v", m.Type(), err)
			}
			src = rest
		}
	})
}

// FuzzDecodeSnapshot checks the snapshot decoder, and that a decoded chunk
// re-encodes byte for byte (our encoder is canonical, and the words round
// trip exactly in either encoding).
func FuzzDecodeSnapshot(f *testing.F) {
	prototest.AddFrameSeeds(f, "testdata")
	f.Fuzz(func(t *testing.T, src []byte) {
		var s relayproto.Snapshot
		rest, err := decodeSnapshot(&s, src)
		if err != nil {
			return
		}
		again, err := appendSnapshot(nil, &s)
		if err != nil {
			t.Fatalf("appendSnapshot(decoded): %v", err)
		}
		var s2 relayproto.Snapshot
		if _, err := decodeSnapshot(&s2, again); err != nil || !reflect.DeepEqual(s.Words, s2.Words) {
			t.Fatalf("snapshot words do not round-trip: %v", err)
		}
		// Every non-shortest msgpack form is longer, so a frame of the same
		// length as its re-encoding was canonical and must match it.
		if frame := src[:len(src)-len(rest)]; len(again) == len(frame) && !bytes.Equal(again, frame) {
			t.Fatalf("snapshot re-encodes differently:\n% x\n% x", frame, again)
		}
	})
}

// FuzzDecodeDelta checks the delta decoder.
func FuzzDecodeDelta(f *testing.F) {
	prototest.AddFrameSeeds(f, "testdata")
	f.Fuzz(func(t *testing.T, src []byte) {
		var d relayproto.Delta
		if _, err := decodeDelta(&d, src); err != nil {
			return
		}
		if len(d.Images) > relayproto.MaxDeltaImages {
			t.Fatalf("decoded %d images, limit %d", len(d.Images), relayproto.MaxDeltaImages)
		}
		if _, err := appendDelta(nil, &d); err != nil {
			t.Fatalf("appendDelta(decoded): %v", err)
		}
	})
}

// FuzzDecodeDrainMarker checks the drain-marker decoder.
func FuzzDecodeDrainMarker(f *testing.F) {
	prototest.AddFrameSeeds(f, "testdata")
	f.Fuzz(func(t *testing.T, src []byte) {
		var m relayproto.DrainMarker
		if _, err := decodeDrainMarker(&m, src); err != nil {
			return
		}
		if _, err := appendDrainMarker(nil, &m); err != nil {
			t.Fatalf("appendDrainMarker(decoded): %v", err)
		}
	})
}

// FuzzDecodeHeartbeat checks the heartbeat decoder.
func FuzzDecodeHeartbeat(f *testing.F) {
	prototest.AddFrameSeeds(f, "testdata")
	f.Fuzz(func(t *testing.T, src []byte) {
		var h relayproto.Heartbeat
		if _, err := decodeHeartbeat(&h, src); err != nil {
			return
		}
		if _, err := appendHeartbeat(nil, &h); err != nil {
			t.Fatalf("appendHeartbeat(decoded): %v", err)
		}
	})
}

// FuzzDecodeLoadReport checks the load-report decoder.
func FuzzDecodeLoadReport(f *testing.F) {
	prototest.AddFrameSeeds(f, "testdata")
	f.Fuzz(func(t *testing.T, src []byte) {
		var r relayproto.LoadReport
		if _, err := DecodeLoadReport(&r, src); err != nil {
			return
		}
		if _, err := appendLoadReport(nil, &r); err != nil {
			t.Fatalf("appendLoadReport(decoded): %v", err)
		}
	})
}
