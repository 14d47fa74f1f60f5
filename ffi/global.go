package main

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/replica"
	"github.com/goindex/goindex/goindex/score"
	"github.com/goindex/goindex/goindex/shm"
)

// globalIndex is mode "global": one lane per DC. The lanes come from relay
// frames the host feeds (fed, built from the config's "dcs", frames.go) or
// from a shared replica file mapped read-only (att, attach.go). Once a
// replica is attached it is the only source: frames are refused.
type globalIndex struct {
	maxAge     time.Duration // signals older than this are excluded
	checkEvery time.Duration // how often probes look for a new replica generation
	fed        *fedLanes     // nil without "dcs"
	fedView    *laneView     // the fed lanes as searches see them; nil without "dcs"
	att        atomic.Pointer[attachment]
	// clock is the time signals are stamped and aged with; nil means
	// time.Now (tests set a clock of their own, so freshness never depends
	// on how fast the machine runs the test).
	clock func() time.Time
}

// now returns the handle's time for stamping and aging signals.
func (g *globalIndex) now() time.Time {
	if g.clock != nil {
		return g.clock()
	}
	return time.Now()
}

func newGlobal(cfg *config) (*globalIndex, error) {
	g := &globalIndex{maxAge: cfg.maxStaleness(), checkEvery: cfg.replicaCheck()}
	if len(cfg.DCs) > 0 {
		f, err := newFed(cfg)
		if err != nil {
			return nil, err
		}
		g.fed = f
		g.fedView = newLaneView(f.table, f.format, f.dcs)
		g.fedView.fed = f
	}
	return g, nil
}

// feed returns the lanes frames feed, or errMode when the handle has none
// (no "dcs") or a replica is attached. Call it under the event lock.
func (g *globalIndex) feed() (*fedLanes, error) {
	switch {
	case g.att.Load() != nil:
		return nil, fmt.Errorf("%w: a replica is attached; its consumer feeds the lanes", errMode)
	case g.fed == nil:
		return nil, fmt.Errorf("%w: the handle has no lanes of its own; open it with \"dcs\" to feed frames", errMode)
	}
	return g.fed, nil
}

// acquire returns the lanes searches read now, or nil when there are none
// (no "dcs" and nothing attached, or closed); release it after use.
func (g *globalIndex) acquire() *laneView {
	if a := g.att.Load(); a != nil {
		return a.acquire()
	}
	return g.fedView
}

// laneView is one set of lanes a search reads: the fed table, or one
// generation of an attached replica file. An attached view counts the
// searches using it (refs); retire marks it replaced and the last user
// unmaps it, so no search ever reads an unmapped file.
type laneView struct {
	table      *replica.Table
	format     *ckf.Format
	dcs        []uint64 // DC id of each lane
	all        uint64   // mask of every lane
	generation uint64   // replica generation; 0 for the fed lanes
	fileBytes  uint64   // mapped bytes; 0 for the fed lanes
	reader     *shm.Reader
	fed        *fedLanes
	scratch    sync.Pool // *searchScratch

	refs    atomic.Int64
	retired atomic.Bool
	closed  atomic.Bool
}

func newLaneView(t *replica.Table, f *ckf.Format, dcs []uint64) *laneView {
	v := &laneView{table: t, format: f, dcs: dcs, all: ^uint64(0) >> (64 - len(dcs))}
	v.scratch.New = func() any {
		s, err := replica.NewSearcher(t, f, replica.SearchConfig{})
		if err != nil {
			// Both come from one file or one format: they always agree.
			panic(fmt.Sprintf("ffi: searcher over a view: %v", err))
		}
		return &searchScratch{searcher: s}
	}
	return v
}

// release ends one use of v. Fed views are never retired.
func (v *laneView) release() {
	if v.reader != nil && v.refs.Add(-1) == 0 && v.retired.Load() {
		v.unmap()
	}
}

// retire marks v replaced; it is unmapped now if no search uses it, else by
// the last one's release. A search that loaded v before the mark either
// sees it (and backs off) or holds a reference the mark sees: sync/atomic's
// sequentially consistent order leaves no third case.
func (v *laneView) retire() {
	v.retired.Store(true)
	if v.refs.Load() == 0 {
		v.unmap()
	}
}

func (v *laneView) unmap() {
	if v.closed.CompareAndSwap(false, true) {
		_ = v.reader.Close()
	}
}

// searchScratch is one goroutine's search state over one view.
type searchScratch struct {
	searcher *replica.Searcher
	chain    []uint64
	depth    []uint32
}

// search returns the depth of every lane for the query (local hashes from
// the root) and the mask of lanes searched (the ready ones); put s back
// with v.scratch.Put.
func (v *laneView) search(locals []uint64) (s *searchScratch, ready uint64) {
	s = v.scratch.Get().(*searchScratch)
	s.chain = kv.AppendChain(s.chain[:0], false, 0, locals)
	s.depth, ready = s.searcher.Search(s.depth, s.chain, v.all)
	return s, ready
}

