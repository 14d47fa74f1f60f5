package sim

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/goindex/kv"
)

// testSeed is the seed of the randomized tests: SIM_SEED overrides it.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(20260704)
	if s := os.Getenv("SIM_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SIM_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (rerun with SIM_SEED=%d)", seed, seed)
		}
	})
	return seed
}

// shippedGrid reads the 13-site matrix of testdata/wan.
func shippedGrid(t *testing.T) *Grid {
	t.Helper()
	f, err := os.Open("../../testdata/wan/grid13_rtt_ms.csv")
	if err != nil {
		t.Fatalf("open grid: %v", err)
	}
	defer f.Close()
	g, err := ReadGrid(f)
	if err != nil {
		t.Fatalf("ReadGrid(grid13_rtt_ms.csv): %v", err)
	}
	return g
}

// fourSites is the shipped matrix cut to four sites 8–239 ms apart, so that
// tests with a router per site stay cheap.
func fourSites(t *testing.T) *Grid {
	t.Helper()
	g, err := shippedGrid(t).Subset([]string{"fra", "lon", "iad", "nrt"})
	if err != nil {
		t.Fatalf("Subset: %v", err)
	}
	return g
}

// shippedWorkload hashes the first n requests of the shipped conversation
// slice (fewer under -short).
func shippedWorkload(t *testing.T, n, short int) *Workload {
	t.Helper()
	if testing.Short() {
		n = short
	}
	f, err := os.Open("../../testdata/mooncake/conversation_head400.jsonl")
	if err != nil {
		t.Fatalf("open trace: %v", err)
	}
	defer f.Close()
	reqs, err := trace.ReadAll(f, trace.ReaderConfig{})
	if err != nil {
		t.Fatalf("read trace: %v", err)
	}
	w, err := NewWorkload(reqs[:min(n, len(reqs))], trace.DefaultBlockSize)
	if err != nil {
		t.Fatalf("NewWorkload: %v", err)
	}
	return w
}

// lineGrid builds a grid whose first site is the router site and whose
// site k is rtts[k] ms from it (distances between other sites are the sum,
// which keeps the matrix symmetric).
func lineGrid(rtts ...float64) *Grid {
	g := &Grid{}
	for k := range rtts {
		g.Sites = append(g.Sites, "s"+strconv.Itoa(k))
		row := make([]float64, len(rtts))
		for j := range rtts {
			if j != k {
				row[j] = rtts[j] + rtts[k]
			}
		}
		g.RTTms = append(g.RTTms, row)
	}
	return g
}

// handTrace is a hand-made trace: each line is "input output id,id,…" and
// requests arrive 1 ms apart.
func handTrace(t *testing.T, lines ...string) *Workload {
	t.Helper()
	timed := make([]string, len(lines))
	for k, l := range lines {
		timed[k] = strconv.Itoa(k) + " " + l
	}
	return timedTrace(t, timed...)
}

// timedTrace is a hand-made trace: each line is "ms input output
// id,id,…", ms being the request's trace timestamp.
func timedTrace(t *testing.T, lines ...string) *Workload {
	t.Helper()
	var reqs []trace.Request
	for _, l := range lines {
		f := strings.Fields(l)
		at, _ := strconv.Atoi(f[0])
		in, _ := strconv.Atoi(f[1])
		out, _ := strconv.Atoi(f[2])
		var ids []uint64
		for _, s := range strings.Split(f[3], ",") {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("timedTrace %q: %v", l, err)
			}
			ids = append(ids, v)
		}
		reqs = append(reqs, trace.Request{TimestampMs: uint64(at), InputLength: in, OutputLength: out, HashIDs: ids})
	}
	w, err := NewWorkload(reqs, trace.DefaultBlockSize)
	if err != nil {
		t.Fatalf("NewWorkload: %v", err)
	}
	return w
}

// quiet is a small deterministic config on grid g: no jitter, the given
// policies, every client and the only router at the grid's first site.
func quiet(g *Grid, policies ...Policy) Config {
	return Config{Grid: g, RouterSite: g.Sites[0], OneSite: true, RTTJitter: -1, Policies: policies}
}

// newSim builds policy p's simulation of w under c, started (relays
// connected, first sends scheduled) but not run.
func newSim(t *testing.T, c Config, w *Workload, p Policy) *simulation {
	t.Helper()
	c.Policies = []Policy{p}
	cc, err := c.withDefaults()
	if err != nil {
		t.Fatalf("withDefaults(%+v): %v", c, err)
	}
	topo, err := newTopology(&cc, len(w.Requests))
	if err != nil {
		t.Fatalf("newTopology: %v", err)
	}
	s, err := newSimulation(&cc, w, p, &topo)
	if err != nil {
		t.Fatalf("newSimulation(%v): %v", p, err)
	}
	if err := s.start(); err != nil {
		t.Fatalf("start(%v): %v", p, err)
	}
	return s
}

// simulate runs one policy to the end and returns the finished simulation
// for inspection, after its own end-of-run checks.
func simulate(t *testing.T, c Config, w *Workload, p Policy, before func(*simulation)) *simulation {
	t.Helper()
	s := newSim(t, c, w, p)
	if before != nil {
		before(s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.loop(ctx); err != nil {
		t.Fatalf("loop(%v): %v", p, err)
	}
	for _, d := range s.dcs {
		if err := s.verify(d); err != nil {
			t.Fatalf("verify(%v, %s): %v", p, d.name, err)
		}
	}
	return s
}

// warm serves prompt ids on worker 0 of DC k at time at (before the event
// loop runs), through the normal event path: the DC's index and producer
// at once, the router's lane one cadence flush and one way later.
func warm(t *testing.T, s *simulation, k int, ids []uint64, at float64) {
	t.Helper()
	s.now = at
	m, err := trace.NewMapper(trace.MapperConfig{BlockSize: s.w.BlockSize})
	if err != nil {
		t.Fatalf("NewMapper: %v", err)
	}
	d := s.dcs[k]
	locals := m.AppendLocals(nil, ids)
	seqs := kv.AppendChain(nil, false, 0, locals)
	p := d.workers[0].pool
	hit := p.match(seqs)
	d.events = p.admit(d.events[:0], seqs, hit, len(seqs))
	d.events = p.register(d.events, seqs, locals, hit, len(seqs))
	p.release(seqs, len(seqs), 0)
	if err := s.publishEvents(d, at); err != nil {
		t.Fatalf("warm %s: %v", d.name, err)
	}
}

func ids(from, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(from + i)
	}
	return out
}
