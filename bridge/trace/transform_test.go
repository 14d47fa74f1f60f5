package trace

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func TestStretch_TurnsEachIDIntoARunOfF(t *testing.T) {
	in := []Request{{TimestampMs: 5, InputLength: 700, OutputLength: 9, HashIDs: []uint64{0, 1}}, {HashIDs: []uint64{0, 2}}}
	got, err := Stretch(in, 3)
	if err != nil {
		t.Fatalf("Stretch(f=3): %v", err)
	}
	want := []Request{
		{TimestampMs: 5, InputLength: 2100, OutputLength: 9, HashIDs: []uint64{0, 1, 2, 3, 4, 5}},
		{HashIDs: []uint64{0, 1, 2, 6, 7, 8}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Stretch(%+v, 3) = %+v, want %+v", in, got, want)
	}
	if in[0].HashIDs[1] != 1 || in[0].InputLength != 700 {
		t.Errorf("Stretch modified its input: %+v", in[0])
	}
	if same, err := Stretch(in, 1); err != nil || &same[0] != &in[0] {
		t.Errorf("Stretch(f=1) = %v, %v; want the input itself", same, err)
	}
}

func TestStretch_RejectsBadFactorsAndOverflow(t *testing.T) {
	for _, f := range []int{0, -1, MaxStretch + 1} {
		if _, err := Stretch(nil, f); !errors.Is(err, ErrConfig) {
			t.Errorf("Stretch(f=%d) = %v, want ErrConfig", f, err)
		}
	}
	ok := []Request{{HashIDs: []uint64{math.MaxUint64 / 4}}}
	if _, err := Stretch(ok, 4); err != nil {
		t.Errorf("Stretch(id %d, 4) = %v, want nil (largest id h·4+3 fits)", ok[0].HashIDs[0], err)
	}
	bad := []Request{{HashIDs: []uint64{math.MaxUint64/4 + 1}}}
	if _, err := Stretch(bad, 4); !errors.Is(err, ErrIDOverflow) {
		t.Errorf("Stretch(id %d, 4) = %v, want ErrIDOverflow", bad[0].HashIDs[0], err)
	}
}

func TestDuplicate_OffsetsCopiesByMaxIDPlusOne(t *testing.T) {
	in := []Request{{TimestampMs: 1, HashIDs: []uint64{0, 1}}, {TimestampMs: 2, InputLength: 3, HashIDs: []uint64{0, 4}}}
	got, err := Duplicate(in, 3)
	if err != nil {
		t.Fatalf("Duplicate(d=3): %v", err)
	}
	// max id 4, so copy k adds 5k; copies follow their original.
	want := []Request{
		{TimestampMs: 1, HashIDs: []uint64{0, 1}},
		{TimestampMs: 1, HashIDs: []uint64{5, 6}},
		{TimestampMs: 1, HashIDs: []uint64{10, 11}},
		{TimestampMs: 2, InputLength: 3, HashIDs: []uint64{0, 4}},
		{TimestampMs: 2, InputLength: 3, HashIDs: []uint64{5, 9}},
		{TimestampMs: 2, InputLength: 3, HashIDs: []uint64{10, 14}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Duplicate(%+v, 3) = %+v, want %+v", in, got, want)
	}
	if in[1].HashIDs[1] != 4 {
		t.Errorf("Duplicate modified its input: %+v", in[1])
	}
}

func TestDuplicate_CopiesAreDisjointAndKeepTheSharing(t *testing.T) {
	reqs := readSlice(t)[:100]
	const d = 4
	dup, err := Duplicate(reqs, d)
	if err != nil {
		t.Fatalf("Duplicate(slice, %d): %v", d, err)
	}
	span := MaxID(reqs) + 1
	for i, r := range dup {
		k, orig := uint64(i%d), reqs[i/d]
		for j, h := range r.HashIDs {
			if h/span != k || h-span*k != orig.HashIDs[j] {
				t.Fatalf("copy %d of request %d: id %d = %d, want %d + %d·%d", k, i/d, j, h, orig.HashIDs[j], span, k)
			}
		}
	}
	if got, want := MaxID(dup), span*(d-1)+MaxID(reqs); got != want {
		t.Errorf("MaxID(duplicated) = %d, want %d", got, want)
	}
}

func TestDuplicate_RejectsBadFactorsAndOverflow(t *testing.T) {
	for _, d := range []int{0, -3, MaxDuplicate + 1} {
		if _, err := Duplicate(nil, d); !errors.Is(err, ErrConfig) {
			t.Errorf("Duplicate(d=%d) = %v, want ErrConfig", d, err)
		}
	}
	for _, id := range []uint64{math.MaxUint64, math.MaxUint64 / 2} {
		if _, err := Duplicate([]Request{{HashIDs: []uint64{id}}}, 3); !errors.Is(err, ErrIDOverflow) {
			t.Errorf("Duplicate(max id %d, 3) = %v, want ErrIDOverflow", id, err)
		}
	}
	if _, err := Duplicate([]Request{{HashIDs: []uint64{math.MaxUint64/2 - 1}}}, 2); err != nil {
		t.Errorf("Duplicate(max id 2^63−2, 2) = %v, want nil (largest id 2^64−3 fits)", err)
	}
}

func TestPartition_IsDeterministicBalancedAndSeeded(t *testing.T) {
	const workers, n = 7, 70000
	p, err := NewPartition(workers, 42)
	if err != nil {
		t.Fatalf("NewPartition(%d, 42): %v", workers, err)
	}
	q, _ := NewPartition(workers, 42)
	other, _ := NewPartition(workers, 43)
	counts := make([]int, workers)
	differ := 0
	for i := range uint64(n) {
		w := p.Worker(i)
		if w < 0 || w >= workers {
			t.Fatalf("Worker(%d) = %d, want [0, %d)", i, w, workers)
		}
		if q.Worker(i) != w {
			t.Fatalf("Worker(%d) differs between two partitions with seed 42", i)
		}
		if other.Worker(i) != w {
			differ++
		}
		counts[w]++
	}
	// Each worker expects 10,000 ± 95 (σ); a 5σ band.
	for w, c := range counts {
		if c < n/workers-475 || c > n/workers+475 {
			t.Errorf("worker %d got %d of %d requests, want %d ± 475", w, c, n, n/workers)
		}
	}
	// Independent seeds agree on 1/7 of the indexes.
	if differ < n*6/7-1000 {
		t.Errorf("seeds 42 and 43 differ on %d of %d indexes, want about %d", differ, n, n*6/7)
	}
	if one, _ := NewPartition(1, 9); one.Worker(12345) != 0 {
		t.Errorf("one-worker Partition.Worker = %d, want 0", one.Worker(12345))
	}
	if _, err := NewPartition(0, 1); !errors.Is(err, ErrConfig) {
		t.Errorf("NewPartition(0 workers) = %v, want ErrConfig", err)
	}
}
