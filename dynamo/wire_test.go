package dynamo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

func golden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("golden %s: %v", name, err)
	}
	return b
}

// The events of the CUR goldens (testdata/golden.py writes the same content).
var (
	goldenStored = RouterEvent{WorkerID: 7, Residency: ResidencyWorker, Event: CacheEvent{EventID: 42, Kind: kv.Stored, Stored: StoreData{
		Blocks: []StoredBlock{
			{BlockHash: 9143094415614847814, TokensHash: 9143094415614847814},
			{BlockHash: 9510318385840434533, TokensHash: 12124091508212882195,
				MM: &MMExtraInfo{Objects: []MMObject{{Hash: math.MaxUint64, Offsets: [][2]uint64{{0, 4}}}}}},
		}}}}
	goldenRemoved = RouterEvent{WorkerID: 7, StorageTier: TierHostPinned, Event: CacheEvent{EventID: 43, Kind: kv.Removed,
		Removed: []uint64{9510318385840434533, math.MaxUint64}, DpRank: 1}}
	goldenCleared = RouterEvent{WorkerID: 7, Residency: ResidencyCacheOwner, SessionID: "s-1",
		Event: CacheEvent{EventID: 44, Kind: kv.Cleared}}
	// goldenG2025 is the spec's §2.4 example (values from V4/V5).
	goldenG2025 = RouterEvent{WorkerID: 7, Event: CacheEvent{EventID: 42, Kind: kv.Stored, Stored: StoreData{
		Blocks: []StoredBlock{
			{BlockHash: 9143094415614847814, TokensHash: 9143094415614847814},
			{BlockHash: 9510318385840434533, TokensHash: 12124091508212882195},
		}}}}
)

