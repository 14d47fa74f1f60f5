package dynamo

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/goindex/goindex/goindex/kv"
)

// testRand returns a PCG seeded with GOINDEX_SEED or def; the seed is
// printed when the test fails.
func testRand(t testing.TB, def uint64) *rand.Rand {
	t.Helper()
	seed := def
	if s := os.Getenv("GOINDEX_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("GOINDEX_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("random seed %d (override with GOINDEX_SEED)", seed)
		}
	})
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// span returns the tokens lo, lo+1, …, hi.
func span(lo, hi uint32) []uint32 {
	out := make([]uint32, 0, hi-lo+1)
	for t := lo; t <= hi; t++ {
		out = append(out, t)
	}
	return out
}

func mustHasher(t testing.TB, cfg HasherConfig) *Hasher {
	t.Helper()
	h, err := NewHasher(cfg)
	if err != nil {
		t.Fatalf("NewHasher(%+v): %v", cfg, err)
	}
	return h
}

func TestXXH3_LibraryVectors(t *testing.T) {
	// V1: the raw-bytes tokens_hash pinned upstream in test_router_event_new.
	if got, want := xxh3.HashSeed([]byte("test data"), DefaultHashSeed), uint64(13226331709069118873); got != want {
		t.Errorf("V1 XXH3(\"test data\", 1337) = %d, want %d", got, want)
	}
	// V2: library sanity.
	if got, want := xxh3.Hash(nil), uint64(3244421341483603138); got != want {
		t.Errorf("V2 XXH3(\"\", 0) = %d, want %d", got, want)
	}
}

func TestHasher_SpecVectors(t *testing.T) {
	cases := []struct {
		name   string
		cfg    HasherConfig
		tokens []uint32
		local  []uint64
		chain  []uint64 // nil: not pinned by the spec
	}{
		{"V3", HasherConfig{BlockSize: 4}, span(0, 3), []uint64{9143094415614847814}, nil},
		{"V4/V5", HasherConfig{BlockSize: 4}, span(0, 7),
			[]uint64{9143094415614847814, 12124091508212882195},
			[]uint64{9143094415614847814, 9510318385840434533}},
		{"V6 partial tail ignored", HasherConfig{BlockSize: 4}, span(0, 9),
			[]uint64{9143094415614847814, 12124091508212882195}, nil},
		{"V7 shorter than a block", HasherConfig{BlockSize: 4}, span(0, 2), []uint64{}, []uint64{}},
		{"V8/V9", HasherConfig{BlockSize: 4}, span(1, 20),
			[]uint64{14643705804678351452, 16777012769546811212, 483935686894639516, 135165725823939817, 1363306219480167028},
			[]uint64{14643705804678351452, 4945711292740353085, 12583592247330656132, 1921452330601040443, 16910271745392797383}},
		{"V10", HasherConfig{BlockSize: 16}, span(0, 31),
			[]uint64{15310707395893867146, 15292316782987903195},
			[]uint64{15310707395893867146, 13769157705258532664}},
		{"V11 128-byte input", HasherConfig{BlockSize: 32}, span(0, 31), []uint64{5756925433886871916}, nil},
		{"V12 129–240 byte path", HasherConfig{BlockSize: 48}, span(0, 47), []uint64{17528049439166767664}, nil},
		{"V13 long path", HasherConfig{BlockSize: 64}, span(0, 127),
			[]uint64{3480597578098033343, 3318286205056455972},
			[]uint64{3480597578098033343, 2575318956255022795}},
		{"V15 lora", HasherConfig{BlockSize: 4, LoRA: "adapter-a"}, span(0, 3), []uint64{6665157333201000639}, nil},
		{"V17 namespace", HasherConfig{BlockSize: 4, Namespace: "tenant-a"}, span(0, 3), []uint64{17009624042690211646}, nil},
		{"V18 lora named like the namespace", HasherConfig{BlockSize: 4, LoRA: "tenant-a"}, span(0, 3), []uint64{582854293518545300}, nil},
		{"V19 lora and namespace", HasherConfig{BlockSize: 4, LoRA: "adapter-a", Namespace: "tenant-a"}, span(0, 3), []uint64{8269515957840517240}, nil},
		{"V23 EAGLE", HasherConfig{BlockSize: 4, Eagle: true}, span(0, 8),
			[]uint64{14562210786876287112, 15916330181359808192}, nil},
	}
	for _, c := range cases {
		h := mustHasher(t, c.cfg)
		got := h.AppendLocal([]uint64{}, c.tokens)
		if !slices.Equal(got, c.local) {
			t.Errorf("%s: AppendLocal(%+v, %d tokens) = %v, want %v", c.name, c.cfg, len(c.tokens), got, c.local)
		}
		if c.chain != nil {
			if chain := kv.AppendChain([]uint64{}, false, 0, got); !slices.Equal(chain, c.chain) {
				t.Errorf("%s: AppendChain(%v) = %v, want %v", c.name, got, chain, c.chain)
			}
		}
	}
}

