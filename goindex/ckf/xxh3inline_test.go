package ckf

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/goindex/goindex/internal/testseed"
	"github.com/zeebo/xxh3"
)

func libraryHash8(x, seed uint64) uint64 {
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], x)
	return xxh3.HashSeed(buf[:], seed)
}

func TestHash8_MatchesLibraryOnRandomInputsAndSeeds(t *testing.T) {
	seed := testseed.For(t, inlineSeed)
	rng := rand.New(rand.NewPCG(seed, 1))
	cases := 4_000_000
	if testing.Short() {
		cases = 500_000
	}
	edges := []uint64{0, 1, 0xFFFFFFFF, 1 << 32, 1 << 63, ^uint64(0), DefaultSeed, chainSeedEdge}
	check := func(x, s uint64) bool {
		if got, want := Hash8(x, s), libraryHash8(x, s); got != want {
			t.Errorf("Hash8(%#x, seed %#x) = %#x, want %#x (test seed %#x)", x, s, got, want, seed)
			return false
		}
		return true
	}
	for _, x := range edges {
		for _, s := range edges {
			check(x, s)
		}
	}
	for i := 0; i < cases; i++ {
		if !check(rng.Uint64(), rng.Uint64()) {
			return
		}
	}
}

// inlineSeed is the default seed of the randomized Hash8 tests.
const inlineSeed = 0x8A5CD789635D2DFF

// chainSeedEdge is Dynamo's chain seed (1337), an edge seed worth pinning.
const chainSeedEdge = 1337

func TestHash8_MatchesSpecRawHashes(t *testing.T) {
	for _, v := range []struct{ h, m uint64 }{
		{0x0000000000000000, 0x85A2CEAE045EB49E},
		{0x0000000000000001, 0xEA2D49B1FA7FBABF},
		{0x0000000000000539, 0xB46B479456694624},
		{0x8000000000000000, 0xBA477DA68A2E84A4},
		{0xFFFFFFFFFFFFFFFF, 0xA0DD3E19CA49500A},
		{0x42B9B85973626CC1, 0x3C05CFB385A4E769},
		{0x0000000000009222, 0xE59574E0D1B20000},
		{0x7EE2CBEDC694AB46, 0x8EF5206D1AEC4FCC},
		{0x83FB702F20E2AD65, 0x36DECFEDF675BFAD},
	} {
		if got := Hash8(v.h, DefaultSeed); got != v.m {
			t.Errorf("Hash8(%#x, DefaultSeed) = %#x, want %#x", v.h, got, v.m)
		}
	}
}

// TestFormat_ProbeFastEqualsProbe holds ProbeFast, ProbesFast and the
// producer's primary (FP and A only) to Probe.
func TestFormat_ProbeFastEqualsProbe(t *testing.T) {
	seed := testseed.For(t, inlineSeed)
	rng := rand.New(rand.NewPCG(seed, 2))
	var formats []*Format
	for _, n := range []uint64{2, 8, 1 << 19, MaxBuckets} {
		for _, s := range []uint64{DefaultSeed, rng.Uint64()} {
			f, err := NewFormat(s, n)
			if err != nil {
				t.Fatalf("NewFormat(%#x, %d): %v", s, n, err)
			}
			formats = append(formats, f)
		}
	}
	cases := 1_000_000
	if testing.Short() {
		cases = 200_000
	}
	for i := 0; i < cases; i++ {
		f := formats[i%len(formats)]
		h := rng.Uint64()
		if i%1024 == 0 {
			h = 0x9222 // the vector whose raw fingerprint is 0
		}
		if got, want := f.ProbeFast(h), f.Probe(h); got != want {
			t.Fatalf("ProbeFast(%#x) on n=%d seed=%#x = %+v, want %+v (test seed %#x)", h, f.Buckets(), f.Seed(), got, want, seed)
		}
		if got, want := f.primary(h), f.Probe(h); got.FP != want.FP || got.A != want.A || got.B != 0 {
			t.Fatalf("primary(%#x) on n=%d seed=%#x = %+v, want FP and A of %+v, B 0 (test seed %#x)", h, f.Buckets(), f.Seed(), got, want, seed)
		}
	}
	// The batch form, on random lengths, leaves dst beyond len untouched.
	hashes := make([]uint64, 64)
	dst := make([]Probe, 65)
	for i := 0; i < cases/64; i++ {
		f := formats[i%len(formats)]
		for j := range hashes {
			hashes[j] = rng.Uint64()
		}
		n := rng.IntN(len(hashes) + 1)
		dst[n] = Probe{FP: 7}
		f.ProbesFast(dst[:n], hashes)
		for j := 0; j < n; j++ {
			if want := f.Probe(hashes[j]); dst[j] != want {
				t.Fatalf("ProbesFast(len %d)[%d] of %#x on n=%d = %+v, want %+v (test seed %#x)", n, j, hashes[j], f.Buckets(), dst[j], want, seed)
			}
		}
		if dst[n] != (Probe{FP: 7}) {
			t.Fatalf("ProbesFast(len %d) wrote dst[%d] = %+v beyond its length", n, n, dst[n])
		}
	}
}

