package relayproto

import (
	"errors"
	"testing"

	"github.com/goindex/goindex/goindex/ckf"
)

const testDomain DomainID = 7

func testFormat(t *testing.T, n uint64) Format {
	t.Helper()
	f, err := NewFormat(0x5DEECE66D1B54A33, n)
	if err != nil {
		t.Fatalf("NewFormat(n=%d): %v", n, err)
	}
	return f
}

func TestManifest_Validation(t *testing.T) {
	f := testFormat(t, 8)
	pool := func(dc DCID) PoolID { return PoolID{Domain: testDomain, DC: dc} }
	many := make([]PoolID, MaxLanes+1)
	for i := range many {
		many[i] = pool(DCID(i))
	}
	badFormat := f
	badFormat.Version = 2
	for _, tc := range []struct {
		name string
		m    Manifest
		want error
	}{
		{"no lanes", Manifest{Domain: testDomain, Format: f}, errBadManifest},
		{"65 lanes", Manifest{Domain: testDomain, Format: f, Lanes: many}, errBadManifest},
		{"duplicate owner", Manifest{Domain: testDomain, Format: f, Lanes: []PoolID{pool(1), pool(2), pool(1)}}, errBadManifest},
		{"owner outside the domain", Manifest{Domain: testDomain, Format: f, Lanes: []PoolID{pool(1), {Domain: testDomain + 1, DC: 2}}}, errBadManifest},
		{"bad format", Manifest{Domain: testDomain, Format: badFormat, Lanes: []PoolID{pool(1)}}, ErrBadFormat},
	} {
		if err := tc.m.Validate(); !errors.Is(err, tc.want) {
			t.Errorf("Validate(%s) = %v, want %v", tc.name, err, tc.want)
		}
	}
	ok := Manifest{Domain: testDomain, Format: f, Lanes: many[:MaxLanes]}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate(64 lanes) = %v", err)
	}
}

func TestFormat_Validation(t *testing.T) {
	for _, n := range []uint64{0, 1, 3, 12, 1<<24 + 1, 1 << 25} {
		if _, err := NewFormat(1, n); !errors.Is(err, ErrBadFormat) {
			t.Errorf("NewFormat(n=%d) = %v, want ErrBadFormat", n, err)
		}
	}
	for _, n := range []uint64{2, 8, 1 << 24} {
		if _, err := NewFormat(1, n); err != nil {
			t.Errorf("NewFormat(n=%d) = %v", n, err)
		}
	}
	cf, err := ckf.NewFormat(ckf.DefaultSeed, 1024)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := NewFormat(ckf.DefaultSeed, 1024)
	if got := FormatOf(cf); got != want {
		t.Errorf("FormatOf(ckf n=1024) = %+v, want %+v", got, want)
	}
	for _, bad := range []Format{{Version: 1, Buckets: 8, FingerprintBits: 8, SlotsPerBucket: 4}, {Version: 1, Buckets: 8, FingerprintBits: 16, SlotsPerBucket: 2}} {
		if err := bad.Validate(); !errors.Is(err, ErrBadFormat) {
			t.Errorf("Validate(%+v) = %v, want ErrBadFormat", bad, err)
		}
	}
}

func TestSnapshot_ChunksAreContiguousAndWithinTheLimit(t *testing.T) {
	words := make([]uint64, 8)
	for i := range words {
		words[i] = uint64(i + 1)
	}
	s := &Snapshot{Sequence: 4, Total: 8, Offset: 0, Words: words}
	for _, c := range []struct{ max, chunks int }{{3, 3}, {8, 1}, {0, 1}, {-1, 1}, {MaxChunkWords + 1, 1}} {
		n, next := 0, uint64(0)
		for chunk := range s.Chunks(c.max) {
			if chunk.Offset != next || chunk.Sequence != 4 || chunk.Total != 8 || (c.max > 0 && len(chunk.Words) > c.max) {
				t.Errorf("Chunks(%d) chunk %d: offset %d (want %d), %d words, N %d", c.max, n, chunk.Offset, next, len(chunk.Words), chunk.Sequence)
			}
			next += uint64(len(chunk.Words))
			n++
		}
		if n != c.chunks || next != 8 {
			t.Errorf("Chunks(%d) = %d chunks covering %d words, want %d covering 8", c.max, n, next, c.chunks)
		}
	}
	empty := &Snapshot{Total: 0}
	n := 0
	for range empty.Chunks(3) {
		n++
	}
	if n != 1 {
		t.Errorf("Chunks of an empty snapshot = %d chunks, want 1", n)
	}
}
