package score

import (
	"math"
	"math/rand/v2"
)

// choose returns the index of the chosen eligible candidate: the minimum cost
// with ties broken uniformly at temperature 0, else a softmax draw
// (dynamo-compat §4.3). At least one candidate is eligible.
func choose(costs []float64, eligible []bool, temperature float64, rng *rand.Rand) int {
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, c := range costs {
		if eligible[i] {
			lo, hi = math.Min(lo, c), math.Max(hi, c)
		}
	}
	if temperature <= 0 || lo == hi {
		return pickTie(costs, eligible, lo, rng)
	}
	total := 0.0
	weights := make([]float64, len(costs))
	for i, c := range costs {
		if eligible[i] {
			weights[i] = math.Exp(-(c - lo) / ((hi - lo) * temperature))
			total += weights[i]
		}
	}
	u := uniform(rng) * total
	last, acc := -1, 0.0
	for i, w := range weights {
		if !eligible[i] {
			continue
		}
		acc += w
		last = i
		if u <= acc {
			return i
		}
	}
	return last
}

// pickTie returns a uniformly random eligible index whose cost equals lo (the
// first one when rng is nil).
func pickTie(costs []float64, eligible []bool, lo float64, rng *rand.Rand) int {
	n, chosen := 0, -1
	for i, c := range costs {
		if !eligible[i] || c != lo {
			continue
		}
		n++
		// Reservoir sampling: the k-th tie replaces the choice with chance 1/k.
		if chosen < 0 || (rng != nil && rng.IntN(n) == 0) {
			chosen = i
		}
	}
	return chosen
}

func uniform(rng *rand.Rand) float64 {
	if rng == nil {
		return 0
	}
	return rng.Float64()
}
