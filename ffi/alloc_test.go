//go:build !race

package main

import "testing"

// The race detector drops sync.Pool entries at random, so the pooled
// scratch's zero-allocation claim is checked without it.

func TestProbe_DoesNotAllocateOnceWarm(t *testing.T) {
	h := openT(t, "{}")
	for w := uint64(0); w < 8; w++ {
		if rc := store(h, w, nil, []uint64{1, 2, 3, w + 10}); rc != 0 {
			t.Fatalf("store(%d) = %d", w, rc)
		}
	}
	q := []uint64{1, 2, 3, 12}
	out := make([]overlapC, 16)
	lens, counts := []inSize{4, 3}, make([]cSize, 2)
	batch := append(append([]uint64(nil), q...), q[:3]...)
	var n cSize
	var rc status
	if got := testing.AllocsPerRun(100, func() {
		rc = goindex_probe(h, u64p(q), cSize(len(q)), &out[0], cSize(len(out)), &n)
	}); got != 0 || rc != 0 || n != 8 {
		t.Errorf("goindex_probe: %v allocations per call, status %d, %d entries; want 0, 0 and 8", got, rc, n)
	}
	if got := testing.AllocsPerRun(100, func() {
		rc = goindex_probe_batch(h, u64p(batch), &lens[0], 2, &out[0], cSize(len(out)), &counts[0], &n)
	}); got != 0 || rc != 0 || n != 16 {
		t.Errorf("goindex_probe_batch: %v allocations per call, status %d, %d entries; want 0, 0 and 16", got, rc, n)
	}
}

func TestProbe_WideDoesNotAllocateOnceWarm(t *testing.T) {
	h := openT(t, "{}")
	const workers = probeStackEntries + 8
	for w := uint64(0); w < workers; w++ {
		if rc := store(h, w, nil, []uint64{1, 2}); rc != 0 {
			t.Fatalf("store(%d) = %d", w, rc)
		}
	}
	q := []uint64{1, 2}
	out := make([]overlapC, workers)
	var n cSize
	var rc status
	// AllocsPerRun's warm-up call outgrows the stack buffer (Match allocates
	// once) and moves the handle to the pool.
	if got := testing.AllocsPerRun(100, func() {
		rc = goindex_probe(h, u64p(q), cSize(len(q)), &out[0], cSize(len(out)), &n)
	}); got != 0 || rc != 0 || n != workers {
		t.Errorf("goindex_probe: %v allocations per call, status %d, %d entries; want 0, 0 and %d", got, rc, n, workers)
	}
}
