package relayproto

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// addGoldenSeeds seeds f with every golden frame and a few concatenations.
func addGoldenSeeds(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.frame"))
	var all []byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		all = append(all, b...)
	}
	f.Add(all)
	f.Add([]byte("GIRF"))
	f.Add([]byte{})
}

// FuzzDecode checks that no input panics the generic decoder, and that a
// decoded message re-encodes to a frame that decodes to the same message.
func FuzzDecode(f *testing.F) {
	addGoldenSeeds(f)
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
	addGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		var s Snapshot
		rest, err := DecodeSnapshot(&s, src)
		if err != nil {
			return
		}
		again, err := AppendSnapshot(nil, &s)
		if err != nil {
			t.Fatalf("AppendSnapshot(decoded): %v", err)
		}
		var s2 Snapshot
		if _, err := DecodeSnapshot(&s2, again); err != nil || !reflect.DeepEqual(s.Words, s2.Words) {
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
	addGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		var d Delta
		if _, err := DecodeDelta(&d, src); err != nil {
			return
		}
		if len(d.Images) > MaxDeltaImages {
			t.Fatalf("decoded %d images, limit %d", len(d.Images), MaxDeltaImages)
		}
		if _, err := AppendDelta(nil, &d); err != nil {
			t.Fatalf("AppendDelta(decoded): %v", err)
		}
	})
}

// FuzzDecodeDrainMarker checks the drain-marker decoder.
func FuzzDecodeDrainMarker(f *testing.F) {
	addGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		var m DrainMarker
		if _, err := DecodeDrainMarker(&m, src); err != nil {
			return
		}
		if _, err := AppendDrainMarker(nil, &m); err != nil {
			t.Fatalf("AppendDrainMarker(decoded): %v", err)
		}
	})
}

// FuzzDecodeHeartbeat checks the heartbeat decoder.
func FuzzDecodeHeartbeat(f *testing.F) {
	addGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		var h Heartbeat
		if _, err := DecodeHeartbeat(&h, src); err != nil {
			return
		}
		if _, err := AppendHeartbeat(nil, &h); err != nil {
			t.Fatalf("AppendHeartbeat(decoded): %v", err)
		}
	})
}

// FuzzDecodeLoadReport checks the load-report decoder.
func FuzzDecodeLoadReport(f *testing.F) {
	addGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		var r LoadReport
		if _, err := DecodeLoadReport(&r, src); err != nil {
			return
		}
		if _, err := AppendLoadReport(nil, &r); err != nil {
			t.Fatalf("AppendLoadReport(decoded): %v", err)
		}
	})
}

// FuzzCompactPayload checks the compact word decoder on its own: any payload
// it accepts re-encodes to exactly the same bytes.
func FuzzCompactPayload(f *testing.F) {
	f.Add(uint16(3), appendCompact(nil, []uint64{0x0000000100000000, 0x0002000000000003, 0x0004}))
	f.Add(uint16(0), []byte{})
	f.Add(uint16(1), []byte{0x0F, 1, 0, 2, 0, 3, 0, 4, 0})
	f.Fuzz(func(t *testing.T, count uint16, payload []byte) {
		if checkCompact(int(count), payload) != "" {
			return
		}
		words := make([]uint64, count)
		if decodeCompact(words, payload) != "" {
			return
		}
		if again := appendCompact(nil, words); !bytes.Equal(again, payload) {
			t.Fatalf("compact payload re-encodes differently:\n% x\n% x", payload, again)
		}
	})
}

// FuzzConsumerApply feeds arbitrary bytes to a consumer with a READY lane:
// nothing panics, and a frame that fails to decode changes no lane.
func FuzzConsumerApply(f *testing.F) {
	addGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		c, tbl, fm := newTestConsumer(t, 2, 8, ConsumerConfig{OrderedHeartbeats: true})
		readyLane(t, c, 1, testIdentity(fm, 2, 1), []uint64{1, 2, 3, 4, 5, 6, 7, 8}, 3)
		for len(src) > 0 {
			before := tbl.laneCopy(1)
			st := c.Lane(1).Status()
			_, rest, err := c.Apply(src)
			var le *LaneError
			if err != nil && !errors.As(err, &le) {
				if !reflect.DeepEqual(before, tbl.words[1]) || c.Lane(1).Status() != st {
					t.Fatalf("a frame error changed lane 1")
				}
				return
			}
			src = rest
		}
	})
}
