package dynamo

import (
	"encoding/binary"
	"errors"
	"math"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/goindex/goindex/goindex/kv"
)

// obj is an ordered msgpack map for test messages.
type obj []any // key, value, key, value, …

// pack encodes nil, bool, int, uint64, float64, string, []byte, []any and obj
// the way msgspec does (smallest forms); only for building test inputs.
func pack(v any) []byte {
	w := newMPWriter(nil)
	packTo(w, v)
	return w.bytes()
}

func packTo(w *mpWriter, v any) {
	switch x := v.(type) {
	case nil:
		w.null()
	case bool:
		_ = w.e.EncodeBool(x)
	case int:
		_ = w.e.EncodeInt(int64(x))
	case uint64:
		w.uint(x)
	case float64:
		_ = w.e.EncodeFloat64(x)
	case string:
		w.str(x)
	case []byte:
		w.bin(x)
	case []any:
		w.arrayLen(len(x))
		for _, e := range x {
			packTo(w, e)
		}
	case obj:
		w.mapLen(len(x) / 2)
		for _, e := range x {
			packTo(w, e)
		}
	default:
		panic("pack: unsupported test value")
	}
}

func tokensAny(lo, hi int) []any {
	out := []any{}
	for t := lo; t <= hi; t++ {
		out = append(out, t)
	}
	return out
}