func TestChain_V25(t *testing.T) {
	// V25: the chain over local values [1..5] that §3.5's scenarios use.
	want := []uint64{1, 16740963408272063728, 5417695437591212399, 15413681679220706959, 16713516116484648481}
	if got := kv.AppendChain(nil, false, 0, []uint64{1, 2, 3, 4, 5}); !slices.Equal(got, want) {
		t.Errorf("V25 AppendChain([1..5]) = %v, want %v", got, want)
	}
}

func TestSaltedSeed_SpecVectors(t *testing.T) {
	cases := []struct {
		name, lora, ns string
		want           uint64
	}{
		{"base", "", "", DefaultHashSeed},
		{"V14", "adapter-a", "", 8842669519798868182},
		{"V16", "my-adapter", "", 2360313164392603308},
		{"V17", "", "tenant-a", 1948188790972764086},
		{"V18", "tenant-a", "", 7159698576361520314},
		{"V19", "adapter-a", "tenant-a", 10790858310771630931},
	}
	for _, c := range cases {
		if got := SaltedSeed(c.lora, c.ns); got != c.want {
			t.Errorf("%s: SaltedSeed(%q, %q) = %d, want %d", c.name, c.lora, c.ns, got, c.want)
		}
	}
}

func TestHasher_AppendedMMHashes(t *testing.T) {
	h := mustHasher(t, HasherConfig{BlockSize: 4})
	cases := []struct {
		name string
		mm   []uint64
		want uint64
	}{
		{"V20 one mm hash", []uint64{42}, 18280081842874931122},
		{"V21 sorted ascending", []uint64{7, 3}, 12534961123884847936},
		{"V21 already sorted", []uint64{3, 7}, 12534961123884847936},
		{"no mm hashes is text-only (V3)", nil, 9143094415614847814},
	}
	for _, c := range cases {
		mm := slices.Clone(c.mm)
		if got := h.HashBlock(span(0, 3), mm); got != c.want {
			t.Errorf("%s: HashBlock(0..3, %v) = %d, want %d", c.name, c.mm, got, c.want)
		}
		if !slices.Equal(mm, c.mm) {
			t.Errorf("%s: HashBlock reordered the caller's mm hashes: %v, want %v", c.name, mm, c.mm)
		}
		if got := h.AppendLocalMM(nil, span(0, 3), [][]uint64{c.mm}); len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: AppendLocalMM(0..3, [%v]) = %v, want [%d]", c.name, c.mm, got, c.want)
		}
	}
}

func TestHasher_PadValueSubstitution(t *testing.T) {
	const image = 151655
	const mmHash = 9533257059414191570
	if got := PadValue(mmHash); got != 49115154 {
		t.Fatalf("V22 PadValue(%d) = %d, want 49115154", uint64(mmHash), got)
	}
	h := mustHasher(t, HasherConfig{BlockSize: 4, PadImageTokens: true, ImageTokenID: image})
	tokens := []uint32{10, 20, image, image}
	if got, want := h.HashBlock(tokens, []uint64{mmHash}), uint64(71881790567603244); got != want {
		t.Errorf("V22 HashBlock(%v, [%d]) = %d, want %d", tokens, uint64(mmHash), got, want)
	}
	base := mustHasher(t, HasherConfig{BlockSize: 4})
	if got, want := base.HashBlock([]uint32{10, 20, 49115154, 49115154}, nil), uint64(71881790567603244); got != want {
		t.Errorf("V22 local of substituted tokens = %d, want %d", got, want)
	}
	// A block without mm objects is hashed unchanged, placeholders included.
	if got, want := h.HashBlock(tokens, nil), base.HashBlock(tokens, nil); got != want {
		t.Errorf("HashBlock(%v, no mm) with pad scheme = %d, want text hash %d", tokens, got, want)
	}
}

