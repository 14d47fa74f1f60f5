package kv

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/goindex/goindex/internal/testseed"
	"github.com/zeebo/xxh3"
)

func TestAppendChain_MatchesSpecVectors(t *testing.T) {
	cases := []struct {
		name   string
		locals []uint64
		want   []uint64
	}{
		// dynamo-compat.md V5: tokens 0..7, block size 4.
		{"V5", []uint64{9143094415614847814, 12124091508212882195}, []uint64{9143094415614847814, 9510318385840434533}},
		// V25: chain over local values [1,2,3,4,5].
		{"V25", []uint64{1, 2, 3, 4, 5}, []uint64{1, 16740963408272063728, 5417695437591212399, 15413681679220706959, 16713516116484648481}},
	}
	for _, c := range cases {
		got := AppendChain(nil, false, 0, c.locals)
		if len(got) != len(c.want) {
			t.Fatalf("%s: AppendChain(%v) len = %d, want %d", c.name, c.locals, len(got), len(c.want))
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: AppendChain(%v)[%d] = %d, want %d", c.name, c.locals, i, got[i], c.want[i])
			}
		}
	}
}

func TestAppendChain_ContinuesBelowParent(t *testing.T) {
	full := AppendChain(nil, false, 0, []uint64{1, 2, 3, 4, 5})
	tail := AppendChain(nil, true, full[2], []uint64{4, 5})
	if tail[0] != full[3] || tail[1] != full[4] {
		t.Errorf("AppendChain(parent=%d, [4 5]) = %v, want %v", full[2], tail, full[3:])
	}
}

func TestEvent_ValidateRejectsMixedShapes(t *testing.T) {
	bad := []Event{
		{Kind: 0},
		{Kind: Stored, Removed: []uint64{1}},
		{Kind: Removed, Blocks: []Block{{1, 2}}},
		{Kind: Cleared, Removed: []uint64{1}},
	}
	for i, e := range bad {
		if err := e.Validate(); err == nil {
			t.Errorf("case %d: Validate(%+v) = nil, want error", i, e)
		}
	}
	good := Event{Kind: Stored, Blocks: []Block{{1, 2}}}
	if err := good.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v, want nil", good, err)
	}
}

// libraryChainHash is the obvious reference of ChainHash: the library's
// XXH3 over the 16 little-endian bytes.
func libraryChainHash(prev, local uint64) uint64 {
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[0:8], prev)
	binary.LittleEndian.PutUint64(buf[8:16], local)
	return xxh3.HashSeed(buf[:], ChainSeed)
}

func TestChainHash_MatchesLibrary(t *testing.T) {
	seed := testseed.For(t, 0xC4A1_7E57)
	rng := rand.New(rand.NewPCG(seed, 3))
	cases := 4_000_000
	if testing.Short() {
		cases = 300_000
	}
	edges := []uint64{0, 1, 1337, 0xFFFFFFFF, 1 << 32, 1 << 63, ^uint64(0), chainFlipLo, chainFlipHi}
	check := func(prev, local uint64) bool {
		if got, want := ChainHash(prev, local), libraryChainHash(prev, local); got != want {
			t.Errorf("ChainHash(%#x, %#x) = %#x, want %#x (test seed %#x)", prev, local, got, want, seed)
			return false
		}
		return true
	}
	for _, p := range edges {
		for _, l := range edges {
			check(p, l)
		}
	}
	for i := 0; i < cases; i++ {
		if !check(rng.Uint64(), rng.Uint64()) {
			return
		}
	}
}

func FuzzChainHash(f *testing.F) {
	f.Add(uint64(0), uint64(0))
	f.Add(uint64(9143094415614847814), uint64(12124091508212882195))
	f.Add(^uint64(0), uint64(1337))
	f.Fuzz(func(t *testing.T, prev, local uint64) {
		if got, want := ChainHash(prev, local), libraryChainHash(prev, local); got != want {
			t.Errorf("ChainHash(%#x, %#x) = %#x, want %#x", prev, local, got, want)
		}
	})
}

var chainSink uint64

// BenchmarkChainHash lines the inlined chain link up against the library
// call it replaces. Each link depends on the previous one, as in a chain.
func BenchmarkChainHash(b *testing.B) {
	b.Run("impl=inline", func(b *testing.B) {
		prev := uint64(1)
		for i := 0; b.Loop(); i++ {
			prev = ChainHash(prev, uint64(i))
		}
		chainSink = prev
	})
	b.Run("impl=library", func(b *testing.B) {
		prev := uint64(1)
		for i := 0; b.Loop(); i++ {
			prev = libraryChainHash(prev, uint64(i))
		}
		chainSink = prev
	})
}
