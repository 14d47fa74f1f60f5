package parity

import (
	"fmt"
	"slices"

	"github.com/goindex/goindex/goindex/kv"
)

// fpValues is the number of non-zero fingerprints; a probe of an absent hash against one
// lane falsely hits with p ≈ 8α/(2^16 − 1) at slot occupancy α (spec §7:
// two buckets of four slots, 65,535 non-zero fingerprints).
const fpValues = 1<<16 - 1

// Result is what Measure found over one set of queries.
type Result struct {
	Fill    FillReport `json:"fill"`
	Queries int        `json:"queries"`
	// Pairs counts (query, member) results compared: every member holding
	// blocks, for every query.
	Pairs int `json:"pairs"`

	// Underestimates counts pairs where the CKF reported fewer blocks than
	// the exact index and no capacity omission explains it. The CKF
	// promises none.
	Underestimates int `json:"underestimates"`
	// CapacityMisses counts pairs below the exact depth because a block on
	// the exact path was never admitted to the filter (spec §4.7).
	CapacityMisses int `json:"capacity_misses"`
	// RejectedMisses counts pairs below the exact depth because the exact
	// path holds a block the member does not own: it came from an event
	// the exact index accepted and the CKF's producer rules reject (say, a
	// start position without a parent). ApplyCounts shows the rejections.
	RejectedMisses int `json:"rejected_misses"`
	// Overcounts counts pairs where the CKF reported more blocks than the
	// exact index; MeanOvercountBlocks is their mean excess and
	// MaxOvercountBlocks the largest.
	Overcounts          int     `json:"overcounts"`
	MeanOvercountBlocks float64 `json:"mean_overcount_blocks"`
	MaxOvercountBlocks  int     `json:"max_overcount_blocks"`
	// DepthError is the histogram of CKF − exact depth over all pairs.
	DepthError []ErrorBin `json:"depth_error"`

	Best BestFigures  `json:"best"`
	FP   ProbeFigures `json:"probes"`

	// Convenience copies of the headline figures.
	WrongBest int     `json:"wrong_best"`
	FPRate    float64 `json:"fp_rate"`
}

// ErrorBin is one bar of the depth-error histogram.
type ErrorBin struct {
	Error int `json:"error"` // CKF − exact, in blocks
	Pairs int `json:"pairs"`
}

// BestFigures compares the best member of each query. The exact best set
// holds every member at the exact index's largest depth (every member when
// nobody matches); the CKF best set every member at the CKF's largest
// depth. A router picks one member of the CKF set, ties broken its own way,
// so: Agree when every member of the CKF set is exact-best (any tie-break is
// right), TieRisk when some are and some are not (the tie-break decides),
// WrongBest when none is (every tie-break loses blocks).
type BestFigures struct {
	Agree     int `json:"agree"`
	TieRisk   int `json:"tie_risk"`
	WrongBest int `json:"wrong_best"`
	// ExactTies counts queries whose exact best set has several members
	// with a positive depth.
	ExactTies int `json:"exact_ties"`
	// Phantom counts queries nobody matches exactly where the CKF reports a
	// positive depth (no choice loses blocks; the router just sees a saving
	// that is not there).
	Phantom int `json:"phantom"`
	// WrongBestRate is WrongBest / queries; LostBlocks the blocks a wrong
	// choice loses against the exact best, summed over wrong queries.
	WrongBestRate float64 `json:"wrong_best_rate"`
	LostBlocks    int     `json:"lost_blocks"`
}

