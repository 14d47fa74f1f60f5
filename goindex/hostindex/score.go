package hostindex

import (
	"fmt"
	"math/rand/v2"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/score"
)

// pcgStream derives the PCG stream word from the request's seed, so one
// 64-bit seed picks the whole generator state.
const pcgStream = 0x9E3779B97F4A7C15

// ScoreQuery is one routing question.
type ScoreQuery struct {
	Policy score.Policy // one of the four ABI policies
	// Locals are the prompt's local block hashes from the root; they may be
	// memory the caller owns (read during the call only).
	Locals    []uint64
	ISLTokens int // prompt tokens; 0: len(Locals) × block size
	// Cands are the candidates with their signals; Score fills their
	// CachedBlocks. With Members set they are ignored: a global index
	// offers its ready lanes instead.
	Cands       []score.Candidate
	Members     bool
	Temperature float64
	Seed        uint64 // for ties and sampling; 0: a random seed
}

// Scored is Score's answer.
type Scored struct {
	score.Result // Index: into Cands, or the lane when Members
	ID           uint64
	Rank         uint32
	CachedBlocks int
}

// DefaultPolicy returns the config's policy.
func (ix *Index) DefaultPolicy() score.Policy { return policies[ix.cfg.Policy] }

// Score probes the query's prefix and lets its policy choose among the
// candidates, each given its probe depth; it counts one probe. With
// Members, a global index offers every ready lane with its fresh signals
// (the result then names the lane); the other modes have no load signals
// to offer (score.ErrNoCandidate). No eligible candidate is
// score.ErrNoCandidate.
func (ix *Index) Score(q *ScoreQuery) (Scored, error) {
	what := "candidates"
	if q.Members {
		if ix.global == nil {
			// Members carry no load signals, and every ABI policy needs them.
			return Scored{}, fmt.Errorf("%s over the index's members: %w: members carry no load signals; pass candidates", q.Policy, score.ErrNoCandidate)
		}
		q.Cands = ix.global.candidates(q.Cands[:0], q.Locals, ix.global.clock())
		what = "ready lanes"
	} else {
		p, _ := ix.overlaps.Get().(*[]kv.Overlap)
		if p == nil {
			p = new([]kv.Overlap)
		}
		o := ix.Match((*p)[:0], q.Locals)
		SortMembers(o)
		for i := range q.Cands {
			q.Cands[i].CachedBlocks = depth(o, kv.Member{Worker: q.Cands[i].ID, Rank: q.Cands[i].Rank})
		}
		*p = o
		ix.overlaps.Put(p)
	}
	ix.CountProbe()
	isl := q.ISLTokens
	if isl == 0 {
		isl = len(q.Locals) * ix.cfg.BlockSize
	}
	seed := q.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	rng := rand.New(rand.NewPCG(seed, seed^pcgStream))
	res, err := ix.scorers[q.Policy].Score(score.Request{ISLTokens: isl, Temperature: q.Temperature}, q.Cands, rng)
	if err != nil {
		return Scored{}, fmt.Errorf("%s over %d %s: %w", q.Policy, len(q.Cands), what, err)
	}
	c := &q.Cands[res.Index]
	sc := Scored{Result: res, ID: c.ID, Rank: c.Rank, CachedBlocks: c.CachedBlocks}
	if q.Members {
		sc.Index = int(c.Rank) // the lane
	}
	return sc, nil
}