func TestDecodeJSON_Goldens(t *testing.T) {
	cases := []struct {
		file string
		want RouterEvent
	}{
		{"json_g2025_stored.json", goldenG2025},
		{"json_cur_stored.json", goldenStored},
		{"json_cur_removed.json", goldenRemoved},
		{"json_cur_cleared.json", goldenCleared},
		// Negative i64 literals are the same 64 bits; no dp_rank → 0; unknown keys skipped.
		{"json_g2025_signed.json", RouterEvent{WorkerID: 1, Event: CacheEvent{EventID: 1, Kind: kv.Removed,
			Removed: []uint64{math.MaxUint64, 1 << 63, 1 << 63}}}},
	}
	for _, c := range cases {
		got, err := DecodeJSON(golden(t, c.file))
		if err != nil {
			t.Errorf("DecodeJSON(%s): %v", c.file, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("DecodeJSON(%s) = %+v, want %+v", c.file, got, c.want)
		}
	}
}

func TestAppendJSON_ReproducesCURGoldens(t *testing.T) {
	for file, ev := range map[string]RouterEvent{
		"json_cur_stored.json": goldenStored, "json_cur_removed.json": goldenRemoved, "json_cur_cleared.json": goldenCleared,
	} {
		got, err := AppendJSON(nil, &ev)
		if err != nil {
			t.Errorf("AppendJSON(%s event): %v", file, err)
			continue
		}
		if want := golden(t, file); !bytes.Equal(got, want) {
			t.Errorf("AppendJSON(%s event) =\n%s\nwant\n%s", file, got, want)
		}
	}
}

func TestDecodeMessage_MsgpackGoldens(t *testing.T) {
	cases := []struct {
		file string
		seq  uint64
		ns   uint64 // 0: no published_at_ns
		want RouterEvent
	}{
		{"envelope_stored.msgpack", 0, 0, goldenStored},
		{"envelope_removed.msgpack", 1, 0, goldenRemoved},
		{"envelope_cleared_ns.msgpack", 2, 1767225600000123456, goldenCleared},
	}
	for _, c := range cases {
		b := golden(t, c.file)
		env, evs, err := DecodeMessage(b)
		if err != nil {
			t.Errorf("DecodeMessage(%s): %v", c.file, err)
			continue
		}
		wantEnv := Envelope{Encoding: EncodingMsgpack, Topic: EventTopic, PublisherID: 1<<52 - 1, Sequence: c.seq,
			PublishedAtMs: 1767225600000, HasPublishedAtNs: c.ns != 0, PublishedAtNs: c.ns, Payload: env.Payload}
		if !reflect.DeepEqual(env, wantEnv) {
			t.Errorf("DecodeMessage(%s) envelope = %+v, want %+v", c.file, env, wantEnv)
		}
		if !reflect.DeepEqual(evs, []RouterEvent{c.want}) {
			t.Errorf("DecodeMessage(%s) events = %+v, want [%+v]", c.file, evs, c.want)
		}
		payload, err := AppendMsgpack(nil, &c.want)
		if err != nil {
			t.Fatalf("AppendMsgpack(%s event): %v", c.file, err)
		}
		if !bytes.Equal(payload, env.Payload) {
			t.Errorf("AppendMsgpack(%s event) = %x, want %x", c.file, payload, env.Payload)
		}
		if got := AppendEnvelope(nil, &env); !bytes.Equal(got, b) {
			t.Errorf("AppendEnvelope(%s envelope) = %x, want %x", c.file, got, b)
		}
	}
}

func TestDecodeMessage_EarlyJSONEnvelope(t *testing.T) {
	env, evs, err := DecodeMessage(golden(t, "envelope_early.json"))
	if err != nil {
		t.Fatalf("DecodeMessage(envelope_early.json): %v", err)
	}
	if env.Encoding != EncodingJSON || env.PublisherID != 99 || env.Sequence != 5 || env.PublishedAtMs != 1700000000000 || env.HasPublishedAtNs {
		t.Errorf("DecodeMessage(envelope_early.json) envelope = %+v, want json, publisher 99, sequence 5, published_at 1700000000000", env)
	}
	if want := golden(t, "json_g2025_stored.json"); !bytes.Equal(env.Payload, want) {
		t.Errorf("early envelope payload = %q, want %q", env.Payload, want)
	}
	if !reflect.DeepEqual(evs, []RouterEvent{goldenG2025}) {
		t.Errorf("early envelope events = %+v, want [%+v]", evs, goldenG2025)
	}
}

func TestDecodeEnvelope_ToleratesUnknownKeysAndArrayPayload(t *testing.T) {
	w := newMPWriter(nil)
	w.mapLen(6)
	w.str("future")
	w.arrayLen(1)
	w.mapLen(1)
	w.str("x")
	w.null()
	w.str("sequence")
	w.uint(9)
	w.str("payload")
	w.arrayLen(3)
	w.uint(1)
	w.uint(2)
	w.uint(255)
	w.str("published_at")
	w.uint(5)
	w.str("publisher_id")
	w.uint(6)
	w.str("published_at_ns")
	w.null()
	env, err := DecodeEnvelope(w.bytes())
	want := Envelope{Encoding: EncodingMsgpack, PublisherID: 6, Sequence: 9, PublishedAtMs: 5, Payload: []byte{1, 2, 255}}
	if err != nil || !reflect.DeepEqual(env, want) {
		t.Errorf("DecodeEnvelope(reordered, unknown key, array payload) = %+v, %v; want %+v", env, err, want)
	}
}

// randomEvent builds a valid RouterEvent with the decoders' slice shapes
// (non-nil, possibly empty).
func randomEvent(rng *rand.Rand) RouterEvent {
	hash := func() uint64 {
		switch rng.IntN(4) {
		case 0:
			return uint64(rng.IntN(300))
		case 1:
			return math.MaxUint64 - uint64(rng.IntN(3))
		}
		return rng.Uint64()
	}
	ev := RouterEvent{
		WorkerID:    hash(),
		StorageTier: StorageTier(rng.IntN(int(TierUnknown) + 1)),
		Residency:   Residency(rng.IntN(int(residencyCount))),
		Event:       CacheEvent{EventID: hash(), Kind: kv.Kind(1 + rng.IntN(3)), DpRank: uint32(hash())},
	}
	if rng.IntN(3) == 0 {
		sessions := []string{"s-1", `quote" back\ slash`, "tab\t nl\n nul\x00", "é <>&", strings.Repeat("x", 40)}
		ev.SessionID = sessions[rng.IntN(len(sessions))]
	}
	switch ev.Event.Kind {
	case kv.Stored:
		s := &ev.Event.Stored
		s.HasParent, s.HasStart = rng.IntN(2) == 0, rng.IntN(2) == 0
		if s.HasParent {
			s.Parent = hash()
		}
		if s.HasStart {
			s.StartPosition = uint32(hash())
		}
		s.Blocks = make([]StoredBlock, rng.IntN(5))
		for i := range s.Blocks {
			s.Blocks[i] = StoredBlock{BlockHash: hash(), TokensHash: hash()}
			if rng.IntN(3) == 0 {
				mm := &MMExtraInfo{Objects: make([]MMObject, rng.IntN(3))}
				for k := range mm.Objects {
					mm.Objects[k] = MMObject{Hash: hash(), Offsets: make([][2]uint64, rng.IntN(3))}
					for r := range mm.Objects[k].Offsets {
						mm.Objects[k].Offsets[r] = [2]uint64{hash(), hash()}
					}
				}
				s.Blocks[i].MM = mm
			}
		}
	case kv.Removed:
		ev.Event.Removed = make([]uint64, rng.IntN(5))
		for i := range ev.Event.Removed {
			ev.Event.Removed[i] = hash()
		}
	}
	return ev
}

func TestEncoders_RoundTripRandomEvents(t *testing.T) {
	rng := testRand(t, 4)
	n := 2000
	if testing.Short() {
		n = 300
	}
	for range n {
		ev := randomEvent(rng)
		j, err := AppendJSON(nil, &ev)
		if err != nil {
			t.Fatalf("AppendJSON(%+v): %v", ev, err)
		}
		if got, err := DecodeJSON(j); err != nil || !reflect.DeepEqual(got, ev) {
			t.Fatalf("DecodeJSON(AppendJSON(%+v)) = %+v, %v\njson %s", ev, got, err, j)
		}
		m, err := AppendMsgpack(nil, &ev)
		if err != nil {
			t.Fatalf("AppendMsgpack(%+v): %v", ev, err)
		}
		env := Envelope{Encoding: EncodingMsgpack, Topic: EventTopic, PublisherID: rng.Uint64(), Sequence: rng.Uint64(),
			PublishedAtMs: rng.Uint64(), HasPublishedAtNs: rng.IntN(2) == 0, Payload: m}
		if env.HasPublishedAtNs {
			env.PublishedAtNs = rng.Uint64()
		}
		gotEnv, got, err := DecodeMessage(AppendEnvelope(nil, &env))
		if err != nil || !reflect.DeepEqual(got, []RouterEvent{ev}) || !reflect.DeepEqual(gotEnv, env) {
			t.Fatalf("DecodeMessage(AppendEnvelope(AppendMsgpack(%+v))) = %+v, %+v, %v; want %+v", ev, gotEnv, got, err, env)
		}
	}
}

func TestAppendJSON_SignedAndUnsignedHashesDecodeEqual(t *testing.T) {
	unsigned := `{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"parent_hash":18446744073709551615,"blocks":[{"block_hash":9223372036854775808,"tokens_hash":1}]}}}}`
	signed := `{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"parent_hash":-1,"blocks":[{"block_hash":-9223372036854775808,"tokens_hash":1}]}}}}`
	a, errA := DecodeJSON([]byte(unsigned))
	b, errB := DecodeJSON([]byte(signed))
	if errA != nil || errB != nil || !reflect.DeepEqual(a, b) {
		t.Errorf("DecodeJSON(unsigned) = %+v, %v; DecodeJSON(signed) = %+v, %v; want equal", a, errA, b, errB)
	}
}

func TestDecodeMsgpack_SignedAndUnsignedHashesDecodeEqual(t *testing.T) {
	event := func(hash func(w *mpWriter, v uint64)) []byte {
		w := newMPWriter(nil)
		w.mapLen(2)
		w.str("worker_id")
		w.uint(1)
		w.str("event")
		w.mapLen(2)
		w.str("event_id")
		w.uint(1)
		w.str("data")
		w.mapLen(1)
		w.str("stored")
		w.mapLen(2)
		w.str("parent_hash")
		hash(w, math.MaxUint64)
		w.str("blocks")
		w.arrayLen(1)
		w.mapLen(2)
		w.str("block_hash")
		hash(w, 1<<63)
		w.str("tokens_hash")
		hash(w, 5)
		return w.bytes()
	}
	unsigned := event(func(w *mpWriter, v uint64) { _ = w.e.EncodeUint64(v) })
	signed := event(func(w *mpWriter, v uint64) { _ = w.e.EncodeInt64(int64(v)) })
	a, errA := DecodeMsgpack(unsigned)
	b, errB := DecodeMsgpack(signed)
	want := RouterEvent{WorkerID: 1, Event: CacheEvent{EventID: 1, Kind: kv.Stored, Stored: StoreData{HasParent: true, Parent: math.MaxUint64,
		Blocks: []StoredBlock{{BlockHash: 1 << 63, TokensHash: 5}}}}}
	if errA != nil || errB != nil || !reflect.DeepEqual(a, want) || !reflect.DeepEqual(b, want) {
		t.Errorf("DecodeMsgpack(unsigned) = %+v, %v; DecodeMsgpack(signed i64) = %+v, %v; want both %+v", a, errA, b, errB, want)
	}
}

func TestDecodeJSON_RejectsBadInput(t *testing.T) {
	ok := `{"worker_id":1,"event":{"event_id":1,"data":"cleared"}}`
	if _, err := DecodeJSON([]byte(ok)); err != nil {
		t.Fatalf("DecodeJSON(%s): %v", ok, err)
	}
	cases := []struct {
		in   string
		want error
	}{
		{`{"worker_id":1.5,"event":{"event_id":1,"data":"cleared"}}`, ErrMalformed},
		{`{"worker_id":-1,"event":{"event_id":1,"data":"cleared"}}`, ErrMalformed},
		{`{"worker_id":"1","event":{"event_id":1,"data":"cleared"}}`, ErrMalformed},
		{`{"event":{"event_id":1,"data":"cleared"}}`, ErrMalformed},
		{`{"worker_id":1}`, ErrMalformed},
		{`{"worker_id":1,"event":{"data":"cleared"}}`, ErrMalformed},
		{`{"worker_id":1,"event":{"event_id":1}}`, ErrMalformed},
		{`{"worker_id":1,"event":{"event_id":1,"data":"stored"}}`, ErrMalformed},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[]},"removed":{"block_hashes":[]}}}}`, ErrMalformed},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"moved":{}}}}`, ErrMalformed},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"parent_hash":null}}}}`, ErrMalformed},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[{"block_hash":1}]}}}}`, ErrMalformed},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[{"block_hash":1e3,"tokens_hash":1}]}}}}`, ErrMalformed},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[{"block_hash":18446744073709551616,"tokens_hash":1}]}}}}`, ErrMalformed},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"removed":{"block_hashes":[-9223372036854775809]}}}}`, ErrMalformed},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"removed":{"block_hashes":["1"]}}}}`, ErrMalformed},
		{`{"worker_id":1,"event":{"event_id":1,"data":"cleared","dp_rank":4294967296}}`, ErrMalformed},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[{"block_hash":1,"tokens_hash":1,"mm_extra_info":{"mm_objects":[{"mm_hash":1,"offsets":[[1,2,3]]}]}}]}}}}`, ErrMalformed},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[{"block_hash":1,"tokens_hash":1,"mm_extra_info":{}}]}}}}`, ErrMalformed},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[{"block_hash":1,"tokens_hash":1,"mm_extra_info":{"mm_objects":[{"mm_hash":1}]}}]}}}}`, ErrMalformed},
		{`{"worker_id":1,"event":{"event_id":1,"data":"cleared"}} x`, ErrMalformed},
		{`[]`, ErrMalformed},
		{``, ErrMalformed},
	}
	for _, c := range cases {
		_, err := DecodeJSON([]byte(c.in))
		var de *DecodeError
		if !errors.Is(err, c.want) || !errors.As(err, &de) {
			t.Errorf("DecodeJSON(%s) error = %v, want *DecodeError wrapping %v", c.in, err, c.want)
		}
	}
	var le *LimitError
	if _, err := DecodeJSON(make([]byte, MaxMessageBytes+1)); !errors.As(err, &le) {
		t.Errorf("DecodeJSON(%d bytes) error = %v, want *LimitError", MaxMessageBytes+1, err)
	}
}

func TestDecodeMsgpack_RejectsBadInput(t *testing.T) {
	// Each case is a RouterEvent map built from a few entries.
	build := func(fn func(w *mpWriter)) []byte { w := newMPWriter(nil); fn(w); return w.bytes() }
	cleared := func(w *mpWriter) {
		w.str("event")
		w.mapLen(2)
		w.str("event_id")
		w.uint(1)
		w.str("data")
		w.str("cleared")
	}
	limit := &LimitError{} // marks cases that must fail with a *LimitError
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"missing worker", build(func(w *mpWriter) { w.mapLen(1); cleared(w) }), ErrMalformed},
		{"negative worker", build(func(w *mpWriter) {
			w.mapLen(2)
			w.str("worker_id")
			_ = w.e.EncodeInt(-1)
			cleared(w)
		}), ErrMalformed},
		{"array instead of map", build(func(w *mpWriter) { w.arrayLen(0) }), ErrMalformed},
		{"trailing bytes", append(build(func(w *mpWriter) { w.mapLen(2); w.str("worker_id"); w.uint(1); cleared(w) }), 0xc0), ErrMalformed},
		{"unknown unit variant", build(func(w *mpWriter) {
			w.mapLen(2)
			w.str("worker_id")
			w.uint(1)
			w.str("event")
			w.mapLen(2)
			w.str("event_id")
			w.uint(1)
			w.str("data")
			w.str("stored")
		}), ErrMalformed},
		{"deeply nested unknown value", build(func(w *mpWriter) {
			w.mapLen(3)
			w.str("worker_id")
			w.uint(1)
			w.str("future")
			for range MaxNesting + 1 {
				w.arrayLen(1)
			}
			w.null()
			cleared(w)
		}), limit},
		{"huge array header", build(func(w *mpWriter) {
			w.mapLen(2)
			w.str("worker_id")
			w.uint(1)
			w.str("event")
			w.mapLen(2)
			w.str("event_id")
			w.uint(1)
			w.str("data")
			w.mapLen(1)
			w.str("removed")
			w.mapLen(1)
			w.str("block_hashes")
			w.arrayLen(MaxBlocksPerEvent)
		}), ErrMalformed},
		{"huge string header", append(build(func(w *mpWriter) { w.mapLen(1) }), 0xdb, 0xff, 0xff, 0xff, 0xff), limit},
		{"empty", nil, ErrMalformed},
	}
	for _, c := range cases {
		_, err := DecodeMsgpack(c.in)
		if c.want == error(limit) {
			var le *LimitError
			if !errors.As(err, &le) {
				t.Errorf("%s: DecodeMsgpack(%x) error = %v, want *LimitError", c.name, c.in, err)
			}
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: DecodeMsgpack(%x) error = %v, want %v", c.name, c.in, err, c.want)
		}
	}
}

func TestDecoders_EveryTruncationFails(t *testing.T) {
	for _, file := range []string{"envelope_stored.msgpack", "envelope_cleared_ns.msgpack", "envelope_early.json", "json_cur_stored.json"} {
		b := golden(t, file)
		for n := range len(b) {
			if _, _, err := DecodeMessage(b[:n]); err == nil && !strings.HasSuffix(file, ".json") {
				t.Errorf("DecodeMessage(%s[:%d]) = nil error, want error", file, n)
			}
			if _, err := DecodeJSON(b[:n]); err == nil && strings.HasPrefix(file, "json_") {
				t.Errorf("DecodeJSON(%s[:%d]) = nil error, want error", file, n)
			}
		}
	}
}

func TestDecodeEnvelope_HostileLengthsDoNotAllocate(t *testing.T) {
	// A bin32 payload claiming 4 GiB, and a map32 claiming 2^32−1 entries.
	bin := []byte{0x81, 0xa7, 'p', 'a', 'y', 'l', 'o', 'a', 'd', 0xc6, 0xff, 0xff, 0xff, 0xff}
	mp := []byte{0xdf, 0xff, 0xff, 0xff, 0xff}
	u32 := binary.BigEndian.AppendUint32(nil, math.MaxUint32)
	arr := append([]byte{0x81, 0xa7, 'p', 'a', 'y', 'l', 'o', 'a', 'd', 0xdd}, u32...)
	for _, in := range [][]byte{bin, mp, arr} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := DecodeEnvelope(in)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("DecodeEnvelope(%x) = nil error, want error", in)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Errorf("DecodeEnvelope(%x) allocated %d bytes, want < 1 MiB", in, grew)
		}
	}
}

func TestDecodeEnvelope_RejectsBadEnvelopes(t *testing.T) {
	cases := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"first byte", "\x93\x01\x02\x03"},
		{"json missing payload", `{"publisher_id":1,"sequence":2,"published_at":3}`},
		{"json payload byte 256", `{"publisher_id":1,"sequence":2,"published_at":3,"payload":[256]}`},
		{"json payload string", `{"publisher_id":1,"sequence":2,"published_at":3,"payload":"eyJ9"}`},
		{"json payload float", `{"publisher_id":1,"sequence":2,"published_at":3,"payload":[1.0]}`},
		{"msgpack missing sequence", "\x83\xacpublisher_id\x01\xacpublished_at\x02\xa7payload\xc4\x00"},
	}
	for _, c := range cases {
		if _, err := DecodeEnvelope([]byte(c.in)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: DecodeEnvelope(%q) error = %v, want ErrMalformed", c.name, c.in, err)
		}
	}
	env, err := DecodeEnvelope([]byte(`{"publisher_id":1,"sequence":2,"published_at":3,"payload":[ ]}`))
	if err != nil || len(env.Payload) != 0 {
		t.Errorf("DecodeEnvelope(empty payload array) = %+v, %v; want empty payload", env, err)
	}
}

func TestDecodeError_MessageNamesFormatAndPath(t *testing.T) {
	_, err := DecodeJSON([]byte(`{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[{"block_hash":1}]}}}}`))
	want := "dynamo: json router event: event: data: stored: blocks[0]: missing tokens_hash"
	if err == nil || err.Error() != want {
		t.Errorf("DecodeJSON error = %q, want %q", err, want)
	}
	_, err = (&RouterEvent{Residency: ResidencyCacheOwner, Event: CacheEvent{Kind: kv.Removed}}).TargetsPrimary()
	want = `dynamo: unsupported residency domain (a cache owner's removed event on the device tier)`
	if err == nil || err.Error() != want {
		t.Errorf("TargetsPrimary error = %q, want %q", err, want)
	}
}

