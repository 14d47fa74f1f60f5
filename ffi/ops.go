package main

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/score"
)

// scratch is one call's working memory: a batch's, a score's, or a probe's
// whose result outgrew goindex_probe's stack buffer. Handles pool them, so
// such a call whose output fits allocates nothing once the pool is warm.
type scratch struct {
	overlaps []kv.Overlap
	lens     []int // each query's length in locals
	ends     []int // end of each query's entries in overlaps
}

func (h *handle) getScratch() *scratch {
	if s, ok := h.pool.Get().(*scratch); ok {
		return s
	}
	return new(scratch)
}

func (h *handle) putScratch(s *scratch) { h.pool.Put(s) }

// sortMembers orders overlaps by (worker, rank). A probe reports one entry
// per member or lane, a few dozen at most in practice and often in order
// already (global mode's lanes when "dcs" is sorted, radix's entries of one
// depth), so one pass finds the sorted prefix first and a linear insertion
// places the rest; longer unsorted results fall back to pdqsort
// (BenchmarkSortMembers, BENCHMARKS.md).
func sortMembers(o []kv.Overlap) {
	i := 1
	for i < len(o) && !o[i].Member.Less(o[i-1].Member) {
		i++
	}
	if i >= len(o) {
		return
	}
	if len(o) > insertionSortMax {
		slices.SortFunc(o, byMember)
		return
	}
	for ; i < len(o); i++ {
		v, j := o[i], i
		for j > 0 && v.Member.Less(o[j-1].Member) {
			o[j] = o[j-1]
			j--
		}
		o[j] = v
	}
}

// insertionSortMax is the longest result sortMembers sorts by insertion.
const insertionSortMax = 32

func byMember(a, b kv.Overlap) int {
	if a.Member.Worker != b.Member.Worker {
		return cmp.Compare(a.Member.Worker, b.Member.Worker)
	}
	return cmp.Compare(a.Member.Rank, b.Member.Rank)
}

// probeOne matches one query and leaves its entries, sorted by (worker,
// rank), in s.overlaps. locals may be host memory: Match only reads it
// during the call.
func (h *handle) probeOne(s *scratch, locals []uint64) error {
	ix := h.ix.Load()
	if ix == nil {
		return errHandle
	}
	s.overlaps = ix.match(s.overlaps[:0], locals)
	sortMembers(s.overlaps)
	h.probes.Add(1)
	return nil
}

// probe matches the queries locals[0:lens[0]], locals[lens[0]:lens[0]+lens[1]],
// … and leaves in s.overlaps each query's entries sorted by (worker, rank),
// query q's ending at s.ends[q].
func (h *handle) probe(s *scratch, locals []uint64, lens []int) error {
	ix := h.ix.Load()
	if ix == nil {
		return errHandle
	}
	s.overlaps, s.ends = s.overlaps[:0], s.ends[:0]
	off := 0
	for _, n := range lens {
		start := len(s.overlaps)
		s.overlaps = ix.match(s.overlaps, locals[off:off+n])
		sortMembers(s.overlaps[start:])
		s.ends = append(s.ends, len(s.overlaps))
		off += n
	}
	h.probes.Add(1)
	return nil
}

// depth returns m's entry in overlaps sorted by member, 0 when absent.
func depth(overlaps []kv.Overlap, m kv.Member) int {
	i, ok := slices.BinarySearchFunc(overlaps, kv.Overlap{Member: m}, byMember)
	if !ok {
		return 0
	}
	return overlaps[i].Blocks
}

// pcgStream derives the PCG stream word from the request's seed, so one
// 64-bit seed picks the whole generator state.
const pcgStream = 0x9E3779B97F4A7C15

// scoreQuery is one goindex_score request in Go memory.
type scoreQuery struct {
	policy      score.Policy
	locals      []uint64 // a view of host memory, read during the call only
	islTokens   int      // 0: len(locals) × block size
	cands       []score.Candidate
	members     bool // cands was NULL: every member or ready lane the index knows
	temperature float64
	seed        uint64 // 0: a random seed
}

// scored is a goindex_score result in Go memory.
type scored struct {
	res          score.Result
	id           uint64
	rank         uint32
	cachedBlocks int
}

// score probes the request's prefix and lets the policy's scorer choose
// among the candidates, each given its probe depth. Without candidates, a
// global handle offers every ready lane with its fresh signals (the result
// then names the lane); the other modes have no load signals to offer.
func (h *handle) score(s *scratch, q *scoreQuery) (scored, error) {
	what := "candidates"
	if q.members {
		ix := h.ix.Load()
		if ix == nil {
			return scored{}, errHandle
		}
		if ix.global == nil {
			// Members carry no load signals, and every ABI policy needs them.
			return scored{}, fmt.Errorf("%s over the handle's members: %w: members carry no load signals; pass candidates", q.policy, score.ErrNoCandidate)
		}
		q.cands = ix.global.candidates(q.cands[:0], q.locals, ix.global.now())
		h.probes.Add(1)
		what = "ready lanes"
	} else {
		if err := h.probeOne(s, q.locals); err != nil {
			return scored{}, err
		}
		for i := range q.cands {
			q.cands[i].CachedBlocks = depth(s.overlaps, kv.Member{Worker: q.cands[i].ID, Rank: q.cands[i].Rank})
		}
	}
	isl := q.islTokens
	if isl == 0 {
		isl = len(q.locals) * h.cfg.BlockSize
	}
	seed := q.seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	rng := rand.New(rand.NewPCG(seed, seed^pcgStream))
	res, err := h.scorers[q.policy].Score(score.Request{ISLTokens: isl, Temperature: q.temperature}, q.cands, rng)
	if err != nil {
		return scored{}, fmt.Errorf("%s over %d %s: %w", q.policy, len(q.cands), what, err)
	}
	c := &q.cands[res.Index]
	sc := scored{res: res, id: c.ID, rank: c.Rank, cachedBlocks: c.CachedBlocks}
	if q.members {
		sc.res.Index = int(c.Rank) // the lane
	}
	return sc, nil
}

// hashTokens returns the local block hashes of tokens with the handle's
// block size and the given salts, appended to dst.
func (h *handle) hashTokens(dst []uint64, tokens []uint32, lora, namespace string) ([]uint64, error) {
	hs, err := dynamo.NewHasher(dynamo.HasherConfig{BlockSize: h.cfg.BlockSize, LoRA: lora, Namespace: namespace})
	if err != nil {
		return dst, fmt.Errorf("%w: %w", errInternal, err)
	}
	return hs.AppendLocal(dst, tokens), nil
}