// ProbeFigures test every distinct canonical hash of the queries against
// every lane alone (a one-block query of it) and classify the answer
// against the exact ownership of the lane's member. Each canonical counts
// once per Measure, so the probes are independent samples however much the
// queries share (one set entry per distinct canonical).
type ProbeFigures struct {
	// Negatives counts (position, lane) probes of a canonical the member
	// does not own; FalsePositives those the lane still hit. FPRate is
	// their ratio, ExpectedFPRate the mean of 8α/65535 over the same
	// probes (α of the probed lane), and FPRatio FPRate / ExpectedFPRate.
	Negatives      int     `json:"negatives"`
	FalsePositives int     `json:"false_positives"`
	FPRate         float64 `json:"fp_rate"`
	ExpectedFPRate float64 `json:"expected_fp_rate"`
	FPRatio        float64 `json:"fp_ratio"`
	// Positives counts probes of an owned canonical; FalseNegatives those
	// the lane missed although the block was admitted (the CKF promises
	// none), OmissionMisses those missed because it never was.
	Positives      int `json:"positives"`
	FalseNegatives int `json:"false_negatives"`
	OmissionMisses int `json:"omission_misses"`
	// UnreachedOwned counts positives at or past the member's exact depth:
	// blocks the member owns that the exact tree does not let it reach (a
	// removed ancestor; the filter has no tree and still holds them).
	UnreachedOwned int `json:"unreached_owned"`
	// ExactBeyondOwnership counts (position, member) pairs the exact index
	// reaches that the member does not own: blocks of events the exact
	// index accepted and the producer rules reject (see RejectedMisses).
	ExactBeyondOwnership int `json:"exact_beyond_ownership"`
}

// Failed reports whether the result breaks the CKF's guarantee: an
// underestimate or a false negative of an admitted block.
func (r *Result) Failed() bool { return r.Underestimates > 0 || r.FP.FalseNegatives > 0 }

// measureScratch is Measure's per-query state, by member index.
type measureScratch struct {
	exact, lossy []int
	active       []int // member indices holding blocks
	alpha        []float64
	chain        []uint64
	errs         map[int]int
	probed       map[uint64]struct{} // canonicals already probed
}

// Measure runs every query (local hashes from the root; an empty query is
// skipped) through both indexes and returns the comparison. It changes
// nothing, so it may be repeated after another Fill.
func (s *Study) Measure(queries func(yield func([]uint64) bool)) (Result, error) {
	var r Result
	sc := &measureScratch{errs: map[int]int{}, probed: map[uint64]struct{}{}}
	slots := float64(4 * s.buckets)
	for i, h := range s.held {
		if !h.empty() {
			sc.active = append(sc.active, i)
		}
	}
	sc.exact = make([]int, len(s.held))
	sc.lossy = make([]int, len(s.held))
	sc.alpha = make([]float64, len(s.held))
	for _, i := range sc.active {
		sc.alpha[i] = float64(s.held[i].resident()) / slots
	}
	var overBlocks int
	var expected float64
	for q := range queries {
		if len(q) == 0 {
			continue
		}
		r.Queries++
		s.depths(sc, q)
		sc.chain = kv.AppendChain(sc.chain[:0], false, 0, q)
		for _, i := range sc.active {
			r.Pairs++
			d := sc.lossy[i] - sc.exact[i]
			sc.errs[d]++
			switch {
			case d > 0:
				r.Overcounts++
				overBlocks += d
				r.MaxOvercountBlocks = max(r.MaxOvercountBlocks, d)
			case d < 0:
				switch path := sc.chain[:sc.exact[i]]; {
				case s.omittedOn(s.held[i], path):
					r.CapacityMisses++
				case !s.ownsAll(s.held[i], path):
					r.RejectedMisses++
				default:
					r.Underestimates++
				}
			}
		}
		s.compareBest(&r.Best, sc)
		expected += s.probePositions(&r.FP, sc)
	}
	r.MeanOvercountBlocks = ratio(overBlocks, r.Overcounts)
	for e, n := range sc.errs {
		r.DepthError = append(r.DepthError, ErrorBin{Error: e, Pairs: n})
	}
	slices.SortFunc(r.DepthError, func(a, b ErrorBin) int { return a.Error - b.Error })
	r.Best.WrongBestRate = ratio(r.Best.WrongBest, r.Queries)
	r.FP.FPRate = ratio(r.FP.FalsePositives, r.FP.Negatives)
	if r.FP.Negatives > 0 {
		r.FP.ExpectedFPRate = expected / float64(r.FP.Negatives)
	}
	if r.FP.ExpectedFPRate > 0 {
		r.FP.FPRatio = r.FP.FPRate / r.FP.ExpectedFPRate
	}
	r.WrongBest, r.FPRate = r.Best.WrongBest, r.FP.FPRate
	if r.Pairs > 0 && s.lossy.Stats().Members != len(sc.active) {
		return r, fmt.Errorf("%w: the ckf index has %d members, the study %d", ErrDiverged, s.lossy.Stats().Members, len(sc.active))
	}
	return r, nil
}