// frame prepends Dynamo's binary frame header (version 1, u32 big-endian
// payload length) to b.
func frame(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{frameVersion}, uint32(len(b))), b...)
}

// Whether the ZMQ event plane frames envelopes is [unverified] (§2.5): each
// golden must decode the same with and without the 5-byte frame header.
func TestDecodeMessage_AcceptsEnvelopeWithAndWithoutFrameHeader(t *testing.T) {
	for _, file := range []string{"envelope_stored.msgpack", "envelope_cleared_ns.msgpack", "envelope_early.json"} {
		b := golden(t, file)
		wantEnv, wantEv, err := DecodeMessage(b)
		if err != nil {
			t.Fatalf("DecodeMessage(%s): %v", file, err)
		}
		env, ev, err := DecodeMessage(frame(b))
		if err != nil || !reflect.DeepEqual(env, wantEnv) || !reflect.DeepEqual(ev, wantEv) {
			t.Errorf("DecodeMessage(frame(%s)) = %+v, %+v, %v; want %+v, %+v", file, env, ev, err, wantEnv, wantEv)
		}
	}
	b := golden(t, "envelope_stored.msgpack")
	bad := []struct {
		name string
		in   []byte
	}{
		{"header only, truncated", frame(b)[:3]},
		{"length one short", frame(b)[:len(b)+frameHeaderBytes-1]},
		{"empty frame", frame(nil)},
		{"framed twice", frame(frame(b))},
		{"version 2", append([]byte{2}, frame(b)[1:]...)},
	}
	for _, c := range bad {
		if _, _, err := DecodeMessage(c.in); !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrFrameHeader) {
			t.Errorf("%s: DecodeMessage(%x…) error = %v, want ErrMalformed or ErrFrameHeader", c.name, c.in[:min(len(c.in), 8)], err)
		}
	}
	// Upstream's frame decoder takes the announced length and ignores what
	// follows (dynamo-current §1.4); so does this one.
	wantEnv, wantEvs, _ := DecodeMessage(b)
	if env, evs, err := DecodeMessage(append(frame(b), 0x80, 0x00)); err != nil || !reflect.DeepEqual(env, wantEnv) || !reflect.DeepEqual(evs, wantEvs) {
		t.Errorf("DecodeMessage(frame + 2 trailing bytes) = %+v, %+v, %v; want %+v, %+v", env, evs, err, wantEnv, wantEvs)
	}
}

