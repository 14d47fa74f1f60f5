package route

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/follow"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/score"
)

// Prompt is what routing needs to know about a request.
type Prompt struct {
	// Tokens are the prompt's token ids; with HasTokens false the prompt
	// is unknown and the request is routed load-only.
	Tokens    []uint32
	HasTokens bool
	// LoRA and Namespace salt the local hashes (dynamo-compat §1.3).
	LoRA, Namespace string
}

// Choice is one DC a request may go to, with what the scorer saw.
type Choice struct {
	DC           DC
	Index        int         // the DC's position in Config.DCs
	Cost         float64     // the policy's cost: ms for ttft, blocks for credit and load-only
	Parts        score.Parts // ttft's terms; zero under other policies
	CachedTokens int         // the DC's cached prefix of the prompt, in tokens
	HasRTT       bool
	RTT          time.Duration
	weights      score.Weights // the calibration weights Parts were scaled by
}

// Decision is where a request goes: Order lists the eligible DCs to try,
// the scorer's pick first, then by increasing cost (cyclic order after the
// pick for round-robin; single-dc lists only its home).
type Decision struct {
	Policy       score.Policy // the policy applied: load-only when the prompt is unknown
	Order        []Choice
	Eligible     int    // DCs with every signal the policy needs
	PromptTokens int    // the prompt's length (0 when unknown)
	PromptBlocks int    // full blocks hashed and searched
	Generation   uint64 // replica generation the signals came from; 0: none attached
	// FleetUtilization is the fleet's prefill utilization the ttft cost
	// priced (Config.PriceOthers); 0 otherwise.
	FleetUtilization float64
	// Degraded says why no DC had the fresh signals the policy needs
	// (follow.NotDegraded when some did): the pick was then made on the
	// DCs' last known load and RTT with cached blocks ignored, or, with
	// none known, is Config.DefaultDC.
	Degraded follow.Reason
}

// unixMs is t in ms since the Unix epoch, score.Demand's clock.
func unixMs(t time.Time) float64 { return float64(t.UnixNano()) / 1e6 }

// Decide scores every configured DC for p from the current replica and
// returns the DCs to try. When no DC has the fresh signals the policy needs
// it fails open (follow.Open): the policy over the DCs' last known load and
// RTT, cached blocks ignored, else Config.DefaultDC, with Degraded saying
// why; with Config.FailClosed it returns ErrNoEligibleDC instead (and the
// Decision, whose Eligible is 0). Unless FailClosed, Order ends with every
// DC the policy found ineligible (DefaultDC first), so a request fails
// only when no DC can be reached. It may run concurrently.
func (rt *Router) Decide(p *Prompt) (*Decision, error) {
	scorer := rt.scorer
	if !p.HasTokens && rt.loadOnly != nil {
		scorer = rt.loadOnly
	}
	d := &Decision{Policy: scorer.Config().Policy}
	var hashes []uint64
	if p.HasTokens {
		d.PromptTokens = len(p.Tokens)
		h := rt.hasher
		if p.LoRA != "" || p.Namespace != "" {
			var err error
			if h, err = dynamo.NewHasher(dynamo.HasherConfig{BlockSize: rt.cfg.BlockSize, LoRA: p.LoRA, Namespace: p.Namespace}); err != nil {
				return nil, fmt.Errorf("route: hasher: %w", err)
			}
		}
		locals := h.AppendLocal(nil, p.Tokens)
		hashes = kv.AppendChain(locals[:0:0], false, 0, locals)
		d.PromptBlocks = len(hashes)
	}
	obs := make([]laneObs, len(rt.cfg.DCs))
	d.Generation = rt.replica.observe(obs, hashes)
	now := time.Now()
	cands := rt.candidates(obs, now, rt.cfg.MaxStaleness)
	req := score.Request{ISLTokens: d.PromptTokens, Temperature: rt.cfg.Temperature}
	if rt.demand != nil && scorer.Config().Policy == score.TTFT {
		req.FleetUtilization = rt.demand.Utilization(unixMs(now), scorer.FleetTokensPerMs(cands))
		d.FleetUtilization = req.FleetUtilization
	}
	rng := rt.rngs.Get().(*rand.Rand)
	defer rt.rngs.Put(rng)
	if rt.cfg.FailClosed {
		res, err := scorer.Score(req, cands, rng)
		if errors.Is(err, score.ErrNoCandidate) {
			return d, fmt.Errorf("%w under %v: %w", ErrNoEligibleDC, d.Policy, err)
		}
		if err != nil {
			return nil, fmt.Errorf("route: score: %w", err)
		}
		d.Eligible = res.Eligible
		d.Order = rt.order(scorer, req, cands, res)
		return d, nil
	}
	lastKnown := func() []score.Candidate {
		known := rt.candidates(obs, now, 0)
		for i := range known {
			known[i].CachedBlocks = 0
		}
		return known
	}
	res, used, step, err := follow.Open(scorer, req, cands, lastKnown, rt.defaultDC, rng)
	if err != nil {
		return nil, fmt.Errorf("route: score: %w", err)
	}
	if step != follow.Fresh {
		d.Degraded = follow.ReasonOf(rt.replica.health())
		rt.stats.degraded[d.Degraded].Add(1)
	}
	d.Eligible = res.Eligible
	d.Order = rt.order(scorer, req, used, res)
	return d, nil
}