func TestDecodeZMQ_VLLMGolden(t *testing.T) {
	frames := [][]byte{[]byte("kv@0"), {0, 0, 0, 0, 0, 0, 1, 2}, golden(t, "zmq_vllm.msgpack")}
	got, err := DecodeZMQ(frames, ZMQConfig{})
	if err != nil {
		t.Fatalf("DecodeZMQ(zmq_vllm): %v", err)
	}
	minus2 := int64(-2)
	want := EngineBatch{Topic: "kv@0", Sequence: 258, Timestamp: 1767225600.5, HasDpRank: true, DpRank: 3, Events: []EngineEvent{
		{Kind: kv.Stored, BlockHashes: []uint64{11, uint64(minus2)}, TokenIDs: span(0, 7), BlockSize: 4, Medium: "GPU"},
		{Kind: kv.Removed, BlockHashes: []uint64{11}, Medium: "CPU"},
		{Kind: kv.Cleared},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeZMQ(zmq_vllm) =\n%+v\nwant\n%+v", got, want)
	}
}

func TestDecodeZMQ_RejectsBadFrames(t *testing.T) {
	payload := golden(t, "zmq_vllm.msgpack")
	seq := []byte{0, 0, 0, 0, 0, 0, 0, 1}
	for _, frames := range [][][]byte{{seq, payload}, {nil, seq, payload, nil}, {}} {
		if _, err := DecodeZMQ(frames, ZMQConfig{}); !errors.Is(err, ErrFrameCount) {
			t.Errorf("DecodeZMQ(%d frames) error = %v, want ErrFrameCount", len(frames), err)
		}
	}
	if _, err := DecodeZMQ([][]byte{nil, seq[:7], payload}, ZMQConfig{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("DecodeZMQ(7-byte sequence) error = %v, want ErrMalformed", err)
	}
}

func TestDecodeEngineBatch_CURGoldenWithTails(t *testing.T) {
	got, err := DecodeEngineBatch(golden(t, "zmq_vllm_cur.msgpack"), ZMQConfig{})
	if err != nil {
		t.Fatalf("DecodeEngineBatch(zmq_vllm_cur): %v", err)
	}
	want := EngineBatch{Timestamp: 2, Events: []EngineEvent{
		{Kind: kv.Stored, BlockHashes: []uint64{21, 22}, HasParent: true, Parent: 20, TokenIDs: span(0, 7), BlockSize: 4,
			LoRAName: "adapter-a", BlockMM: []*MMExtraInfo{{Objects: []MMObject{{Hash: 0x0123456789abcdef}}}, nil},
			HasGroup: true, GroupIdx: 0, HasSpecKind: true, SpecKind: "full_attention"},
		{Kind: kv.Stored, BlockHashes: []uint64{31}, TokenIDs: span(0, 3), BlockSize: 4,
			HasGroup: true, GroupIdx: 1, HasSpecKind: true, SpecKind: "sliding_window", SlidingWindow: 128},
		{Kind: kv.Removed, BlockHashes: []uint64{21}, HasGroup: true, GroupIdx: 1},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeEngineBatch(zmq_vllm_cur) =\n%+v\nwant\n%+v", got, want)
	}
}

func TestDecodeEngineBatch_SGLangMapGoldenWithEaglePairs(t *testing.T) {
	got, err := DecodeEngineBatch(golden(t, "zmq_sglang_map.msgpack"), ZMQConfig{})
	if err != nil {
		t.Fatalf("DecodeEngineBatch(zmq_sglang_map): %v", err)
	}
	want := EngineBatch{Timestamp: 3, HasDpRank: true, DpRank: 2, Events: []EngineEvent{
		{Kind: kv.Stored, BlockHashes: []uint64{41, 42}, TokenIDs: span(0, 8), Eagle: true, BlockSize: 4, Medium: "GPU", CacheSalt: "tenant-a"},
		{Kind: kv.Removed, BlockHashes: []uint64{41}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeEngineBatch(zmq_sglang_map) =\n%+v\nwant\n%+v", got, want)
	}
}

func TestDecodeEngineBatch_ByteHashesRejectedUnlessFolded(t *testing.T) {
	b := golden(t, "zmq_bytes_hash.msgpack")
	if _, err := DecodeEngineBatch(b, ZMQConfig{}); !errors.Is(err, ErrByteHash) {
		t.Errorf("DecodeEngineBatch(bytes hash) error = %v, want ErrByteHash", err)
	}
	got, err := DecodeEngineBatch(b, ZMQConfig{FoldByteHashes: true})
	if err != nil {
		t.Fatalf("DecodeEngineBatch(bytes hash, fold): %v", err)
	}
	// The digest is bytes 0..31; its low 8 bytes big-endian are 24..31.
	if want := uint64(0x18191a1b1c1d1e1f); len(got.Events) != 1 || !slices.Equal(got.Events[0].BlockHashes, []uint64{want}) {
		t.Errorf("folded hashes = %+v, want [%#x]", got.Events, want)
	}
	short := pack([]any{1.0, []any{[]any{"BlockRemoved", []any{[]byte{1, 2}}}}})
	if got, err := DecodeEngineBatch(short, ZMQConfig{FoldByteHashes: true}); err != nil || got.Events[0].BlockHashes[0] != 0x0102 {
		t.Errorf("DecodeEngineBatch(2-byte hash, fold) = %+v, %v; want 0x0102", got, err)
	}
}

func TestDecodeEngineBatch_Shapes(t *testing.T) {
	toks := tokensAny(0, 3)
	cases := []struct {
		name  string
		batch []any
		want  EngineEvent
	}{
		{"older SGLang ends at lora_id", []any{"BlockStored", []any{1}, nil, toks, 4, nil},
			EngineEvent{Kind: kv.Stored, BlockHashes: []uint64{1}, TokenIDs: span(0, 3), BlockSize: 4}},
		{"parent as signed", []any{"BlockStored", []any{1}, -1, toks, 4},
			EngineEvent{Kind: kv.Stored, BlockHashes: []uint64{1}, HasParent: true, Parent: math.MaxUint64, TokenIDs: span(0, 3), BlockSize: 4}},
		{"SGLang cache_salt slot", []any{"BlockStored", []any{1}, nil, toks, 4, nil, nil, obj{"cache_salt", "t", "other", 1}},
			EngineEvent{Kind: kv.Stored, BlockHashes: []uint64{1}, TokenIDs: span(0, 3), BlockSize: 4, CacheSalt: "t"}},
		{"vLLM ≥ 0.19 extra_keys pairs, opaque identifier", []any{"BlockStored", []any{1}, nil, toks, 4, nil, nil, nil,
			[]any{[]any{[]any{"opaque-renderer-image-0", 2}, "lora-or-salt", 7}}},
			EngineEvent{Kind: kv.Stored, BlockHashes: []uint64{1}, TokenIDs: span(0, 3), BlockSize: 4,
				BlockMM: []*MMExtraInfo{{Objects: []MMObject{{Hash: 14437604544409538977}}}}}},
		{"extra_keys pairs whose offset is not an integer", []any{"BlockStored", []any{1}, nil, toks, 4, nil, nil, nil,
			[]any{[]any{[]any{"opaque-renderer-image-0", 2.5}, []any{"opaque-renderer-image-1", "2"}}}},
			EngineEvent{Kind: kv.Stored, BlockHashes: []uint64{1}, TokenIDs: span(0, 3), BlockSize: 4}},
		{"extra_keys pairs with a negative offset", []any{"BlockStored", []any{1}, nil, toks, 4, nil, nil, nil,
			[]any{[]any{[]any{"opaque-renderer-image-0", -3}}}},
			EngineEvent{Kind: kv.Stored, BlockHashes: []uint64{1}, TokenIDs: span(0, 3), BlockSize: 4,
				BlockMM: []*MMExtraInfo{{Objects: []MMObject{{Hash: 14437604544409538977}}}}}},
		{"extra_keys without identifiers", []any{"BlockStored", []any{1}, nil, toks, 4, nil, nil, nil, []any{[]any{"salt"}}},
			EngineEvent{Kind: kv.Stored, BlockHashes: []uint64{1}, TokenIDs: span(0, 3), BlockSize: 4}},
		{"block_mm_infos tail wins over extra_keys", []any{"BlockStored", []any{1}, nil, toks, 4, nil, nil, nil,
			[]any{[]any{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}},
			[]any{obj{"mm_objects", []any{obj{"mm_hash", 5, "offsets", []any{[]any{1, 3}}}}}}},
			EngineEvent{Kind: kv.Stored, BlockHashes: []uint64{1}, TokenIDs: span(0, 3), BlockSize: 4,
				BlockMM: []*MMExtraInfo{{Objects: []MMObject{{Hash: 5, Offsets: [][2]uint64{{1, 3}}}}}}}},
		{"removed tail with locality by value", []any{"BlockRemoved", []any{1}, nil, 0, "REMOTE", "owned"},
			EngineEvent{Kind: kv.Removed, BlockHashes: []uint64{1}, HasGroup: true, HasLocality: true, Locality: "REMOTE",
				HasSpecKind: true, SpecKind: "owned"}},
		{"cleared with trailing fields", []any{"AllBlocksCleared", nil, 3}, EngineEvent{Kind: kv.Cleared}},
	}
	for _, c := range cases {
		got, err := DecodeEngineBatch(pack([]any{0.5, []any{c.batch}, nil, "extra"}), ZMQConfig{})
		if err != nil {
			t.Errorf("%s: DecodeEngineBatch: %v", c.name, err)
			continue
		}
		if got.HasDpRank || len(got.Events) != 1 || !reflect.DeepEqual(got.Events[0], c.want) {
			t.Errorf("%s: DecodeEngineBatch = %+v, want one event %+v and no dp rank", c.name, got, c.want)
		}
	}
	m := obj{"type", "BlockStored", "block_hashes", []any{uint64(math.MaxUint64)}, "token_ids", toks, "block_size", 4,
		"group_idx", 2, "kv_cache_spec_kind", "mla_attention", "locality", "LOCAL", "medium", nil, "unknown", obj{"a", 1}}
	got, err := DecodeEngineBatch(pack(obj{"events", []any{m}, "ts", 1, "data_parallel_rank", 5}), ZMQConfig{})
	want := EngineEvent{Kind: kv.Stored, BlockHashes: []uint64{math.MaxUint64}, TokenIDs: span(0, 3), BlockSize: 4,
		HasGroup: true, GroupIdx: 2, HasSpecKind: true, SpecKind: "mla_attention", HasLocality: true, Locality: "LOCAL"}
	if err != nil || got.DpRank != 5 || !got.HasDpRank || len(got.Events) != 1 || !reflect.DeepEqual(got.Events[0], want) {
		t.Errorf("DecodeEngineBatch(map batch, map event) = %+v, %v; want dp 5 and %+v", got, err, want)
	}
}

func TestDecodeEngineBatch_RejectsBadEvents(t *testing.T) {
	toks := tokensAny(0, 3)
	cases := []struct {
		name string
		in   []byte
	}{
		{"one-element batch", pack([]any{1.0})},
		{"ts not a number", pack([]any{"now", []any{}})},
		{"map batch missing ts", pack(obj{"events", []any{}})},
		{"negative dp rank", pack([]any{1.0, []any{}, -1})},
		{"empty event", pack([]any{1.0, []any{[]any{}}})},
		{"unknown tag", pack([]any{1.0, []any{[]any{"BlockMoved"}}})},
		{"missing block_size", pack([]any{1.0, []any{[]any{"BlockStored", []any{1}, nil, toks}}})},
		{"hash as string", pack([]any{1.0, []any{[]any{"BlockRemoved", []any{"1"}}}})},
		{"token above u32", pack([]any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{uint64(1 << 32)}, 1}}})},
		{"mixed token pairs", pack([]any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{[]any{1, 2}, 3}, 1}}})},
		{"token triple", pack([]any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{[]any{1, 2, 3}}, 1}}})},
		{"map event without type", pack([]any{1.0, []any{obj{"block_hashes", []any{1}}}})},
		{"map stored without token_ids", pack([]any{1.0, []any{obj{"type", "BlockStored", "block_hashes", []any{1}, "block_size", 1}}})},
		{"trailing bytes", append(pack([]any{1.0, []any{}}), 0xc0)},
	}
	for _, c := range cases {
		if _, err := DecodeEngineBatch(c.in, ZMQConfig{}); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: DecodeEngineBatch(%x) error = %v, want ErrMalformed", c.name, c.in, err)
		}
	}
}