// allocated returns the bytes fn allocated.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A length prefix within the bytes left, followed by junk, must cost memory
// in proportion to the input: events and stored blocks are much larger
// decoded than their shortest encoding.
func TestDecoders_LengthPrefixBeforeJunkAllocatesInProportionToInput(t *testing.T) {
	const junk = 1 << 16
	w := newMPWriter(nil)
	w.arrayLen(2)
	_ = w.e.EncodeFloat64(1)
	w.arrayLen(junk - 1) // MaxEventsPerBatch allows it
	batch := append(w.bytes(), make([]byte, junk)...)

	w = newMPWriter(nil)
	w.mapLen(2)
	w.str("worker_id")
	w.uint(1)
	w.str("event")
	w.mapLen(2)
	w.str("event_id")
	w.uint(1)
	w.str("data")
	w.mapLen(1)
	w.str("stored")
	w.mapLen(1)
	w.str("blocks")
	w.arrayLen(16 * junk)
	event := append(w.bytes(), make([]byte, 16*junk)...)

	cases := []struct {
		name string
		in   []byte
		fn   func([]byte) error
	}{
		{"DecodeEngineBatch(events claim)", batch, func(b []byte) error { _, err := DecodeEngineBatch(b, ZMQConfig{}); return err }},
		{"DecodeMsgpack(blocks claim)", event, func(b []byte) error { _, err := DecodeMsgpack(b); return err }},
	}
	for _, c := range cases {
		var err error
		grew := allocated(func() { err = c.fn(c.in) })
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s on %d bytes: error = %v, want ErrMalformed", c.name, len(c.in), err)
		}
		if limit := 16 * uint64(len(c.in)); grew > limit {
			t.Errorf("%s on %d bytes allocated %d bytes, want ≤ %d", c.name, len(c.in), grew, limit)
		}
	}
}

