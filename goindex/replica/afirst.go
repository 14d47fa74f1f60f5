package replica

import "github.com/goindex/goindex/goindex/ckf"

// scanAFirst is the AFirst mode: the chunked scan reading row B only where
// row A leaves a lane unresolved. Per chunk of positions, with cur the
// lanes alive at its start:
//
//  1. Row A of every position is tested for cur (its lines prefetched a
//     chunk ahead, like Chunked's).
//  2. need[j], the lanes whose row B is read at j, is found without
//     waiting for any B: every lane of cur that misses row A at j, until
//     the lane has missed row A at two positions in a row (a lane that
//     left misses A at every later position, so its end and the position
//     after it are enough; a lane whose block is in B misses A alone).
//     Those B lines are prefetched together, then tested: one more round
//     of misses per chunk.
//  3. The walk: lane l hits at j iff A held it or it is in need[j] and B
//     held it. A lane alive at j that missed A and was not in need[j]
//     (it had two B hits in a row) is unknown: the chunk restarts at j
//     with the lanes alive there, so every round resolves at least j.
//
// Every hit and miss it acts on was tested, so its depths are Linear's.
func (s *Searcher) scanAFirst(depth []uint32, L int, active uint64) {
	if cap(s.hits) < L {
		s.hits = make([]uint64, L)
	}
	if cap(s.hitsB) < L {
		s.hitsB, s.needB = make([]uint64, L), make([]uint64, L)
		s.rowA, s.rowB = make([]ckf.Probe, L), make([]ckf.Probe, L)
	}
	s.fill(0, L)
	hitA, hitB, need := s.hits[:L], s.hitsB[:L], s.needB[:L]
	// rowA[j] and rowB[j] are position j's probe with both buckets A, or
	// both B: the row kernels then read one row a position.
	rowA, rowB := s.rowA[:L], s.rowB[:L]
	for j, p := range s.probes[:L] {
		rowA[j] = ckf.Probe{FP: p.FP, A: p.A, B: p.A}
		rowB[j] = ckf.Probe{FP: p.FP, A: p.B, B: p.B}
	}
	rows, stride := s.t.rows, uint64(s.t.stride)
	gs, gb := &s.groups, &s.groupsB
	gs.set(active)
	fetched := 0
	for i := 0; i < L && active != 0; {
		for ahead := min(L, i+chunkPositions+min(fetchAhead, prefetchBudgetLines/gs.n)); fetched < ahead; {
			end := min(ahead, fetched+chunkPositions)
			s.kern.prefetch(rows, rowA[fetched:end], stride, gs.list())
			s.stats.FetchedPositions += uint64(end - fetched)
			s.stats.FetchedLines += uint64((end - fetched) * gs.n)
			if i == 0 {
				s.stats.LeadLines += uint64((end - fetched) * gs.n)
			}
			fetched = end
		}
		end := min(L, i+chunkPositions)
		s.kern.test(rows, rowA[i:end], stride, gs.list(), active, hitA[i:end])
		s.stats.TestedLines += uint64((end - i) * gs.n)
		// Step 2: which B rows to read, and read them.
		collecting, prevMiss := active, uint64(0)
		for j := i; j < end; j++ {
			miss := collecting &^ hitA[j]
			need[j] = miss
			collecting &^= miss & prevMiss
			prevMiss = miss
			if miss != 0 {
				gb.set(miss)
				s.kern.prefetch(rows, rowB[j:j+1], stride, gb.list())
				s.stats.FetchedLines += uint64(gb.n)
			}
		}
		for j := i; j < end; j++ {
			hitB[j] = 0
			if need[j] != 0 {
				gb.set(need[j])
				s.kern.test(rows, rowB[j:j+1], stride, gb.list(), need[j], hitB[j:j+1])
				s.stats.TestedLines += uint64(gb.n)
			}
		}
		// Step 3: the walk, up to a position where some lane's row B was
		// not read: the next round starts there.
		for ; i < end; i++ {
			if active&^hitA[i]&^need[i] != 0 {
				break
			}
			s.stats.count(active)
			if next := active & (hitA[i] | need[i]&hitB[i]); next != active {
				setDepth(depth, active&^next, i)
				if active = next; active == 0 {
					return
				}
			}
		}
		gs.set(active)
	}
	setDepth(depth, active, L)
}
