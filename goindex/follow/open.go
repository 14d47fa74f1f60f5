package follow

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/goindex/goindex/goindex/score"
)

// Reason says why a routing decision was degraded: made without fresh
// replica signals. Its numbers are the C ABI's GOINDEX_DEGRADED_* codes;
// 1 to 3 are the replica's Health states.
type Reason uint8

// Reasons of a degraded decision.
const (
	NotDegraded    Reason = 0
	ReplicaMissing Reason = Reason(Missing) // no replica attached
	ReplicaDamaged Reason = Reason(Damaged) // the file is not a valid replica
	ConsumerStale  Reason = Reason(Stale)   // the consumer stopped beating
	// SignalsStale: the replica is healthy but no candidate had the fresh
	// signals its policy needs (its DCs stopped reporting, say).
	SignalsStale Reason = 4
)

// String returns the reason's name, as route's X-Goindex-Degraded header
// and metrics give it.
func (r Reason) String() string {
	if r == SignalsStale {
		return "signals-stale"
	}
	return State(r).String()
}

// ReasonOf returns why a decision that found no fresh signals was degraded
// when the replica's health is h.
func ReasonOf(h Health) Reason {
	if h.State != Healthy {
		return Reason(h.State)
	}
	return SignalsStale
}

// Step says how Open reached its choice.
type Step uint8

// Steps of Open, in the order it tries them.
const (
	// Fresh: the policy chose over the candidates' fresh signals.
	Fresh Step = iota
	// LastKnown: no candidate had fresh signals; the policy chose over
	// their last known load and RTT, cached blocks ignored.
	LastKnown
	// Default: no candidate had any; the default candidate was taken.
	Default
)

// Open makes a routing decision that fails open: the policy of s over
// cands (fresh signals only); when none is eligible, over lastKnown() (the
// candidates with their last known signals and no cached blocks, which may
// name more than cands did; nil skips the step); when none of those is
// either, candidate def of lastKnown() (of cands when lastKnown is nil). It
// returns the result, the candidates it was made over and the step that
// made it. It fails only for no candidate at all or def out of range
// (score.ErrNoCandidate), and for a scorer error other than that.
func Open(s *score.Scorer, req score.Request, cands []score.Candidate, lastKnown func() []score.Candidate, def int,
	rng *rand.Rand) (score.Result, []score.Candidate, Step, error) {
	res, err := s.Score(req, cands, rng)
	if !errors.Is(err, score.ErrNoCandidate) {
		return res, cands, Fresh, err
	}
	if lastKnown != nil {
		known := lastKnown()
		if res, err := s.Score(req, known, rng); !errors.Is(err, score.ErrNoCandidate) {
			return res, known, LastKnown, err
		}
		cands = known
	}
	if def < 0 || def >= len(cands) {
		return score.Result{}, cands, Default, fmt.Errorf("%w: none of %d candidates, and no default among them", err, len(cands))
	}
	return score.Result{Index: def}, cands, Default, nil
}