// Match appends the depth of every ready DC lane with a positive depth for
// the query: id = DC id, rank = lane.
func (g *globalIndex) Match(dst []kv.Overlap, locals []uint64) []kv.Overlap {
	if len(locals) == 0 {
		return dst
	}
	v := g.acquire()
	if v == nil {
		return dst
	}
	s, ready := v.search(locals)
	for m := ready; m != 0; m &= m - 1 {
		l := bits.TrailingZeros64(m)
		if d := s.depth[l]; d > 0 {
			dst = append(dst, kv.Overlap{Member: kv.Member{Worker: v.dcs[l], Rank: uint32(l)}, Blocks: int(d)})
		}
	}
	v.scratch.Put(s)
	v.release()
	return dst
}

// signals are one lane's live inputs to the scorer.
type signals struct {
	load   *shm.Load // last load report, nil when none
	hasRTT bool
	rtt    time.Duration
	rttAt  time.Time
}

// signals returns lane l's last load report and RTT: the replica file's
// lane record, or what frames and goindex_set_rtt left for a fed lane.
func (v *laneView) signals(l int) signals {
	if v.reader != nil {
		info := v.reader.Lane(l)
		// The consumer writes RTT 0 for a DC it has not measured yet.
		return signals{load: &info.Load, hasRTT: info.RTT > 0, rtt: info.RTT, rttAt: info.RTTAt}
	}
	var s signals
	s.load = v.fed.loads[l].Load()
	if r := v.fed.rtts[l].Load(); r != nil {
		s.hasRTT, s.rtt, s.rttAt = true, r.rtt, r.at
	}
	return s
}

// candidates appends one scorer candidate per ready lane (ID = DC id, Rank
// = lane) with its depth for the query and every signal measured within
// maxAge of now: a stale or missing load or RTT is left out (the scorer
// then finds the lane ineligible), never read as zero.
func (g *globalIndex) candidates(dst []score.Candidate, locals []uint64, now time.Time) []score.Candidate {
	v := g.acquire()
	if v == nil {
		return dst
	}
	defer v.release()
	var depth []uint32
	ready := v.table.Ready() & v.all
	if len(locals) > 0 {
		var s *searchScratch
		s, ready = v.search(locals)
		defer v.scratch.Put(s)
		depth = s.depth
	}
	fresh := func(at time.Time) bool { return !at.IsZero() && now.Sub(at) <= g.maxAge }
	for m := ready; m != 0; m &= m - 1 {
		l := bits.TrailingZeros64(m)
		c := score.Candidate{ID: v.dcs[l], Rank: uint32(l)}
		if depth != nil {
			c.CachedBlocks = int(depth[l])
		}
		sig := v.signals(l)
		if ld := sig.load; ld != nil && fresh(ld.ReceivedAt) {
			c.HasLoad = true
			c.ActivePrefillTokens, c.ActiveDecodeBlocks = ld.QueuedPrefillTokens, ld.ActiveDecodeBlocks
			c.HasCapacity, c.CapacityBlocks = ld.CapacityBlocks > 0, ld.CapacityBlocks
			c.PrefillTokensPerMs, c.QueueTokensPerMs, c.DecodeBlocksPerMs = ld.PrefillTokensPerMs, ld.QueueTokensPerMs, ld.DecodeBlocksPerMs
		}
		if sig.hasRTT && fresh(sig.rttAt) {
			c.HasRTT, c.RTTms = true, float64(sig.rtt)/float64(time.Millisecond)
		}
		dst = append(dst, c)
	}
	return dst
}

// count fills goindex_stats for the lanes searches read now: blocks are
// what the ready lanes' DCs last reported tracking (the lanes hold
// fingerprints, not blocks); frames are counted across the handle's life.
func (g *globalIndex) count(c *counters) {
	c.mode = modeGlobal
	if g.fed != nil {
		c.framesApplied, c.framesRejected, c.framesIgnored = g.fed.applied.Load(), g.fed.rejected.Load(), g.fed.ignored.Load()
	}
	v := g.acquire()
	if v == nil {
		return
	}
	c.members = uint64(len(v.dcs))
	ready := v.table.Ready() & v.all
	c.lanesReady = uint64(bits.OnesCount64(ready))
	for m := ready; m != 0; m &= m - 1 {
		if ld := v.signals(bits.TrailingZeros64(m)).load; ld != nil {
			c.blocks += ld.ActiveBlocks
		}
	}
	c.replicaGeneration = v.generation
	if v.reader != nil {
		c.memoryBytes = v.fileBytes
	} else {
		words, _ := replica.RegionWords(replica.Config{Lanes: v.table.Lanes(), Buckets: v.table.Buckets()})
		c.memoryBytes = uint64(words) * 8
	}
	v.release()
}

// close unmaps the attached replica once no probe uses it.
func (g *globalIndex) close() {
	if a := g.att.Load(); a != nil {
		a.close()
	}
}
