package replica

import "math/bits"

// membership is what the reference searches (linear and bisection) read:
// the lane mask of one query position, and a hint to fetch its rows. The
// table-backed one is tableProbes; the tests add a pure bitmap one, so the
// algorithms are pinned against spec §7's vectors independently of hashing.
type membership interface {
	// probe returns the lanes among lanes that hit at pos.
	probe(pos int, lanes uint64) uint64
	// prefetch brings pos's rows for lanes towards the cache.
	prefetch(pos int, lanes uint64)
}

// Stats counts a Searcher's work since it was made. The fallback counters
// are spec §7's terminal-branch stats and stay 0 outside Bisect mode.
type Stats struct {
	// Searches is the number of Search and SearchProbes calls.
	Searches uint64
	// Probes is the number of position probes (one per position per group
	// of lanes tested together), in every mode.
	Probes uint64
	// LaneProbes sums, over all probes, the lanes taking part.
	LaneProbes uint64
	// LeftEdgeLanes counts lanes whose verification window missed at its
	// left edge (marked for the terminal-branch fallback).
	LeftEdgeLanes uint64
	// ActivatedLanes counts marked lanes whose fallback scan ran.
	ActivatedLanes uint64
	// FallbackProbes counts the probes of fallback scans.
	FallbackProbes uint64
	// FallbackLaneProbes sums the lanes taking part in fallback probes.
	FallbackLaneProbes uint64
	// ProvenanceSkips counts marked lanes skipped because their last hit
	// predecessor lay inside the window (pred ≥ vstart).
	ProvenanceSkips uint64
	// The chunked scans' memory traffic (Chunked and AFirst; 0 in the
	// other modes). FetchedPositions counts positions whose rows were
	// prefetched; FetchedLines the lines those prefetches named (the lane
	// groups still read, in rows A and B, or in row A and then row B only
	// where AFirst reads it) and TestedLines the lines the tests read. A
	// position is fetched once, so FetchedPositions − Probes is the
	// lookahead a search fetched and never tested.
	FetchedPositions, FetchedLines, TestedLines uint64
	// LeadLines sums, over searches, the lines prefetched before the
	// search's first test: the misses the search has in flight at once
	// before it waits for any.
	LeadLines uint64
}

// count records one probe of the given participants.
func (st *Stats) count(lanes uint64) {
	st.Probes++
	st.LaneProbes += uint64(bits.OnesCount64(lanes))
}

// setDepth writes d into depth[l] for every lane l in lanes.
func setDepth(depth []uint32, lanes uint64, d int) {
	for ; lanes != 0; lanes &= lanes - 1 {
		depth[bits.TrailingZeros64(lanes)] = uint32(d)
	}
}

// linear is the plain reference (spec §7): active = M; for each position in
// order, active &= probe(pos); a lane's depth is the length of its run of
// hits from position 0. It is the differential oracle of the other modes.
func linear(m membership, st *Stats, depth []uint32, L int, lanes uint64) {
	active := lanes
	for pos := 0; pos < L && active != 0; pos++ {
		st.count(active)
		next := active & m.probe(pos, active)
		setDepth(depth, active&^next, pos)
		active = next
	}
	setDepth(depth, active, L)
}

// bisector holds the per-lane state of one bisection search; it lives in
// the Searcher so a search does not allocate.
type bisector struct {
	lower, pred, upper [MaxLanes]int
	vstart             [MaxLanes]int
	groupPos           [MaxLanes]int
	groupLanes         [MaxLanes]uint64
	// sweep's scratch: lanes entering and leaving at each position, grown
	// to the longest query seen.
	enter, leave []uint64
}