// candidates turns the lanes' observations into scorer candidates, one per
// DC in configuration order (Rank is the DC's index). A signal is present
// only when the consumer measured it within maxAge (≤ 0: whatever its age:
// follow.SetSignals); a DC without a lane, or whose lane is not ready, has
// no cached blocks. Under ttft each lane's load record also feeds the
// DC's insert rate, and a DC with load gets the eviction factor of its
// capacity at that rate (follow.Turnover; 0 while unknown).
func (rt *Router) candidates(obs []laneObs, now time.Time, maxAge time.Duration) []score.Candidate {
	cands := make([]score.Candidate, len(obs))
	for i, o := range obs {
		c := score.Candidate{ID: rt.cfg.DCs[i].ID, Rank: uint32(i)}
		if o.lane >= 0 {
			if o.ready {
				c.CachedBlocks = int(o.depth)
			}
			follow.SetSignals(&c, &o.info, now, maxAge)
			if rt.turn != nil {
				rt.turn.SetEvictionFactor(&c, i, &o.info.Load)
			}
		}
		if rt.cal != nil {
			c.ResidenceMs = rt.cal[i].ResidenceMs()
			c.HoldMs = rt.hold.HoldMs(i)
			if rt.cfg.Calibrate {
				c.Weights = rt.cal[i].Weights()
			}
		}
		cands[i] = c
	}
	return cands
}

// order lists the DCs to try: res's pick, then the other eligible ones by
// cost (ties in configuration order); round-robin goes on in cyclic order
// after its pick; single-dc has only its home. Unless FailClosed (or
// single-dc), every DC not listed yet follows, DefaultDC first, then in
// configuration order: a last resort, so a request fails only when no DC
// can be reached.
func (rt *Router) order(scorer *score.Scorer, req score.Request, cands []score.Candidate, res score.Result) []Choice {
	out := rt.ranked(scorer, req, cands, res)
	if rt.cfg.FailClosed || scorer.Config().Policy == score.SingleDC || len(out) == len(cands) {
		return out
	}
	listed := make([]bool, len(rt.cfg.DCs))
	for _, c := range out {
		listed[c.Index] = true
	}
	for i := -1; i < len(cands); i++ {
		j := i
		if i < 0 {
			j = rt.defaultDC
		}
		if !listed[j] {
			listed[j] = true
			out = append(out, rt.choice(&cands[j], score.Result{}))
		}
	}
	return out
}

// ranked lists the eligible candidates to try: res's pick, then the other
// eligible ones by cost (ties in configuration order). Round-robin goes on
// in cyclic order after its pick; single-dc has only its home.
func (rt *Router) ranked(scorer *score.Scorer, req score.Request, cands []score.Candidate, res score.Result) []Choice {
	out := []Choice{rt.choice(&cands[res.Index], res)}
	switch scorer.Config().Policy {
	case score.SingleDC:
		return out
	case score.RoundRobin:
		// The scorer has no cost here; scoring a candidate alone would
		// advance its cursor, so the cached prefix is capped here the way
		// score caps it: at the prompt's blocks and tokens.
		for k := 1; k < len(cands); k++ {
			c := &cands[(res.Index+k)%len(cands)]
			blocks := (req.ISLTokens + rt.cfg.BlockSize - 1) / rt.cfg.BlockSize
			cached := min(req.ISLTokens, min(c.CachedBlocks, blocks)*rt.cfg.BlockSize)
			out = append(out, rt.choice(c, score.Result{CachedTokens: cached}))
		}
		return out
	}
	type ranked struct {
		i    int
		cost float64
	}
	var rest []ranked
	for i := range cands {
		if cost, ok := scorer.Cost(req, cands[i]); ok && i != res.Index {
			rest = append(rest, ranked{i, cost})
		}
	}
	slices.SortStableFunc(rest, func(a, b ranked) int { return cmp.Compare(a.cost, b.cost) })
	for _, r := range rest {
		// Scored alone, a candidate gets its own cost parts and cached
		// tokens, which the scorer reports only for its pick. It is
		// eligible (Cost said so), so this cannot fail.
		if one, err := scorer.Score(req, cands[r.i:r.i+1], nil); err == nil {
			out = append(out, rt.choice(&cands[r.i], one))
		}
	}
	return out
}

func (rt *Router) choice(c *score.Candidate, res score.Result) Choice {
	ch := Choice{DC: rt.cfg.DCs[c.Rank], Index: int(c.Rank), Cost: res.Cost, Parts: res.Parts, CachedTokens: res.CachedTokens, HasRTT: c.HasRTT, weights: c.Weights}
	if c.HasRTT {
		ch.RTT = time.Duration(c.RTTms * float64(time.Millisecond))
	}
	return ch
}