func mustNormalizer(t testing.TB, cfg NormalizerConfig) *Normalizer {
	t.Helper()
	n, err := NewNormalizer(cfg)
	if err != nil {
		t.Fatalf("NewNormalizer(%+v): %v", cfg, err)
	}
	return n
}

func TestNormalizer_VLLMGolden(t *testing.T) {
	b, err := DecodeEngineBatch(golden(t, "zmq_vllm.msgpack"), ZMQConfig{})
	if err != nil {
		t.Fatal(err)
	}
	n := mustNormalizer(t, NormalizerConfig{WorkerID: 9, DpRank: 0, BlockSize: 4})
	got := n.Append(nil, &b)
	h := mustHasher(t, HasherConfig{BlockSize: 4})
	minus2 := int64(-2)
	want := []RouterEvent{
		{WorkerID: 9, Residency: ResidencyWorker, Event: CacheEvent{EventID: 0, Kind: kv.Stored, DpRank: 3, Stored: StoreData{Blocks: []StoredBlock{
			{BlockHash: 11, TokensHash: h.HashBlock(span(0, 3), nil)},
			{BlockHash: uint64(minus2), TokensHash: h.HashBlock(span(4, 7), nil)},
		}}}},
		{WorkerID: 9, StorageTier: TierHostPinned, Residency: ResidencyWorker, Event: CacheEvent{EventID: 1, Kind: kv.Removed, DpRank: 3, Removed: []uint64{11}}},
		{WorkerID: 9, Residency: ResidencyWorker, Event: CacheEvent{EventID: 2, Kind: kv.Cleared, DpRank: 3}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Normalizer.Append(zmq_vllm) =\n%+v\nwant\n%+v", got, want)
	}
	if got[0].Event.Stored.Blocks[0].TokensHash != 9143094415614847814 {
		t.Errorf("tokens_hash of 0..3 = %d, want V3 9143094415614847814", got[0].Event.Stored.Blocks[0].TokensHash)
	}
	if s := n.Stats(); s.Events != 3 || s.Published != 3 {
		t.Errorf("Stats() = %+v, want 3 events, 3 published", s)
	}
}

func TestNormalizer_CURGoldenFiltersGroupsAndHashesWithLoRAAndMM(t *testing.T) {
	b, err := DecodeEngineBatch(golden(t, "zmq_vllm_cur.msgpack"), ZMQConfig{})
	if err != nil {
		t.Fatal(err)
	}
	n := mustNormalizer(t, NormalizerConfig{WorkerID: 1, DpRank: 4, BlockSize: 4})
	got := n.Append(nil, &b)
	lora := mustHasher(t, HasherConfig{BlockSize: 4, LoRA: "adapter-a"})
	want := []RouterEvent{{WorkerID: 1, Residency: ResidencyWorker, Event: CacheEvent{EventID: 0, Kind: kv.Stored, DpRank: 4, Stored: StoreData{
		HasParent: true, Parent: 20, Blocks: []StoredBlock{
			{BlockHash: 21, TokensHash: lora.HashBlock(span(0, 3), []uint64{0x0123456789abcdef}), MM: b.Events[0].BlockMM[0]},
			{BlockHash: 22, TokensHash: lora.HashBlock(span(4, 7), nil)},
		}}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Normalizer.Append(zmq_vllm_cur) =\n%+v\nwant\n%+v", got, want)
	}
	if s := n.Stats(); s.FilteredGroup != 2 || s.Published != 1 {
		t.Errorf("Stats() = %+v, want 2 filtered by group (sliding window store, group-1 removal), 1 published", s)
	}
}

func TestNormalizer_GroupFilterLearnsKindsPerRankAndGroup(t *testing.T) {
	stored := func(group uint32, kind string) EngineEvent {
		return EngineEvent{Kind: kv.Stored, BlockHashes: []uint64{uint64(group) + 100}, TokenIDs: span(0, 3), BlockSize: 4,
			HasGroup: true, GroupIdx: group, HasSpecKind: kind != "", SpecKind: kind}
	}
	removed := func(group uint32) EngineEvent {
		return EngineEvent{Kind: kv.Removed, BlockHashes: []uint64{1}, HasGroup: true, GroupIdx: group}
	}
	batch := EngineBatch{Events: []EngineEvent{
		stored(1, "full_attention"), // kept, teaches (0,1) = main
		stored(2, "mamba"),          // dropped, teaches (0,2) = not main
		stored(3, "brand_new_kind"), // unknown kinds are dropped
		removed(1),                  // learned main: kept (zero-only: dropped)
		removed(2),                  // learned not main: dropped
		removed(0),                  // never learned, group 0: kept
		removed(5),                  // never learned, not group 0: dropped
		{Kind: kv.Removed, BlockHashes: []uint64{1}}, // no group info: kept
	}}
	for _, c := range []struct {
		filter GroupFilter
		kept   []int // indices of kept events
	}{
		{GroupFilterLearned, []int{0, 3, 5, 7}},
		{GroupFilterZeroOnly, []int{0, 5, 7}},
	} {
		n := mustNormalizer(t, NormalizerConfig{BlockSize: 4, GroupFilter: c.filter})
		got := n.Append(nil, &batch)
		if len(got) != len(c.kept) {
			t.Errorf("filter %d: kept %d events, want %d (%v)", c.filter, len(got), len(c.kept), c.kept)
			continue
		}
		for i, k := range c.kept {
			if got[i].Event.EventID != uint64(i) || got[i].Event.Kind != batch.Events[k].Kind {
				t.Errorf("filter %d: event %d = id %d kind %v, want id %d kind %v (input %d)", c.filter, i,
					got[i].Event.EventID, got[i].Event.Kind, i, batch.Events[k].Kind, k)
			}
		}
		// Another dp rank has learned nothing: group 1 falls back to "group 0 only".
		other := EngineBatch{HasDpRank: true, DpRank: 1, Events: []EngineEvent{removed(1)}}
		if got := n.Append(nil, &other); len(got) != 0 {
			t.Errorf("filter %d: group-1 removal on an untaught rank kept: %+v", c.filter, got)
		}
	}
}

func TestNormalizer_LocalityEventIDsAndMedia(t *testing.T) {
	rem := func(loc string, has bool, medium string) EngineEvent {
		return EngineEvent{Kind: kv.Removed, BlockHashes: []uint64{7}, HasLocality: has, Locality: loc, Medium: medium}
	}
	n := mustNormalizer(t, NormalizerConfig{WorkerID: 3, BlockSize: 4})
	first := n.Append(nil, &EngineBatch{Events: []EngineEvent{rem("REMOTE", true, ""), rem("LOCAL", true, "DISK"), rem("SOMEWHERE", true, ""), rem("", false, "tape")}})
	second := n.Append(nil, &EngineBatch{Events: []EngineEvent{rem("", false, "cpu_pinned"), {Kind: kv.Cleared, HasLocality: true, Locality: "REMOTE"}}})
	got := append(first, second...)
	want := []struct {
		id   uint64
		tier StorageTier
	}{{0, TierDisk}, {1, TierDevice}, {2, TierHostPinned}, {3, TierDevice}}
	if len(got) != len(want) {
		t.Fatalf("kept %d events, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Event.EventID != w.id || got[i].StorageTier != w.tier {
			t.Errorf("event %d = id %d tier %v, want id %d tier %v", i, got[i].Event.EventID, got[i].StorageTier, w.id, w.tier)
		}
	}
	if s := n.Stats(); s.FilteredRemote != 2 || s.UnknownMedia != 1 || s.Events != 6 || s.Published != 4 {
		t.Errorf("Stats() = %+v, want 2 remote-filtered, 1 unknown medium, 6 events, 4 published", s)
	}
}

func TestMediumTier_Table(t *testing.T) {
	cases := map[string]StorageTier{
		"": TierDevice, "GPU": TierDevice, "device": TierDevice,
		"CPU": TierHostPinned, "CPU_PINNED": TierHostPinned, "CPU_TIER1": TierHostPinned,
		"CPU_TIER2": TierDisk, "DISK": TierDisk, "NVME": TierDisk, "STORAGE": TierDisk,
		"EXTERNAL": TierExternal, "NETWORK": TierExternal, "REMOTE": TierExternal, "SHARED": TierExternal,
	}
	for medium, want := range cases {
		if got, known := MediumTier(medium); got != want || !known {
			t.Errorf("MediumTier(%q) = %v, %v; want %v, true", medium, got, known, want)
		}
	}
	if got, known := MediumTier("TAPE"); got != TierDevice || known {
		t.Errorf("MediumTier(TAPE) = %v, %v; want device, false", got, known)
	}
}

func TestNormalizer_DuplicateHashesBecomeEmptyRemoved(t *testing.T) {
	n := mustNormalizer(t, NormalizerConfig{BlockSize: 4})
	batch := EngineBatch{Events: []EngineEvent{
		{Kind: kv.Stored, BlockHashes: []uint64{1, 2, 1}, TokenIDs: span(0, 11), BlockSize: 4, Medium: "CPU"},
		{Kind: kv.Stored, BlockHashes: []uint64{5}, HasParent: true, Parent: 5, TokenIDs: span(0, 3), BlockSize: 4},
	}}
	got := n.Append(nil, &batch)
	for i, ev := range got {
		if ev.Event.Kind != kv.Removed || ev.Event.Removed == nil || len(ev.Event.Removed) != 0 || ev.Event.EventID != uint64(i) {
			t.Errorf("event %d = %+v, want an empty (non-nil) Removed with id %d", i, ev, i)
		}
	}
	if len(got) != 2 || got[0].StorageTier != TierHostPinned {
		t.Errorf("Append(duplicate stores) = %+v, want 2 events, the first on host_pinned", got)
	}
	if s := n.Stats(); s.DuplicateStores != 2 {
		t.Errorf("Stats().DuplicateStores = %d, want 2", s.DuplicateStores)
	}
}

func TestNormalizer_StopsAtBlockSizeMismatchOrMissingTokens(t *testing.T) {
	n := mustNormalizer(t, NormalizerConfig{BlockSize: 4})
	batch := EngineBatch{Events: []EngineEvent{
		{Kind: kv.Stored, BlockHashes: []uint64{1, 2}, TokenIDs: span(0, 15), BlockSize: 8},   // wrong block size
		{Kind: kv.Stored, BlockHashes: []uint64{1, 2, 3}, TokenIDs: span(0, 9), BlockSize: 4}, // tokens for 2 blocks
	}}
	got := n.Append(nil, &batch)
	if len(got) != 2 || len(got[0].Event.Stored.Blocks) != 0 || got[0].Event.Stored.Blocks == nil {
		t.Fatalf("Append(block size 8) = %+v, want a stored event with no blocks", got)
	}
	if b := got[1].Event.Stored.Blocks; len(b) != 2 || b[0].BlockHash != 1 || b[1].BlockHash != 2 {
		t.Errorf("Append(3 hashes, 10 tokens) blocks = %+v, want the first 2", b)
	}
	if s := n.Stats(); s.TruncatedStores != 2 {
		t.Errorf("Stats().TruncatedStores = %d, want 2", s.TruncatedStores)
	}
}

func TestNormalizer_EagleSaltAndPadScheme(t *testing.T) {
	b, err := DecodeEngineBatch(golden(t, "zmq_sglang_map.msgpack"), ZMQConfig{})
	if err != nil {
		t.Fatal(err)
	}
	got := mustNormalizer(t, NormalizerConfig{BlockSize: 4}).Append(nil, &b)
	want := mustHasher(t, HasherConfig{BlockSize: 4, Namespace: "tenant-a", Eagle: true}).AppendLocal(nil, span(0, 8))
	if len(got) != 2 || len(got[0].Event.Stored.Blocks) != 2 ||
		got[0].Event.Stored.Blocks[0].TokensHash != want[0] || got[0].Event.Stored.Blocks[1].TokensHash != want[1] || got[0].Event.DpRank != 2 {
		t.Errorf("Append(sglang EAGLE, cache_salt) = %+v, want tokens hashes %v on rank 2", got, want)
	}
	// Without a salt, the EAGLE windows give V23.
	plain := EngineBatch{Events: []EngineEvent{{Kind: kv.Stored, BlockHashes: []uint64{1, 2}, TokenIDs: span(0, 8), Eagle: true, BlockSize: 4}}}
	ev := mustNormalizer(t, NormalizerConfig{BlockSize: 4}).Append(nil, &plain)[0]
	if b := ev.Event.Stored.Blocks; b[0].TokensHash != 14562210786876287112 || b[1].TokensHash != 15916330181359808192 {
		t.Errorf("EAGLE tokens hashes = %d, %d; want V23", b[0].TokensHash, b[1].TokensHash)
	}
	// Pad-value scheme (V22).
	const image = 151655
	mm := []*MMExtraInfo{{Objects: []MMObject{{Hash: 9533257059414191570}}}}
	pad := EngineBatch{Events: []EngineEvent{{Kind: kv.Stored, BlockHashes: []uint64{1}, TokenIDs: []uint32{10, 20, image, image}, BlockSize: 4, BlockMM: mm}}}
	ev = mustNormalizer(t, NormalizerConfig{BlockSize: 4, PadImageTokens: true, ImageTokenID: image}).Append(nil, &pad)[0]
	if got := ev.Event.Stored.Blocks[0]; got.TokensHash != 71881790567603244 || got.MM != mm[0] {
		t.Errorf("pad-scheme block = %+v, want tokens hash 71881790567603244 (V22) with its mm info", got)
	}
}

func TestNormalizer_TokensHashMatchesHasherOnRandomStores(t *testing.T) {
	rng := testRand(t, 5)
	for range 300 {
		bs := 1 + rng.IntN(6)
		ev := EngineEvent{Kind: kv.Stored, BlockSize: uint64(bs), Eagle: rng.IntN(3) == 0}
		for range rng.IntN(6) {
			ev.BlockHashes = append(ev.BlockHashes, rng.Uint64())
		}
		for range rng.IntN(30) {
			ev.TokenIDs = append(ev.TokenIDs, uint32(rng.IntN(5)))
		}
		if rng.IntN(2) == 0 {
			ev.LoRAName = "lora"
		}
		var blockMM [][]uint64
		for i := range rng.IntN(6) {
			ev.BlockMM = append(ev.BlockMM, nil)
			blockMM = append(blockMM, nil)
			if rng.IntN(2) == 0 {
				ev.BlockMM[i] = &MMExtraInfo{Objects: []MMObject{{Hash: rng.Uint64()}, {Hash: rng.Uint64()}}}
				blockMM[i] = ev.BlockMM[i].AppendHashes(nil)
			}
		}
		pad := rng.IntN(2) == 0
		n := mustNormalizer(t, NormalizerConfig{BlockSize: bs, PadImageTokens: pad, ImageTokenID: 4})
		got := n.Append(nil, &EngineBatch{Events: []EngineEvent{ev}})[0].Event.Stored.Blocks
		h := mustHasher(t, HasherConfig{BlockSize: bs, LoRA: ev.LoRAName, Eagle: ev.Eagle, PadImageTokens: pad, ImageTokenID: 4})
		want := h.AppendLocalMM(nil, ev.TokenIDs, blockMM)
		if len(want) > len(ev.BlockHashes) {
			want = want[:len(ev.BlockHashes)]
		}
		if len(got) != len(want) {
			t.Fatalf("Append(%+v) kept %d blocks, want %d", ev, len(got), len(want))
		}
		for i := range got {
			if got[i].TokensHash != want[i] || got[i].BlockHash != ev.BlockHashes[i] {
				t.Fatalf("Append(%+v) block %d = %+v, want tokens hash %d", ev, i, got[i], want[i])
			}
		}
	}
}

func TestNewNormalizer_RejectsBadConfig(t *testing.T) {
	for _, cfg := range []NormalizerConfig{{BlockSize: 0}, {BlockSize: MaxBlockSize + 1}, {BlockSize: 4, GroupFilter: 9}} {
		if _, err := NewNormalizer(cfg); err == nil {
			t.Errorf("NewNormalizer(%+v) = nil error, want error", cfg)
		}
	}
}

// The trailing fields after extra_keys (stored) or medium (removed) come in
// Dynamo's fixed layout [group_idx, kv_cache_spec_kind,
// kv_cache_spec_sliding_window, locality, ownership] when at least four are
// present and their types fit, else by type (legacy). The locality slot is
// [unverified]: it is read both at its fixed slot and, in legacy tails, by
// value.
func TestDecodeEngineBatch_TrailingFieldsFixedAndLegacyLayouts(t *testing.T) {
	toks := tokensAny(0, 3)
	stored := func(tail ...any) []any {
		return append([]any{"BlockStored", []any{1}, nil, toks, 4, nil, "GPU", nil, nil}, tail...)
	}
	base := EngineEvent{Kind: kv.Stored, BlockHashes: []uint64{1}, TokenIDs: span(0, 3), BlockSize: 4, Medium: "GPU"}
	with := func(f func(*EngineEvent)) EngineEvent {
		e := base
		f(&e)
		return e
	}
	mm := []any{obj{"mm_objects", []any{obj{"mm_hash", 5, "offsets", []any{}}}}}
	cases := []struct {
		name  string
		event []any
		want  EngineEvent
		stats NormalizerStats // after normalizing the one event with BlockSize 4
	}{
		{"fixed: no kind, locality and ownership set", stored(0, nil, nil, "LOCAL", "engine"),
			with(func(e *EngineEvent) { e.HasGroup, e.HasLocality, e.Locality = true, true, "LOCAL" }),
			NormalizerStats{Events: 1, Published: 1}},
		{"fixed: sliding window without group_idx", stored(nil, "sliding_window", 128, nil),
			with(func(e *EngineEvent) { e.HasSpecKind, e.SpecKind, e.SlidingWindow = true, "sliding_window", 128 }),
			NormalizerStats{Events: 1, FilteredGroup: 1}},
		{"fixed: a future sixth field is skipped", stored(0, "full_attention", nil, "LOCAL", nil, obj{"x", 1}),
			with(func(e *EngineEvent) {
				e.HasGroup, e.HasSpecKind, e.SpecKind, e.HasLocality, e.Locality = true, true, "full_attention", true, "LOCAL"
			}),
			NormalizerStats{Events: 1, Published: 1}},
		{"fixed: unknown locality is not local", []any{"BlockRemoved", []any{1}, nil, 0, nil, nil, "UNKNOWN"},
			EngineEvent{Kind: kv.Removed, BlockHashes: []uint64{1}, HasGroup: true, HasLocality: true, Locality: "UNKNOWN"},
			NormalizerStats{Events: 1, FilteredRemote: 1}},
		{"legacy: block_mm_infos among four", stored(mm, 0, "full_attention", 16),
			with(func(e *EngineEvent) {
				e.BlockMM = []*MMExtraInfo{{Objects: []MMObject{{Hash: 5, Offsets: [][2]uint64{}}}}}
				e.HasGroup, e.HasSpecKind, e.SpecKind, e.SlidingWindow = true, true, "full_attention", 16
			}),
			NormalizerStats{Events: 1, Published: 1}},
		{"legacy: types out of the fixed order", stored(0, "full_attention", "LOCAL", 7),
			with(func(e *EngineEvent) {
				e.HasGroup, e.HasSpecKind, e.SpecKind, e.SlidingWindow = true, true, "full_attention", 7
				e.HasLocality, e.Locality = true, "LOCAL"
			}),
			NormalizerStats{Events: 1, Published: 1}},
		{"legacy: three elements, locality by value", stored(0, "REMOTE", "full_attention"),
			with(func(e *EngineEvent) {
				e.HasGroup, e.HasSpecKind, e.SpecKind, e.HasLocality, e.Locality = true, true, "full_attention", true, "REMOTE"
			}),
			NormalizerStats{Events: 1, FilteredRemote: 1}},
	}
	for _, c := range cases {
		got, err := DecodeEngineBatch(pack([]any{1.0, []any{c.event}}), ZMQConfig{})
		if err != nil {
			t.Errorf("%s: DecodeEngineBatch(%v): %v", c.name, c.event, err)
			continue
		}
		if len(got.Events) != 1 || !reflect.DeepEqual(got.Events[0], c.want) {
			t.Errorf("%s: DecodeEngineBatch(%v) = %+v, want one event %+v", c.name, c.event, got.Events, c.want)
			continue
		}
		n := mustNormalizer(t, NormalizerConfig{WorkerID: 1, BlockSize: 4})
		n.Append(nil, &got)
		if st := n.Stats(); st != c.stats {
			t.Errorf("%s: Normalizer stats = %+v, want %+v", c.name, st, c.stats)
		}
	}
}

// Current Dynamo accepts events tagged "Ignored" (positional or map) and
// drops them without an event id; before, one such event failed its batch.
func TestDecodeEngineBatch_IgnoredEventsAreDroppedNotFatal(t *testing.T) {
	in := pack([]any{1.0, []any{
		[]any{"BlockRemoved", []any{7}},
		[]any{"Ignored"},
		obj{"type", "Ignored", "block_hashes", []any{8}, "future", true},
		[]any{"Ignored", nil, 3},
		[]any{"AllBlocksCleared"},
	}, 2})
	got, err := DecodeEngineBatch(in, ZMQConfig{})
	want := []EngineEvent{{Kind: kv.Removed, BlockHashes: []uint64{7}}, {Kind: kv.Cleared}}
	if err != nil || got.Ignored != 3 || !reflect.DeepEqual(got.Events, want) {
		t.Fatalf("DecodeEngineBatch(removed, 3 ignored, cleared) = %+v, %v; want events %+v and Ignored 3", got, err, want)
	}
	n := mustNormalizer(t, NormalizerConfig{WorkerID: 1, BlockSize: 4})
	out := n.Append(nil, &got)
	if len(out) != 2 || out[0].Event.EventID != 0 || out[1].Event.EventID != 1 || out[1].Event.Kind != kv.Cleared {
		t.Errorf("Normalizer.Append = %+v, want removed id 0 then cleared id 1", out)
	}
	bad := pack([]any{1.0, []any{obj{"type", "Ignored", "block_hashes", "not a list"}}})
	if _, err := DecodeEngineBatch(bad, ZMQConfig{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("DecodeEngineBatch(Ignored map with a mistyped known field) error = %v, want ErrMalformed", err)
	}
}

// pyPack returns Debian's python3-msgpack encoding of the JSON value src,
// objects in their key order, so the decoders meet bytes they did not
// encode.
func pyPack(t *testing.T, src string) []byte {
	t.Helper()
	const script = "import json, sys, msgpack; sys.stdout.buffer.write(msgpack.packb(json.loads(sys.argv[1]), use_bin_type=True))"
	out, err := exec.Command(debianPython, "-c", script, src).Output()
	if err != nil {
		t.Fatalf("python3-msgpack(%s): %v", src, err)
	}
	return out
}

// tokensHashes hashes tokens by hand, block by block, as Dynamo's
// compute_salt_hash and compute_block_hash_for_seq do: XXH3-64 of the LE u32
// tokens with seed 1337 + XXH3(lora, seed 0) + XXH3(namespace, seed 1).
func tokensHashes(tokens []uint32, blockSize int, lora, namespace string) []uint64 {
	seed := uint64(1337)
	if lora != "" {
		seed += xxh3.HashString(lora)
	}
	if namespace != "" {
		seed += xxh3.HashStringSeed(namespace, 1)
	}
	var out []uint64
	for start := 0; start+blockSize <= len(tokens); start += blockSize {
		b := make([]byte, 0, 4*blockSize)
		for _, tok := range tokens[start : start+blockSize] {
			b = binary.LittleEndian.AppendUint32(b, tok)
		}
		out = append(out, xxh3.HashSeed(b, seed))
	}
	return out
}

// Dynamo's vLLM handler passes a request's cache salt to vLLM tagged
// "dynamo-cache-salt:", and vLLM puts it in the first block's extra_keys;
// Dynamo salts tokens_hash with the text after the tag when the event has
// no cache_salt (lib/kv-router/src/zmq_wire/extra_keys.rs
// extra_keys_to_cache_namespace, deserialize.rs).
func TestNormalizer_CacheSaltTaggedInVLLMExtraKeysSaltsTokensHash(t *testing.T) {
	const toks = "[0, 1, 2, 3, 4, 5, 6, 7]"
	forms := map[string]string{
		"positional": `[0.5, [["BlockStored", [11, 12], null, ` + toks + `, 4, null, "GPU", "adapter-a",
			[["adapter-a", "dynamo-cache-salt:abc"], null]]], 0]`,
		"map, lora_name after extra_keys": `[0.5, [{"type": "BlockStored", "block_hashes": [11, 12], "token_ids": ` + toks + `,
			"block_size": 4, "extra_keys": [["adapter-a", "dynamo-cache-salt:abc"], null], "lora_name": "adapter-a"}], 0]`,
	}
	salted := tokensHashes(span(0, 7), 4, "adapter-a", "abc")
	unsalted := tokensHashes(span(0, 7), 4, "adapter-a", "")
	explicit := EngineBatch{Events: []EngineEvent{{Kind: kv.Stored, BlockHashes: []uint64{11, 12}, TokenIDs: span(0, 7),
		BlockSize: 4, LoRAName: "adapter-a", CacheSalt: "abc"}}}
	viaSalt := mustNormalizer(t, NormalizerConfig{BlockSize: 4}).Append(nil, &explicit)[0].Event.Stored.Blocks
	for name, src := range forms {
		b, err := DecodeEngineBatch(pyPack(t, src), ZMQConfig{})
		if err != nil {
			t.Errorf("%s: DecodeEngineBatch: %v", name, err)
			continue
		}
		if ev := b.Events[0]; ev.CacheSalt != "abc" || ev.LoRAName != "adapter-a" || ev.BlockMM != nil {
			t.Errorf("%s: DecodeEngineBatch event = %+v, want CacheSalt abc, LoRAName adapter-a, no BlockMM", name, ev)
		}
		got := mustNormalizer(t, NormalizerConfig{BlockSize: 4}).Append(nil, &b)[0].Event.Stored.Blocks
		if len(got) != 2 {
			t.Errorf("%s: Normalizer.Append blocks = %+v, want 2", name, got)
			continue
		}
		for i, blk := range got {
			if blk.TokensHash != salted[i] || blk.TokensHash != viaSalt[i].TokensHash || blk.TokensHash == unsalted[i] {
				t.Errorf("%s: block %d tokens_hash = %d, want %d (salted with abc, as CacheSalt abc gives %d), not unsalted %d",
					name, i, blk.TokensHash, salted[i], viaSalt[i].TokensHash, unsalted[i])
			}
		}
	}
}

// TestDecodeEngineBatch_CacheSaltFromExtraKeysFollowsDynamo pins the edges
// of extra_keys_to_cache_namespace and of its use in the map form.
func TestDecodeEngineBatch_CacheSaltFromExtraKeysFollowsDynamo(t *testing.T) {
	const head = `"type": "BlockStored", "block_hashes": [1], "token_ids": [0, 1, 2, 3], "block_size": 4`
	cases := []struct {
		name, event, want string
	}{
		{"top-level cache_salt wins", `{` + head + `, "extra_keys": [["dynamo-cache-salt:abc"]], "cache_salt": "top"}`, "top"},
		{"an empty cache_salt wins too", `{` + head + `, "cache_salt": "", "extra_keys": [["dynamo-cache-salt:abc"]]}`, ""},
		{"a nil cache_salt does not", `{` + head + `, "cache_salt": null, "extra_keys": [["dynamo-cache-salt:abc"]]}`, "abc"},
		{"untagged strings are not salts", `{` + head + `, "extra_keys": [["tenant-a"]]}`, ""},
		{"only the first block counts", `{` + head + `, "extra_keys": [null, ["dynamo-cache-salt:abc"]]}`, ""},
		{"an empty tag is passed over", `{` + head + `, "extra_keys": [["dynamo-cache-salt:", "dynamo-cache-salt:b"]]}`, "b"},
		{"the first tag wins", `{` + head + `, "extra_keys": [["dynamo-cache-salt:a", "dynamo-cache-salt:b"]]}`, "a"},
		{"a salt equal to the LoRA name", `{` + head + `, "extra_keys": [["adapter-a", "dynamo-cache-salt:adapter-a"]], "lora_name": "adapter-a"}`, "adapter-a"},
		{"a tagged LoRA name is the LoRA", `{` + head + `, "extra_keys": [["dynamo-cache-salt:x", "dynamo-cache-salt:y"]], "lora_name": "dynamo-cache-salt:x"}`, "y"},
		{"only the first LoRA item is passed over", `{` + head + `, "lora_name": "dynamo-cache-salt:x", "extra_keys": [["dynamo-cache-salt:x", "dynamo-cache-salt:x"]]}`, "x"},
		{"block_mm_infos does not stop it", `{` + head + `, "block_mm_infos": [null], "extra_keys": [["dynamo-cache-salt:abc"]]}`, "abc"},
		{"positional, after a tagged pair", `["BlockStored", [1], null, [0, 1, 2, 3], 4, null, null, null, [[["img", 0], "dynamo-cache-salt:abc"]]]`, "abc"},
	}
	events := make([]string, len(cases))
	for i, c := range cases {
		events[i] = c.event
	}
	b, err := DecodeEngineBatch(pyPack(t, `[0.5, [`+strings.Join(events, ", ")+`]]`), ZMQConfig{})
	if err != nil || len(b.Events) != len(cases) {
		t.Fatalf("DecodeEngineBatch(%d cases) = %+v, %v; want one event each", len(cases), b, err)
	}
	for i, c := range cases {
		if got := b.Events[i].CacheSalt; got != c.want {
			t.Errorf("%s: DecodeEngineBatch(%s) CacheSalt = %q, want %q", c.name, c.event, got, c.want)
		}
	}
	// Prompt-embedding bytes (not expressible in JSON) are not a salt.
	in := pack([]any{0.5, []any{[]any{"BlockStored", []any{1}, nil, tokensAny(0, 3), 4, nil, nil, nil,
		[]any{[]any{[]byte("dynamo-cache-salt:abc")}}}}})
	if b, err := DecodeEngineBatch(in, ZMQConfig{}); err != nil || b.Events[0].CacheSalt != "" {
		t.Errorf("DecodeEngineBatch(extra_keys [[bytes]]) = %+v, %v; want no CacheSalt", b, err)
	}
}

// A LoRA name that is 64 hex digits is the LoRA, not a multimodal digest
// (lib/kv-router/src/zmq_wire/extra_keys.rs,
// canonical_hex_lora_name_is_not_multimodal_metadata).
func TestDecodeEngineBatch_HexLoRANameInExtraKeysIsNotMultimodal(t *testing.T) {
	lora := strings.Repeat("a", 64)
	digest := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	keys := `[["` + lora + `", ["opaque-image", 1], "` + digest + `"], ["` + lora + `"]]`
	forms := map[string]string{
		"positional": `["BlockStored", [1, 2], null, [0, 1, 2, 3, 4, 5, 6, 7], 4, null, null, "` + lora + `", ` + keys + `]`,
		"map, lora_name after extra_keys": `{"type": "BlockStored", "block_hashes": [1, 2], "token_ids": [0, 1, 2, 3, 4, 5, 6, 7],
			"block_size": 4, "extra_keys": ` + keys + `, "lora_name": "` + lora + `"}`,
	}
	opaque, _ := MMIdentifierHash("opaque-image")
	want := []*MMExtraInfo{{Objects: []MMObject{{Hash: opaque}, {Hash: 0x0123456789abcdef}}}, nil}
	for name, src := range forms {
		b, err := DecodeEngineBatch(pyPack(t, `[0.5, [`+src+`]]`), ZMQConfig{})
		if err != nil || len(b.Events) != 1 {
			t.Errorf("%s: DecodeEngineBatch = %+v, %v; want one event", name, b, err)
			continue
		}
		if ev := b.Events[0]; ev.LoRAName != lora || !reflect.DeepEqual(ev.BlockMM, want) {
			t.Errorf("%s: DecodeEngineBatch BlockMM hashes = %x (LoRAName %q), want %x: the opaque pair and the digest, not the LoRA name",
				name, blockMMHashes(ev.BlockMM), ev.LoRAName, blockMMHashes(want))
		}
	}
}

// blockMMHashes lists each block's mm hashes, for failure messages.
func blockMMHashes(infos []*MMExtraInfo) [][]uint64 {
	out := make([][]uint64, len(infos))
	for i, info := range infos {
		out[i] = info.AppendHashes(nil)
	}
	return out
}
