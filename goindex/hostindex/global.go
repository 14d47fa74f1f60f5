package hostindex

import (
	"fmt"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/goindex/follow"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/replica"
	"github.com/goindex/goindex/goindex/score"
)

// global is mode "global": one lane per DC. The lanes come from relay
// frames the host feeds (fed, built from the config's "dcs") or from a
// shared replica file mapped read-only (att). Once a replica is attached it
// is the only source: frames are refused.
type global struct {
	maxAge     time.Duration // signals older than this are excluded
	checkEvery time.Duration // how often probes look for a new replica generation (0: every call)
	fed        *follow.Feed  // nil without "dcs"
	att        atomic.Pointer[follow.Follower]
	clock      func() time.Time
	turn       *follow.Turnover // each lane's insert rate, for ttft's eviction charge
}

func newGlobal(cfg *Config) (*global, error) {
	g := &global{maxAge: cfg.maxStaleness(), checkEvery: cfg.replicaCheck(), clock: cfg.Clock,
		turn: follow.NewTurnover(replica.MaxLanes)}
	if g.clock == nil {
		g.clock = time.Now
	}
	if len(cfg.DCs) > 0 {
		var err error
		g.fed, err = follow.NewFeed(follow.FeedConfig{DCs: cfg.DCs, Domain: cfg.Domain, ConsumerInstance: cfg.ConsumerInstance,
			Seed: cfg.Seed, Buckets: cfg.buckets()})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	return g, nil
}

// feed returns the lanes frames feed, or ErrMode when the index has none
// (no "dcs") or a replica is attached. Call it under the event lock.
func (g *global) feed() (*follow.Feed, error) {
	switch {
	case g.att.Load() != nil:
		return nil, fmt.Errorf("%w: a replica is attached; its consumer feeds the lanes", ErrMode)
	case g.fed == nil:
		return nil, fmt.Errorf("%w: the index has no lanes of its own; open it with \"dcs\" to feed frames", ErrMode)
	}
	return g.fed, nil
}

// acquire returns the lanes searches read now, or nil when there are none
// (no "dcs" and nothing attached); release it after use.
func (g *global) acquire() *follow.View {
	if f := g.att.Load(); f != nil {
		return f.Acquire()
	}
	if g.fed != nil {
		return g.fed.Acquire()
	}
	return nil
}

// attach maps the replica file at path and makes it the index's only lane
// source. Attaching again, to the same or another path, replaces the view;
// the old one is unmapped once no probe uses it. On error nothing changes.
func (g *global) attach(path string) error {
	old := g.att.Load()
	if old != nil && old.Path() == path {
		return old.Attach()
	}
	checkEvery := g.checkEvery
	if checkEvery == 0 {
		checkEvery = -1 // every call
	}
	f := follow.New(path, follow.Config{MaxStaleness: g.maxAge, CheckEvery: checkEvery, Clock: g.clock})
	if err := f.Attach(); err != nil {
		return err
	}
	g.att.Store(f)
	if old != nil {
		old.Close()
	}
	return nil
}

// match appends the depth of every ready DC lane with a positive depth for
// the query: Worker = DC id, Rank = lane.
func (g *global) match(dst []kv.Overlap, locals []uint64) []kv.Overlap {
	if len(locals) == 0 {
		return dst
	}
	v := g.acquire()
	if v == nil {
		return dst
	}
	dst = v.Match(dst, locals)
	v.Release()
	return dst
}

// candidates appends one scorer candidate per ready lane (ID = DC id, Rank
// = lane) with its depth for the query, every signal measured within
// maxAge of now (follow.SetSignals) and the eviction factor of the lane's
// insert rate (follow.Turnover: 0 until two counted load reports of one
// relay incarnation were seen).
func (g *global) candidates(dst []score.Candidate, locals []uint64, now time.Time) []score.Candidate {
	v := g.acquire()
	if v == nil {
		return dst
	}
	defer v.Release()
	var depth []uint32
	ready := v.Ready()
	if len(locals) > 0 {
		depth, ready = v.SearchLocals(nil, locals, ready)
	}
	for m := ready; m != 0; m &= m - 1 {
		l := bits.TrailingZeros64(m)
		c := score.Candidate{ID: v.DCs()[l], Rank: uint32(l)}
		if depth != nil {
			c.CachedBlocks = int(depth[l])
		}
		info := v.Lane(l)
		follow.SetSignals(&c, &info, now, g.maxAge)
		g.turn.SetEvictionFactor(&c, l, &info.Load)
		dst = append(dst, c)
	}
	return dst
}

// known appends one scorer candidate per lane the index knows (ID = DC id,
// Rank = lane), ready or not, with its last known signals whatever their
// age and no cached blocks: a degraded score's fallback. With no lanes to
// read (the attached file is gone or damaged) they are the last file's
// DCs, with no signals.
func (g *global) known(dst []score.Candidate, now time.Time) []score.Candidate {
	v := g.acquire()
	if v == nil {
		if f := g.att.Load(); f != nil {
			for l, dc := range f.DCs() {
				dst = append(dst, score.Candidate{ID: dc, Rank: uint32(l)})
			}
		}
		return dst
	}
	defer v.Release()
	for l, dc := range v.DCs() {
		c := score.Candidate{ID: dc, Rank: uint32(l)}
		info := v.Lane(l)
		follow.SetSignals(&c, &info, now, 0)
		dst = append(dst, c)
	}
	return dst
}

// laneOf returns the lane of DC dc among the lanes known (known's order),
// 0 when none is dc's.
func (g *global) laneOf(dc uint64) int {
	var dcs []uint64
	switch f := g.att.Load(); {
	case f != nil:
		dcs = f.DCs()
	case g.fed != nil:
		dcs = g.fed.Acquire().DCs()
	}
	return max(0, slices.Index(dcs, dc))
}

// degraded returns why a score over the lanes found no fresh signals: the
// attached replica's health, or signals-stale for fed lanes.
func (g *global) degraded() follow.Reason {
	if f := g.att.Load(); f != nil {
		return follow.ReasonOf(f.Health())
	}
	return follow.SignalsStale
}

// count fills the counters for the lanes searches read now: blocks are
// what the ready lanes' DCs last reported tracking (the lanes hold
// fingerprints, not blocks); frames are counted across the index's life.
func (g *global) count(c *Counters) {
	if g.fed != nil {
		fc := g.fed.Counts()
		c.FramesApplied, c.FramesRejected, c.FramesIgnored = fc.Applied, fc.Rejected, fc.Ignored
	}
	if f := g.att.Load(); f != nil {
		h := f.Health()
		c.ReplicaState, c.LanesBad, c.IntegrityFailures, c.ReplicaFaults = uint32(h.State), h.BadLanes, h.IntegrityFailures, h.Faults
	}
	v := g.acquire()
	if v == nil {
		return
	}
	defer v.Release()
	c.Members = uint64(len(v.DCs()))
	ready := v.Ready()
	c.LanesReady = uint64(bits.OnesCount64(ready))
	for m := ready; m != 0; m &= m - 1 {
		c.Blocks += v.Lane(bits.TrailingZeros64(m)).Load.ActiveBlocks
	}
	c.ReplicaGeneration, c.MemoryBytes = v.Generation(), v.MemoryBytes()
}

// close unmaps the attached replica once no probe uses it.
func (g *global) close() {
	if f := g.att.Load(); f != nil {
		f.Close()
	}
}

// ApplyFrame feeds one relay frame (follow.Feed.Apply) to a global index
// opened with "dcs"; the frame is copied, never kept. ErrMode otherwise.
func (ix *Index) ApplyFrame(frame []byte) error {
	return ix.feeding(func(f *follow.Feed, now time.Time) error { return f.Apply(frame, now) })
}

// SetRTT records a round trip to DC dc for a global index fed frames
// (follow.ErrUnknownDC when dc has no lane; ErrMode otherwise).
func (ix *Index) SetRTT(dc uint64, rtt time.Duration) error {
	return ix.feeding(func(f *follow.Feed, now time.Time) error { return f.SetRTT(dc, rtt, now) })
}

// feeding runs fn on the fed lanes under the event lock, at the index's
// time.
func (ix *Index) feeding(fn func(f *follow.Feed, now time.Time) error) error {
	if err := ix.NeedMode(true); err != nil {
		return err
	}
	return ix.locked(func() error {
		f, err := ix.global.feed()
		if err != nil {
			return err
		}
		return fn(f, ix.global.clock())
	})
}

// AttachReplica maps the replica file at path into a global index, its
// only lane source from now on; a failure (follow.ErrNoReplica, shm's
// sentinels) changes nothing.
func (ix *Index) AttachReplica(path string) error {
	if err := ix.NeedMode(true); err != nil {
		return err
	}
	return ix.locked(func() error { return ix.global.attach(path) })
}