func TestSubstitutePads_RunsTakeSuccessiveHashesClampedToLast(t *testing.T) {
	const img = 9
	tokens := []uint32{img, img, 1, img, 2, img, img, 3, img}
	mm := []uint64{100, 200}
	want := []uint32{PadValue(100), PadValue(100), 1, PadValue(200), 2, PadValue(200), PadValue(200), 3, PadValue(200)}
	if got := substitutePads(nil, tokens, img, mm); !slices.Equal(got, want) {
		t.Errorf("substitutePads(%v, %d, %v) = %v, want %v", tokens, img, mm, got, want)
	}
}

func TestPadValue_KeepsLow30Bits(t *testing.T) {
	cases := []struct{ in, want uint64 }{
		{0, 1_000_000},
		{1<<30 - 1, 1_000_000 + 1<<30 - 1},
		{1<<30 | 0xCAFE, 1_000_000 + 0xCAFE},
		{^uint64(0), 1_000_000 + 1<<30 - 1},
	}
	for _, c := range cases {
		if got := PadValue(c.in); uint64(got) != c.want {
			t.Errorf("PadValue(%#x) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestMMIdentifierHash(t *testing.T) {
	hex := strings.Repeat("0123456789abcdef", 4)
	cases := []struct {
		id   string
		want uint64
		ok   bool
	}{
		{"opaque-renderer-image-0", 14437604544409538977, true}, // V24
		{hex, 0x0123456789abcdef, true},
		{strings.ToUpper(hex), 0x0123456789abcdef, true},
		{hex[:63] + "g", xxh3.HashString(hex[:63] + "g"), true}, // not hex: opaque
		{hex + "0", xxh3.HashString(hex + "0"), true},           // 65 chars: opaque
		{"", 0, false},
	}
	for _, c := range cases {
		got, ok := MMIdentifierHash(c.id)
		if got != c.want || ok != c.ok {
			t.Errorf("MMIdentifierHash(%q) = %d, %v; want %d, %v", c.id, got, ok, c.want, c.ok)
		}
	}
}

func TestHasher_MultimodalSequenceMatchesPerBlock(t *testing.T) {
	rng := testRand(t, 1)
	for _, pad := range []bool{false, true} {
		h := mustHasher(t, HasherConfig{BlockSize: 8, PadImageTokens: pad, ImageTokenID: 5})
		for range 200 {
			tokens := make([]uint32, rng.IntN(60))
			for i := range tokens {
				tokens[i] = uint32(rng.IntN(8)) // many image tokens (5)
			}
			blockMM := make([][]uint64, rng.IntN(8))
			for i := range blockMM {
				for range rng.IntN(3) {
					blockMM[i] = append(blockMM[i], rng.Uint64())
				}
			}
			got := h.AppendLocalMM(nil, tokens, blockMM)
			var want []uint64
			for b := range h.Blocks(len(tokens)) {
				var mm []uint64
				if b < len(blockMM) {
					mm = blockMM[b]
				}
				want = append(want, h.HashBlock(tokens[b*8:b*8+8], mm))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("pad=%v: AppendLocalMM(%v, %v) = %v, want per-block %v", pad, tokens, blockMM, got, want)
			}
		}
	}
}

func TestNewHasher_RejectsBlockSizeOutOfRange(t *testing.T) {
	for _, bs := range []int{-1, 0, MaxBlockSize + 1} {
		if _, err := NewHasher(HasherConfig{BlockSize: bs}); err == nil {
			t.Errorf("NewHasher(BlockSize=%d) = nil error, want *LimitError", bs)
		}
	}
}

func TestMooncake_SpecVectors(t *testing.T) {
	cases := []struct {
		name  string
		bs    int
		ids   []uint64
		local []uint64
		chain []uint64
	}{
		{"V26", 512, []uint64{0, 1, 2},
			[]uint64{16456450638077811066, 10716031498429279048, 17161484913955091167},
			[]uint64{16456450638077811066, 10107136320548696770, 13351200824785277189}},
		{"V27", 128, []uint64{0, 1, 2},
			[]uint64{9536694438970776937, 4136650367586629977, 1141331211892543317},
			[]uint64{9536694438970776937, 5575236196163458334, 14833944776506497994}},
		{"V28", 16, []uint64{0, 1, 2},
			[]uint64{5523182284766269584, 13518392937921988335, 4954898952464910565},
			[]uint64{5523182284766269584, 18334666815488455025, 719632925788506753}},
		{"V29 id truncated to u32", 16, []uint64{1<<32 + 5, 5}, []uint64{9340675565616011363, 9340675565616011363}, nil},
	}
	for _, c := range cases {
		fast := AppendMooncakeLocal(nil, c.ids, c.bs)
		generic := mustHasher(t, HasherConfig{BlockSize: c.bs}).AppendLocal(nil, MooncakeTokens(nil, c.ids, c.bs))
		if !slices.Equal(fast, c.local) {
			t.Errorf("%s: AppendMooncakeLocal(%v, %d) = %v, want %v", c.name, c.ids, c.bs, fast, c.local)
		}
		if !slices.Equal(generic, c.local) {
			t.Errorf("%s: AppendLocal(MooncakeTokens(%v, %d)) = %v, want %v", c.name, c.ids, c.bs, generic, c.local)
		}
		if c.chain != nil {
			if chain := kv.AppendChain(nil, false, 0, fast); !slices.Equal(chain, c.chain) {
				t.Errorf("%s: chain = %v, want %v", c.name, chain, c.chain)
			}
		}
	}
}

func TestAppendMooncakeLocal_MatchesGenericPath(t *testing.T) {
	rng := testRand(t, 2)
	sizes := []int{1, 2, 3, 4, 7, 16, 64, 128, 511, 512, 513, 1000, 4096}
	for _, bs := range sizes {
		ids := make([]uint64, 1+rng.IntN(20))
		for i := range ids {
			ids[i] = rng.Uint64()
		}
		want := mustHasher(t, HasherConfig{BlockSize: bs}).AppendLocal(nil, MooncakeTokens(nil, ids, bs))
		if got := AppendMooncakeLocal([]uint64{7}, ids, bs); got[0] != 7 || !slices.Equal(got[1:], want) {
			t.Errorf("AppendMooncakeLocal([7], %v, %d) = %v, want [7] + %v", ids, bs, got, want)
		}
	}
}

func TestAppendMooncakeLocal_InvalidBlockSizeAppendsNothing(t *testing.T) {
	for _, bs := range []int{-1, 0, MaxBlockSize + 1} {
		if got := AppendMooncakeLocal(nil, []uint64{1, 2}, bs); len(got) != 0 {
			t.Errorf("AppendMooncakeLocal(ids, %d) = %v, want empty", bs, got)
		}
		if got := MooncakeTokens(nil, []uint64{1}, min(bs, 0)); len(got) != 0 {
			t.Errorf("MooncakeTokens(ids, %d) = %v, want empty", min(bs, 0), got)
		}
	}
}

func TestAppendMooncakeLocal_NoAllocationsUpToBlockSize512(t *testing.T) {
	ids := []uint64{1, 2, 3, 4}
	dst := make([]uint64, 0, len(ids))
	for _, bs := range []int{16, 128, 512} {
		if n := testing.AllocsPerRun(20, func() { dst = AppendMooncakeLocal(dst[:0], ids, bs) }); n != 0 {
			t.Errorf("AppendMooncakeLocal(bs=%d) allocates %.0f times per call, want 0", bs, n)
		}
	}
}
