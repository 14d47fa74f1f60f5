package sim

import (
	"errors"
	"math"
	"testing"

	"github.com/goindex/goindex/bridge/trace"
)

func TestIdeal_HitsTheLongestEarlierPrefix(t *testing.T) {
	w := handTrace(t, "1000 1 1,2", "1400 1 1,2,3", "500 1 4", "1024 1 1,2")
	got := ideal(w, 10, 0)
	// Hits: 0, 1024 (r0's two blocks), 0, 1023 (capped at input − 1).
	// TTFTs: 100, 37.6, 50, 0.1 ms.
	want := Ideal{HitRate: 2047.0 / 3924, TTFTp50Ms: 37.6, TTFTp95Ms: 100, TTFTp99Ms: 100}
	if math.Abs(got.HitRate-want.HitRate) > 1e-12 || got.TTFTp50Ms != want.TTFTp50Ms || got.TTFTp95Ms != want.TTFTp95Ms || got.TTFTp99Ms != want.TTFTp99Ms {
		t.Errorf("ideal = %+v, want %+v", got, want)
	}
	// A warm-up of one: r0 still fills the cache but is not counted, so r1
	// keeps its hit. TTFTs 37.6, 50, 0.1 ms.
	got = ideal(w, 10, 1)
	want = Ideal{HitRate: 2047.0 / 2924, TTFTp50Ms: 37.6, TTFTp95Ms: 50, TTFTp99Ms: 50}
	if math.Abs(got.HitRate-want.HitRate) > 1e-12 || got.TTFTp50Ms != want.TTFTp50Ms || got.TTFTp95Ms != want.TTFTp95Ms || got.TTFTp99Ms != want.TTFTp99Ms {
		t.Errorf("ideal after a warm-up of 1 = %+v, want %+v", got, want)
	}
}

func TestNewWorkload_HashesOnceAndRejectsEmpty(t *testing.T) {
	reqs := []trace.Request{{TimestampMs: 5, InputLength: 0, OutputLength: 2, HashIDs: []uint64{9, 10}}}
	w, err := NewWorkload(reqs, 256)
	if err != nil {
		t.Fatalf("NewWorkload: %v", err)
	}
	r := w.Requests[0]
	if len(r.Locals) != 4 || len(r.Seqs) != 4 || r.InputTokens != 1 || r.ArrivalMs != 5 || r.Locals[0] != r.Locals[1] || r.Seqs[0] == r.Seqs[1] {
		t.Errorf("NewWorkload(bs 256) = %+v; want 4 blocks (2 per id, equal locals, chained seqs) and input 1", r)
	}
	if got := r.totalBlocks(256); got != 4 {
		t.Errorf("totalBlocks = %d, want 4 (the prompt's blocks dominate)", got)
	}
	for _, bad := range [][]trace.Request{nil, {{HashIDs: nil}}} {
		if _, err := NewWorkload(bad, 512); !errors.Is(err, ErrWorkload) {
			t.Errorf("NewWorkload(%v) = %v, want ErrWorkload", bad, err)
		}
	}
	if _, err := NewWorkload(reqs, 100); !errors.Is(err, ErrWorkload) {
		t.Errorf("NewWorkload(block size 100) = %v, want ErrWorkload", err)
	}
}