// bisect is upstream's search shape, spec §7 steps 1–6 exactly: galloping
// from position 1 by doubling, grouped binary search (one probe per distinct
// midpoint per round), a verification window of the w positions below each
// tentative depth, and the terminal-branch fallback for lanes whose window
// missed at its left edge. depth[l] ends as the smallest observed position
// at which l missed, or L.
func (bs *bisector) bisect(m membership, st *Stats, depth []uint32, L int, lanes uint64, w int) {
	if L == 0 || lanes == 0 {
		return // every depth is already 0
	}
	st.count(lanes)
	active := lanes & m.probe(0, lanes)
	if active == 0 {
		return
	}
	for a := active; a != 0; a &= a - 1 {
		l := bits.TrailingZeros64(a)
		bs.lower[l], bs.pred[l], bs.upper[l] = 0, 0, L
	}

	// Galloping.
	sampling := active
	if L > 1 {
		m.prefetch(1, sampling)
	}
	for pos := 1; pos < L && sampling != 0; pos *= 2 {
		if 2*pos < L {
			m.prefetch(2*pos, sampling)
		}
		st.count(sampling)
		hit := sampling & m.probe(pos, sampling)
		for h := hit; h != 0; h &= h - 1 {
			l := bits.TrailingZeros64(h)
			bs.pred[l], bs.lower[l] = bs.lower[l], pos
		}
		for miss := sampling &^ hit; miss != 0; miss &= miss - 1 {
			bs.upper[bits.TrailingZeros64(miss)] = pos
		}
		sampling = hit
	}

	// Grouped binary search.
	for {
		groups := 0
		for a := active; a != 0; a &= a - 1 {
			l := bits.TrailingZeros64(a)
			if bs.upper[l]-bs.lower[l] <= 1 {
				continue
			}
			mid := bs.lower[l] + (bs.upper[l]-bs.lower[l])/2
			g := 0
			for g < groups && bs.groupPos[g] != mid {
				g++
			}
			if g == groups {
				bs.groupPos[g], bs.groupLanes[g] = mid, 0
				groups++
			}
			bs.groupLanes[g] |= 1 << uint(l)
		}
		if groups == 0 {
			break
		}
		for g := 0; g < groups; g++ {
			m.prefetch(bs.groupPos[g], bs.groupLanes[g])
		}
		for g := 0; g < groups; g++ {
			mid, members := bs.groupPos[g], bs.groupLanes[g]
			st.count(members)
			hit := members & m.probe(mid, members)
			for h := hit; h != 0; h &= h - 1 {
				l := bits.TrailingZeros64(h)
				bs.pred[l], bs.lower[l] = bs.lower[l], mid
			}
			for miss := members &^ hit; miss != 0; miss &= miss - 1 {
				bs.upper[bits.TrailingZeros64(miss)] = mid
			}
		}
	}

	// Tentative depth, then the verification window.
	bs.grow(L)
	for a := active; a != 0; a &= a - 1 {
		l := bits.TrailingZeros64(a)
		depth[l] = uint32(bs.upper[l])
		bs.vstart[l] = max(0, bs.upper[l]-w)
		bs.enter[bs.vstart[l]] |= 1 << uint(l)
		bs.leave[bs.upper[l]] |= 1 << uint(l)
	}
	missed := bs.sweep(m, st, depth, active)
	var marked uint64
	for mi := missed; mi != 0; mi &= mi - 1 {
		l := bits.TrailingZeros64(mi)
		if int(depth[l]) == bs.vstart[l] {
			marked |= 1 << uint(l)
		}
	}

	// Terminal-branch fallback.
	st.LeftEdgeLanes += uint64(bits.OnesCount64(marked))
	var scanning uint64
	for mk := marked; mk != 0; mk &= mk - 1 {
		l := bits.TrailingZeros64(mk)
		switch {
		case bs.pred[l] >= bs.vstart[l]:
			st.ProvenanceSkips++
		case bs.pred[l]+1 == bs.vstart[l]:
			// Nothing lies between the predecessor and the window.
		default:
			scanning |= 1 << uint(l)
			bs.enter[bs.pred[l]+1] |= 1 << uint(l)
			bs.leave[bs.vstart[l]] |= 1 << uint(l)
		}
	}
	if scanning != 0 {
		st.ActivatedLanes += uint64(bits.OnesCount64(scanning))
		before := *st
		bs.sweep(m, st, depth, scanning)
		st.FallbackProbes += st.Probes - before.Probes
		st.FallbackLaneProbes += st.LaneProbes - before.LaneProbes
	}
}

// grow makes the sweep scratch hold positions 0…L.
func (bs *bisector) grow(L int) {
	if len(bs.enter) <= L {
		bs.enter = make([]uint64, L+1)
		bs.leave = make([]uint64, L+1)
	}
}

// sweep scans, for every lane l in lanes, the positions of its interval
// [s, e) (l's bit in enter[s] and leave[e], which sweep clears again) in
// ascending order, probing each position once for all lanes whose interval
// holds it and that have not missed yet. A lane's first miss sets its depth
// to that position and ends its scan; a lane that never misses keeps its
// depth. It returns the lanes that missed.
func (bs *bisector) sweep(m membership, st *Stats, depth []uint32, lanes uint64) uint64 {
	var running, missed uint64
	pending := lanes
	for pos := 0; pending != 0 || running != 0; pos++ {
		running = (running | bs.enter[pos]) &^ bs.leave[pos]
		pending &^= bs.enter[pos]
		bs.enter[pos], bs.leave[pos] = 0, 0
		part := running &^ missed
		if part == 0 {
			continue
		}
		m.prefetch(pos, part)
		st.count(part)
		miss := part &^ m.probe(pos, part)
		setDepth(depth, miss, pos)
		missed |= miss
	}
	return missed
}
