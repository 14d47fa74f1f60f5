package ckf

// rngGamma is splitmix64's increment (the 64-bit golden ratio), also used to
// spread lane numbers in laneRngSeed.
const rngGamma uint64 = 0x9E3779B97F4A7C15

// splitmix is the producer's kick RNG (spec §4.6): splitmix64, so that a
// layout is reproducible from the seed and the operation order alone.
type splitmix struct{ state uint64 }

// next advances the state and returns the next output.
func (r *splitmix) next() uint64 {
	r.state += rngGamma
	z := r.state
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// laneRngSeed returns the initial RNG state of lane: one next() on state
// seed XOR ((lane+1)·gamma).
func laneRngSeed(seed uint64, lane uint64) uint64 {
	r := splitmix{state: seed ^ (lane+1)*rngGamma}
	return r.next()
}
