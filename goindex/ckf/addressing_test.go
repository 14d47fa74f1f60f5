package ckf

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/zeebo/xxh3"
)

func TestFormat_ProbeMatchesSpecVectors(t *testing.T) {
	vectors := []struct {
		h     uint64
		n     uint64
		fp    uint16
		a, b  uint32
		delta uint32
	}{
		{0x0000000000000000, 8, 0xB49E, 6, 7, 1},
		{0x0000000000000000, 524288, 0xB49E, 394334, 337982, 207968},
		{0x0000000000000001, 8, 0xBABF, 7, 5, 2},
		{0x0000000000000001, 524288, 0xBABF, 129663, 522653, 394210},
		{0x0000000000000539, 8, 0x4624, 1, 6, 7},
		{0x0000000000000539, 524288, 0x4624, 284265, 165686, 446815},
		{0x8000000000000000, 8, 0x84A4, 6, 5, 3},
		{0x8000000000000000, 524288, 0x84A4, 428590, 499213, 70691},
		{0xFFFFFFFFFFFFFFFF, 8, 0x500A, 1, 0, 1},
		{0xFFFFFFFFFFFFFFFF, 524288, 0x500A, 117321, 453072, 467865},
		{0x42B9B85973626CC1, 8, 0xE769, 4, 5, 1},
		{0x42B9B85973626CC1, 524288, 0xE769, 230820, 375397, 409537},
		{0x0000000000009222, 8, 0x0001, 2, 1, 3},
		{0x0000000000009222, 524288, 0x0001, 53682, 394473, 447835},
		{0x0000000000000003, 8, 0xC24A, 4, 5, 1},
		{0x7EE2CBEDC694AB46, 524288, 0x4FCC, 334572, 103746, 298926},
		{0x83FB702F20E2AD65, 524288, 0xBFAD, 390773, 98785, 292756},
	}
	formats := map[uint64]*Format{}
	for _, v := range vectors {
		f := formats[v.n]
		if f == nil {
			var err error
			if f, err = NewFormat(DefaultSeed, v.n); err != nil {
				t.Fatalf("NewFormat(n=%d): %v", v.n, err)
			}
			formats[v.n] = f
		}
		got := f.Probe(v.h)
		want := Probe{FP: v.fp, A: v.a, B: v.b}
		if got != want {
			t.Errorf("Probe(h=%#x, n=%d) = %+v, want %+v", v.h, v.n, got, want)
		}
		if d := f.Delta(got.FP); d != v.delta {
			t.Errorf("Delta(fp=%#x, n=%d) = %d, want %d", got.FP, v.n, d, v.delta)
		}
	}
}

func TestFormat_AltIsAnInvolutionAndNeverSelf(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var formats []*Format
	for _, n := range []uint64{2, 8, 1024, 524288, MaxBuckets} {
		f, err := NewFormat(rng.Uint64(), n)
		if err != nil {
			t.Fatalf("NewFormat(n=%d): %v", n, err)
		}
		formats = append(formats, f)
	}
	for i := 0; i < 1_000_000; i++ {
		f := formats[i%len(formats)]
		p := f.Probe(rng.Uint64())
		if p.A == p.B || f.Alt(p.B, p.FP) != p.A || f.Alt(p.A, p.FP) != p.B || p.FP == 0 || uint64(p.A) >= f.Buckets() {
			t.Fatalf("Probe on n=%d = %+v: want A≠B, Alt involution, fp≠0, A<n", f.Buckets(), p)
		}
	}
}

func TestRawAltHash_MatchesSpec(t *testing.T) {
	raw := func(fp uint16) uint64 {
		var buf [2]byte
		binary.LittleEndian.PutUint16(buf[:], fp)
		return xxh3.HashSeed(buf[:], DefaultSeed^altDomain)
	}
	for fp, want := range map[uint16]uint64{0xB49E: 0x2FD6CF96AEFB2C60, 0x0001: 0x1238A4FAC4DED55B, 0xC24A: 0x91D287D4F1BE6D90} {
		if got := raw(fp); got != want {
			t.Errorf("raw alt hash(fp=%#x) = %#x, want %#x", fp, got, want)
		}
	}
	// Spec §2: 8,167 fingerprints have a raw delta of 0 at n = 8, none at n = 524,288.
	zero8, zeroBig := 0, 0
	for fp := 1; fp < 1<<16; fp++ {
		r := raw(uint16(fp))
		if r&7 == 0 {
			zero8++
		}
		if r&(524288-1) == 0 {
			zeroBig++
		}
	}
	if zero8 != 8167 || zeroBig != 0 {
		t.Errorf("raw zero deltas: n=8 → %d (want 8167), n=524288 → %d (want 0)", zero8, zeroBig)
	}
}

func TestNewFormat_RejectsBadBucketCounts(t *testing.T) {
	for _, n := range []uint64{0, 1, 3, 6, MaxBuckets * 2, 1 << 40} {
		if _, err := NewFormat(DefaultSeed, n); err == nil {
			t.Errorf("NewFormat(n=%d) = nil error, want ErrBadFormat", n)
		}
	}
}

func TestBucketCount_MatchesSpecTable(t *testing.T) {
	rows := []struct{ n, buckets uint64 }{
		{1, 2}, {16, 8}, {100_000, 32_768}, {1_048_576, 524_288},
		{10_000_000, 4_194_304}, {13_421_772, 4_194_304}, {13_421_773, 8_388_608},
	}
	for _, r := range rows {
		got, err := BucketCount(r.n)
		if err != nil || got != r.buckets {
			t.Errorf("BucketCount(%d) = %d, %v; want %d", r.n, got, err, r.buckets)
		}
	}
	if _, err := BucketCount(0); err == nil {
		t.Error("BucketCount(0) = nil error, want error")
	}
	if _, err := BucketCount(1 << 60); err == nil {
		t.Error("BucketCount(2^60) = nil error, want overflow error")
	}
}