// A number field that does not decode names itself in the error: the
// message carries encoding/json's field path, what was wanted and what came.
func TestDecodeJSON_NumberErrorsNameTheField(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"worker_id":-1,"event":{"event_id":1,"data":"cleared"}}`,
			"dynamo: json router event: worker_id: want unsigned 64-bit integer, got number -1"},
		{`{"worker_id":1,"event":{"event_id":1,"dp_rank":4294967296,"data":"cleared"}}`,
			"dynamo: json router event: event.dp_rank: want unsigned 32-bit integer, got number 4294967296"},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":1.5,"tokens_hash":1}]}}}}`,
			"dynamo: json router event: event: data: stored: blocks.block_hash: want 64-bit integer hash, got number 1.5"},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"parent_hash":"7","blocks":[]}}}}`,
			`dynamo: json router event: event: data: stored: parent_hash: want 64-bit integer hash, got string "7"`},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"removed":{"block_hashes":[1,null]}}}}`,
			"dynamo: json router event: event: data: removed: block_hashes: want 64-bit integer hash, got null"},
	}
	for _, c := range cases {
		_, err := DecodeJSON([]byte(c.in))
		if err == nil || err.Error() != c.want || !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeJSON(%s) error = %v, want %q (ErrMalformed)", c.in, err, c.want)
		}
	}
	_, err := DecodeEnvelope([]byte(`{"publisher_id":-1,"sequence":2,"published_at":3,"payload":[]}`))
	if want := "dynamo: event-plane envelope: publisher_id: want unsigned 64-bit integer, got number -1"; err == nil || err.Error() != want {
		t.Errorf("DecodeEnvelope(negative publisher_id) error = %v, want %q", err, want)
	}
}
