package sim

import (
	"errors"
	"math"
	"testing"
)

// TestTopology_OriginsFollowTheShares draws 20,000 origins over three
// sites with shares 1:2:7 and checks each site's count within five
// standard deviations of its binomial mean; a site left out gets none; the
// draws depend only on the seed.
func TestTopology_OriginsFollowTheShares(t *testing.T) {
	g := lineGrid(0, 10, 20, 30)
	c := Config{Grid: g, Seed: testSeed(t), ClientShares: map[string]float64{"s0": 1, "s1": 2, "s3": 7}}
	const n = 20000
	topo, err := newTopology(&c, n)
	if err != nil {
		t.Fatalf("newTopology: %v", err)
	}
	counts := make([]int, len(g.Sites))
	for _, o := range topo.origin {
		counts[o]++
	}
	for k, share := range []float64{0.1, 0.2, 0, 0.7} {
		mean, sd := n*share, math.Sqrt(n*share*(1-share))
		if math.Abs(float64(counts[k])-mean) > 5*sd {
			t.Errorf("site %s: %d of %d origins, want %.0f ± %.0f", g.Sites[k], counts[k], n, mean, 5*sd)
		}
	}
	if want := []int{0, 1, 3}; len(topo.sites) != 3 || topo.sites[0] != want[0] || topo.sites[1] != want[1] || topo.sites[2] != want[2] {
		t.Errorf("sites with clients %v, want %v", topo.sites, want)
	}
	again, _ := newTopology(&c, n)
	for i := range topo.origin {
		if topo.origin[i] != again.origin[i] {
			t.Fatalf("origin %d differs between two draws with one seed", i)
		}
	}
}

// TestTopology_SingleDCSiteAndOneSiteMode: the single-DC site minimizes the
// shares-weighted mean RTT (on a line, the weighted median), and one-site
// mode puts every client at the router site.
func TestTopology_SingleDCSiteAndOneSiteMode(t *testing.T) {
	g := lineGrid(0, 10, 20, 30) // s1..s3 are 10, 20, 30 ms from s0 and sum their distances
	c := Config{Grid: g, Seed: 1, ClientShares: map[string]float64{"s0": 1, "s3": 3}}
	topo, err := newTopology(&c, 10)
	if err != nil {
		t.Fatalf("newTopology: %v", err)
	}
	// RTT(s0, s3) = 30; RTT(s3, sk) = 30 + rtt_k for k ≠ 0, 3: s3 itself wins.
	if topo.singleDC != 3 {
		t.Errorf("single-dc site %s, want s3 (mean RTT %.1f there)", g.Sites[topo.singleDC], topo.meanClientRTT(g, 3))
	}
	c = Config{Grid: g, Seed: 1, OneSite: true, RouterSite: "s2"}
	if topo, _ = newTopology(&c, 10); topo.singleDC != 2 || len(topo.sites) != 1 || topo.sites[0] != 2 {
		t.Errorf("one-site mode: clients at %v, single-dc at %d; want [2] and 2", topo.sites, topo.singleDC)
	}
}

func TestTopology_RejectsBadShares(t *testing.T) {
	g := lineGrid(0, 10)
	for _, shares := range []map[string]float64{{"nowhere": 1}, {"s0": -1}, {"s0": math.NaN()}, {"s0": 0, "s1": 0}, {"s1": math.Inf(1)}} {
		c := Config{Grid: g, ClientShares: shares}
		if _, err := newTopology(&c, 1); !errors.Is(err, ErrConfig) {
			t.Errorf("shares %v: err = %v, want ErrConfig", shares, err)
		}
	}
}
