package hostindex

import (
	"fmt"
	"math/rand/v2"

	"github.com/goindex/goindex/goindex/follow"
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
	// Open makes Score fail open (follow.Open): when no candidate has the
	// signals the policy needs it answers anyway, degraded, instead of
	// score.ErrNoCandidate.
	Open bool
}

// Scored is Score's answer.
type Scored struct {
	score.Result // Index: into Cands, or the lane when Members
	ID           uint64
	Rank         uint32
	CachedBlocks int
	// Degraded says why the choice was made without fresh signals (only
	// with ScoreQuery.Open): on the last known ones, or the default.
	Degraded follow.Reason
}

// DefaultPolicy returns the config's policy.
func (ix *Index) DefaultPolicy() score.Policy { return policies[ix.cfg.Policy] }

// Score probes the query's prefix and lets its policy choose among the
// candidates, each given its probe depth; it counts one probe. With
// Members, a global index offers every ready lane with its fresh signals
// (the result then names the lane); the other modes have no load signals
// to offer (score.ErrNoCandidate). No eligible candidate is
// score.ErrNoCandidate, unless Open: a global index's members are then
// every lane it knows (also with no replica attached, from the last file's
// DC list) with its last known signals and no cached blocks, and the lane
// of "default_dc" (or the first) when none has any; given candidates fall
// back to the one whose ID is "default_dc" (or the first). Only a query
// with no candidate at all still fails.
func (ix *Index) Score(q *ScoreQuery) (Scored, error) {
	what := "candidates"
	var lastKnown func() []score.Candidate
	var reason func() follow.Reason
	def := 0
	if q.Members {
		if ix.global == nil {
			// Members carry no load signals, and every ABI policy needs them.
			return Scored{}, fmt.Errorf("%s over the index's members: %w: members carry no load signals; pass candidates", q.Policy, score.ErrNoCandidate)
		}
		now := ix.global.clock()
		q.Cands = ix.global.candidates(q.Cands[:0], q.Locals, now)
		what = "ready lanes"
		lastKnown = func() []score.Candidate { return ix.global.known(nil, now) }
		def = ix.global.laneOf(ix.cfg.DefaultDC)
		reason = ix.global.degraded
	} else {
		p, _ := ix.overlaps.Get().(*[]kv.Overlap)
		if p == nil {
			p = new([]kv.Overlap)
		}
		o := ix.Match((*p)[:0], q.Locals)
		SortMembers(o)
		for i := range q.Cands {
			q.Cands[i].CachedBlocks = depth(o, kv.Member{Worker: q.Cands[i].ID, Rank: q.Cands[i].Rank})
			if q.Cands[i].ID == ix.cfg.DefaultDC && def == 0 {
				def = i
			}
		}
		*p = o
		ix.overlaps.Put(p)
		reason = func() follow.Reason { return follow.SignalsStale }
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
	req := score.Request{ISLTokens: isl, Temperature: q.Temperature}
	sc := ix.scorers[q.Policy]
	var res score.Result
	var err error
	step := follow.Fresh
	if q.Open {
		res, q.Cands, step, err = follow.Open(sc, req, q.Cands, lastKnown, def, rng)
	} else {
		res, err = sc.Score(req, q.Cands, rng)
	}
	if err != nil {
		return Scored{}, fmt.Errorf("%s over %d %s: %w", q.Policy, len(q.Cands), what, err)
	}
	c := &q.Cands[res.Index]
	out := Scored{Result: res, ID: c.ID, Rank: c.Rank, CachedBlocks: c.CachedBlocks}
	if step != follow.Fresh {
		out.Degraded = reason()
		ix.degraded.Add(1)
	}
	if q.Members {
		out.Index = int(c.Rank) // the lane
	}
	return out, nil
}