// depths fills sc.exact and sc.lossy with every member's depth for q.
func (s *Study) depths(sc *measureScratch, q []uint64) {
	for _, i := range sc.active {
		sc.exact[i], sc.lossy[i] = 0, 0
	}
	s.ov = s.exact.Match(s.ov[:0], q)
	for _, o := range s.ov {
		sc.exact[s.members[o.Member]] = o.Blocks
	}
	s.ov = s.lossy.Match(s.ov[:0], q)
	for _, o := range s.ov {
		sc.lossy[s.members[o.Member]] = o.Blocks
	}
}

// ownsAll reports whether h owns every canonical of path.
func (s *Study) ownsAll(h *holding, path []uint64) bool {
	for _, c := range path {
		if !h.owns(c) {
			return false
		}
	}
	return true
}

// omittedOn reports whether a canonical of path was not admitted to h's
// lane.
func (s *Study) omittedOn(h *holding, path []uint64) bool {
	if len(h.omitted) == 0 {
		return false
	}
	for _, c := range path {
		if _, ok := h.omitted[c]; ok {
			return true
		}
	}
	return false
}

// compareBest classifies one query's best member (see BestFigures).
func (s *Study) compareBest(b *BestFigures, sc *measureScratch) {
	bestE, bestC := 0, 0
	for _, i := range sc.active {
		bestE, bestC = max(bestE, sc.exact[i]), max(bestC, sc.lossy[i])
	}
	if bestE == 0 && bestC > 0 {
		b.Phantom++
	}
	exactBest, right, wrong, lost := 0, 0, 0, 0
	for _, i := range sc.active {
		if sc.exact[i] == bestE {
			exactBest++
		}
		if sc.lossy[i] != bestC {
			continue
		}
		if sc.exact[i] == bestE {
			right++
		} else {
			wrong++
			lost = max(lost, bestE-sc.exact[i])
		}
	}
	if bestE > 0 && exactBest > 1 {
		b.ExactTies++
	}
	switch {
	case wrong == 0:
		b.Agree++
	case right > 0:
		b.TieRisk++
	default:
		b.WrongBest++
		b.LostBlocks += lost
	}
}

// probePositions probes every position of the query whose canonical no
// earlier query of this Measure had, alone, in every lane, and classifies
// each answer; it returns the summed expected false-positive
// probability of the negatives.
func (s *Study) probePositions(f *ProbeFigures, sc *measureScratch) float64 {
	var expected float64
	for pos, c := range sc.chain {
		if _, ok := sc.probed[c]; ok {
			continue
		}
		sc.probed[c] = struct{}{}
		s.ov = s.lossy.Match(s.ov[:0], sc.chain[pos:pos+1])
		for _, i := range sc.active {
			h := s.held[i]
			hit := false
			for _, o := range s.ov {
				if o.Member == h.member {
					hit = true
					break
				}
			}
			owned := h.owns(c)
			if !owned {
				if pos < sc.exact[i] {
					f.ExactBeyondOwnership++
				}
				f.Negatives++
				expected += 8 * sc.alpha[i] / fpValues
				if hit {
					f.FalsePositives++
				}
				continue
			}
			f.Positives++
			if pos >= sc.exact[i] {
				f.UnreachedOwned++
			}
			if !hit {
				if _, ok := h.omitted[c]; ok {
					f.OmissionMisses++
				} else {
					f.FalseNegatives++
				}
			}
		}
	}
	return expected
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
