package trace

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
)

// testSeed returns the seed of a randomized test: GOINDEX_TEST_SEED if set,
// else def. The caller prints it on failure.
func testSeed(t *testing.T, def uint64) uint64 {
	t.Helper()
	s := os.Getenv("GOINDEX_TEST_SEED")
	if s == "" {
		return def
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("GOINDEX_TEST_SEED=%q: %v", s, err)
	}
	return v
}

func mustMapper(t *testing.T, bs int, s Scheme) *Mapper {
	t.Helper()
	m, err := NewMapper(MapperConfig{BlockSize: bs, Scheme: s})
	if err != nil {
		t.Fatalf("NewMapper(bs=%d, %v): %v", bs, s, err)
	}
	return m
}

// The spec's vectors V26–V29 (dynamo-compat §1.5): ids → tokens (u32 id
// repeated bs times) → local hashes → router chain.
var mooncakeVectors = []struct {
	name          string
	bs            int
	ids           []uint64
	locals, chain []uint64
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
	{"V29", 16, []uint64{1<<32 + 5}, []uint64{9340675565616011363}, nil},
}

func TestMapper_PerIDMatchesSpecVectors(t *testing.T) {
	for _, v := range mooncakeVectors {
		m := mustMapper(t, v.bs, PerID)
		got := m.AppendLocals(nil, v.ids)
		if !slices.Equal(got, v.locals) {
			t.Errorf("%s: PerID AppendLocals(bs=%d, %v) = %v, want %v", v.name, v.bs, v.ids, got, v.locals)
		}
		if v.chain != nil {
			if chain := kv.AppendChain(nil, false, 0, got); !slices.Equal(chain, v.chain) {
				t.Errorf("%s: chain of %v = %v, want %v", v.name, got, chain, v.chain)
			}
		}
	}
	if five := mustMapper(t, 16, PerID).AppendLocals(nil, []uint64{5}); five[0] != 9340675565616011363 {
		t.Errorf("V29: id 5 at bs=16 = %d, want the same hash as id 2^32+5", five[0])
	}
}

func TestMapper_SplitRepeatsEachIDsBlockHash(t *testing.T) {
	for _, v := range mooncakeVectors {
		m := mustMapper(t, v.bs, Split)
		per := TokensPerID / v.bs
		if m.BlocksPerID() != per {
			t.Errorf("%s: BlocksPerID(bs=%d) = %d, want %d", v.name, v.bs, m.BlocksPerID(), per)
		}
		got := m.AppendLocals(nil, v.ids)
		var want []uint64
		for _, l := range v.locals {
			for range per {
				want = append(want, l)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: Split AppendLocals(bs=%d, %v) = %v, want each of %v %d times", v.name, v.bs, v.ids, got, v.locals, per)
		}
	}
	// At 512 tokens the schemes agree (V26's chain).
	if got := mustMapper(t, 0, Split).AppendLocals(nil, []uint64{0, 1, 2}); !slices.Equal(kv.AppendChain(nil, false, 0, got), mooncakeVectors[0].chain) {
		t.Errorf("Split at the default block size: chain of ids 0,1,2 = %v, want V26 %v", kv.AppendChain(nil, false, 0, got), mooncakeVectors[0].chain)
	}
}

// TestMapper_AgreesWithHashingTheWholePrompt is the slow reference: spell out
// the prompt's tokens and hash them with dynamo.Hasher in one call.
func TestMapper_AgreesWithHashingTheWholePrompt(t *testing.T) {
	seed := testSeed(t, 26)
	rng := rand.New(rand.NewPCG(seed, 0))
	sizes := []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
	for round := 0; round < 40; round++ {
		bs := sizes[rng.IntN(len(sizes))]
		scheme := Scheme(rng.IntN(2))
		ids := make([]uint64, 1+rng.IntN(6))
		for i := range ids {
			ids[i] = rng.Uint64() >> uint(rng.IntN(64))
		}
		span := TokensPerID
		if scheme == PerID {
			span = bs
		}
		var tokens []uint32
		for _, id := range ids {
			for range span {
				tokens = append(tokens, uint32(id))
			}
		}
		h, err := dynamo.NewHasher(dynamo.HasherConfig{BlockSize: bs})
		if err != nil {
			t.Fatalf("NewHasher(%d): %v", bs, err)
		}
		want := h.AppendLocal(nil, tokens)
		m := mustMapper(t, bs, scheme)
		// Appending after existing content must not disturb it.
		got := m.AppendLocals([]uint64{7}, ids)
		if got[0] != 7 || !slices.Equal(got[1:], want) {
			t.Fatalf("seed %d: %v AppendLocals(bs=%d, %v) = %v, want [7] + %v", seed, scheme, bs, ids, got, want)
		}
	}
}

func TestNewMapper_RejectsBadConfigs(t *testing.T) {
	bad := []MapperConfig{
		{BlockSize: 100},                    // does not divide 512
		{BlockSize: 1024},                   // over an id's 512 tokens
		{BlockSize: -4},                     // negative
		{BlockSize: 1 << 20, Scheme: PerID}, // over dynamo.MaxBlockSize
		{Scheme: Scheme(9)},
	}
	for _, c := range bad {
		if _, err := NewMapper(c); !errors.Is(err, ErrConfig) {
			t.Errorf("NewMapper(%+v) = %v, want ErrConfig", c, err)
		}
	}
	if m, err := NewMapper(MapperConfig{BlockSize: 1000, Scheme: PerID}); err != nil || m.BlocksPerID() != 1 || m.BlockSize() != 1000 {
		t.Errorf("NewMapper(PerID, bs=1000) = %v; want one 1000-token block per id", err)
	}
}

func TestParseScheme_RoundTrips(t *testing.T) {
	for _, s := range []Scheme{Split, PerID} {
		if got, err := ParseScheme(s.String()); err != nil || got != s {
			t.Errorf("ParseScheme(%q) = %v, %v; want %v", s.String(), got, err, s)
		}
	}
	if _, err := ParseScheme("upstream"); !errors.Is(err, ErrConfig) {
		t.Errorf("ParseScheme(upstream) = %v, want ErrConfig", err)
	}
}
