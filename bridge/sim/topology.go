package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// originStream is the random stream (beside Config.Seed) that draws every
// request's client site, apart from the per-request streams, so that the
// origins depend only on the seed and the shares.
const originStream = 0x6f726967 // "orig"

// topology is where one run's clients and routers are, fixed before any
// policy runs so that every policy serves the same requests from the same
// sites: each request's origin site, the sites that have clients (each
// with its own router), and the site the single-DC baselines use.
type topology struct {
	shares   []float64 // per grid site, summing to 1
	origin   []int     // per request, its client site (grid index)
	sites    []int     // the sites with clients, ascending
	singleDC int       // grid index of the single-DC baselines' site
}

// newTopology resolves c's client placement for n requests. In one-site
// mode every client is at RouterSite. Otherwise each request's site is
// drawn from ClientShares (uniform over the sites when unset). The
// single-DC site is the one with the least mean client RTT (weighted by
// the shares): the best place to put everything in one DC.
func newTopology(c *Config, n int) (topology, error) {
	g := c.Grid
	t := topology{shares: make([]float64, len(g.Sites)), origin: make([]int, n)}
	switch {
	case c.OneSite:
		home, _ := g.Index(c.RouterSite)
		t.shares[home] = 1
	case len(c.ClientShares) == 0:
		for k := range t.shares {
			t.shares[k] = 1 / float64(len(g.Sites))
		}
	default:
		total := 0.0
		for name, v := range c.ClientShares {
			k, ok := g.Index(name)
			if !ok {
				return t, fmt.Errorf("%w: client share for %q, which is not a site (%s)", ErrConfig, name, strings.Join(g.Sites, ","))
			}
			if !(v >= 0) || math.IsInf(v, 0) {
				return t, fmt.Errorf("%w: client share %v for %s must be a finite number ≥ 0", ErrConfig, v, name)
			}
			t.shares[k] = v
			total += v
		}
		if !(total > 0) {
			return t, fmt.Errorf("%w: client shares sum to 0", ErrConfig)
		}
		for k := range t.shares {
			t.shares[k] /= total
		}
	}
	for k, v := range t.shares {
		if v > 0 {
			t.sites = append(t.sites, k)
		}
	}
	rng := rand.New(rand.NewPCG(c.Seed, originStream))
	for i := range t.origin {
		t.origin[i] = pick(t.shares, rng.Float64())
	}
	best := math.Inf(1)
	for d := range g.Sites {
		if mean := t.meanClientRTT(g, d); mean < best {
			best, t.singleDC = mean, d
		}
	}
	return t, nil
}

// pick returns the index u ∈ [0, 1) falls in when weights (summing to 1)
// split the unit interval in order; the last positive weight takes any
// rounding remainder.
func pick(weights []float64, u float64) int {
	last := 0
	for k, w := range weights {
		if w <= 0 {
			continue
		}
		if u < w {
			return k
		}
		u -= w
		last = k
	}
	return last
}

// meanClientRTT is the shares-weighted mean RTT from the clients to site d.
func (t *topology) meanClientRTT(g *Grid, d int) float64 {
	mean := 0.0
	for s, v := range t.shares {
		mean += v * g.RTTms[s][d]
	}
	return mean
}

// sharesText lists the sites with clients and their shares.
func (t *topology) sharesText(g *Grid) string {
	parts := make([]string, 0, len(t.sites))
	for _, k := range t.sites {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", g.Sites[k], 100*t.shares[k]))
	}
	if len(parts) > 1 && slices.IndexFunc(t.sites, func(k int) bool { return t.shares[k] != t.shares[t.sites[0]] }) < 0 {
		return fmt.Sprintf("every site alike (%d sites, %.1f%% each)", len(parts), 100*t.shares[t.sites[0]])
	}
	return strings.Join(parts, ", ")
}