func FuzzHash8(f *testing.F) {
	f.Add(uint64(0), DefaultSeed)
	f.Add(uint64(0x9222), uint64(0))
	f.Add(^uint64(0), ^uint64(0))
	f.Fuzz(func(t *testing.T, x, seed uint64) {
		if got, want := Hash8(x, seed), libraryHash8(x, seed); got != want {
			t.Errorf("Hash8(%#x, seed %#x) = %#x, want %#x", x, seed, got, want)
		}
	})
}

var hashSink uint64

// BenchmarkHash8 lines the inlined hash up against the library call it
// replaces on the probe hot path.
func BenchmarkHash8(b *testing.B) {
	b.Run("impl=inline", func(b *testing.B) {
		var acc uint64
		for i := 0; b.Loop(); i++ {
			acc += Hash8(uint64(i), DefaultSeed)
		}
		hashSink = acc
	})
	b.Run("impl=library", func(b *testing.B) {
		var acc uint64
		for i := 0; b.Loop(); i++ {
			acc += libraryHash8(uint64(i), DefaultSeed)
		}
		hashSink = acc
	})
}

// BenchmarkProbesFast lines up the batch probe (hash inlined into the
// loop) against one ProbeFast call per hash, over a query-sized batch.
func BenchmarkProbesFast(b *testing.B) {
	f, err := NewFormat(DefaultSeed, 1<<22)
	if err != nil {
		b.Fatal(err)
	}
	hashes := make([]uint64, 32)
	for i := range hashes {
		hashes[i] = uint64(i) * 0x9E3779B97F4A7C15
	}
	dst := make([]Probe, len(hashes))
	report := func(b *testing.B) {
		hashSink += uint64(dst[len(dst)-1].A)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(hashes)), "ns/probe")
	}
	b.Run("impl=batch", func(b *testing.B) {
		for b.Loop() {
			f.ProbesFast(dst, hashes)
		}
		report(b)
	})
	b.Run("impl=batch-scalar", func(b *testing.B) {
		for b.Loop() {
			f.probesScalar(dst, hashes)
		}
		report(b)
	})
	b.Run("impl=single", func(b *testing.B) {
		for b.Loop() {
			for i, h := range hashes {
				dst[i] = f.ProbeFast(h)
			}
		}
		report(b)
	})
}

// TestFormat_ProbesFastEqualsScalar holds the batch probe ProbesFast runs
// (the AVX-512 probes8 on amd64 CPUs that have it) to the scalar loop on
// every batch length 1–8 at every offset of a larger buffer, with the
// fingerprint-0 vector and random hashes, and checks it writes nothing
// past a batch.
func TestFormat_ProbesFastEqualsScalar(t *testing.T) {
	if !vectorProbes {
		t.Log("this CPU runs the scalar loop only: ProbesFast is probesScalar")
	}
	seed := testseed.For(t, inlineSeed)
	rng := rand.New(rand.NewPCG(seed, 3))
	for _, n := range []uint64{2, 8, 1 << 10, 1 << 22, MaxBuckets} {
		f, err := NewFormat(rng.Uint64(), n)
		if err != nil {
			t.Fatalf("NewFormat(n=%d): %v", n, err)
		}
		hashes := make([]uint64, 40)
		got, want := make([]Probe, 41), make([]Probe, 41)
		for i := 0; i < 20_000; i++ {
			for j := range hashes {
				hashes[j] = rng.Uint64()
				if rng.IntN(16) == 0 {
					hashes[j] = 0x9222 // raw fingerprint 0 under DefaultSeed
				}
			}
			from := rng.IntN(33)
			to := from + rng.IntN(len(hashes)-from+1)
			for j := range got {
				got[j] = Probe{FP: 7, A: 7, B: 7}
			}
			copy(want, got)
			f.ProbesFast(got[from:to], hashes[from:to])
			f.probesScalar(want[from:to], hashes[from:to])
			for j := range got {
				if got[j] != want[j] {
					t.Fatalf("ProbesFast(hashes[%d:%d]) on n=%d: probe %d = %+v, want %+v (test seed %#x)", from, to, n, j, got[j], want[j], seed)
				}
			}
		}
	}
}
