// Package relaytest holds the test support shared by the relay, consumer and
// end-to-end tests: a seeded generator of Dynamo KV events that tracks the
// canonical hash of every block its workers hold, and condition polling.
package relaytest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/internal/testseed"
)

// Seed returns a randomized test's seed: GOINDEX_SEED when set, else def;
// it is logged when the test fails (testseed.For).
func Seed(t testing.TB, def uint64) uint64 {
	t.Helper()
	return testseed.For(t, def)
}

// CheckFor polls fn every interval until it returns nil, and fails the
// test with fn's last error if total passes first.
func CheckFor(t testing.TB, total, every time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", total, err)
		}
		time.Sleep(every)
	}
}

// block is one block a worker holds: its external hash, its canonical
// hash and the local hashes of its run from the root (the last one its own),
// which a probe of the library takes.
type block struct {
	external  uint64
	canonical uint64
	path      []uint64
}

// Generator emits the KV events of a few workers as Dynamo event-plane
// envelopes: stored runs (from the root or below a block the worker holds)
// and removals of held blocks. It models what each worker holds, so a test
// knows every canonical hash a producer tracks. Not safe for concurrent use.
type Generator struct {
	rng     *rand.Rand
	workers int
	held    map[uint64][]block
	next    uint64
	seq     map[uint64]uint64
	pub     map[uint64]uint64
	events  uint64
}

// NewGenerator returns a generator of workers workers (ids 1..workers).
func NewGenerator(seed uint64, workers int) *Generator {
	g := &Generator{rng: rand.New(rand.NewPCG(seed, 0x9e37)), workers: workers, held: map[uint64][]block{},
		seq: map[uint64]uint64{}, pub: map[uint64]uint64{}}
	for w := 1; w <= workers; w++ {
		g.pub[uint64(w)] = g.rng.Uint64() >> 11
	}
	return g
}

// Next returns the next event's envelope, of a worker drawn at random.
func (g *Generator) Next() []byte { return g.NextOf(uint64(1 + g.rng.IntN(g.workers))) }

// NextOf returns worker w's next event's envelope (1 ≤ w ≤ workers). An
// envelope drawn and never delivered is a gap in w's sequence: the model
// holds what the worker holds, whoever saw it.
func (g *Generator) NextOf(w uint64) []byte {
	ev := dynamo.RouterEvent{WorkerID: w, Event: dynamo.CacheEvent{EventID: g.events}}
	g.events++
	h := g.held[w]
	if len(h) > 8 && g.rng.IntN(3) == 0 {
		i := g.rng.IntN(len(h))
		ev.Event.Kind = kv.Removed
		ev.Event.Removed = []uint64{h[i].external}
		g.held[w] = append(h[:i], h[i+1:]...)
	} else {
		ev.Event.Kind = kv.Stored
		prev, hasParent := uint64(0), false
		var path []uint64
		if len(h) > 0 && g.rng.IntN(2) == 0 {
			p := h[g.rng.IntN(len(h))]
			ev.Event.Stored.HasParent, ev.Event.Stored.Parent = true, p.external
			prev, hasParent, path = p.canonical, true, p.path
		}
		for range 1 + g.rng.IntN(4) {
			g.next++
			local := g.rng.Uint64()
			c := local
			if hasParent {
				c = kv.ChainHash(prev, local)
			}
			prev, hasParent = c, true
			path = append(path[:len(path):len(path)], local) // a new array: siblings share only the prefix
			ext := g.next<<8 | w
			ev.Event.Stored.Blocks = append(ev.Event.Stored.Blocks, dynamo.StoredBlock{BlockHash: ext, TokensHash: local})
			g.held[w] = append(g.held[w], block{external: ext, canonical: c, path: path})
		}
	}
	return g.envelope(w, &ev)
}

func (g *Generator) envelope(w uint64, ev *dynamo.RouterEvent) []byte {
	payload, err := dynamo.AppendMsgpack(nil, ev)
	if err != nil {
		panic(fmt.Sprintf("relaytest: encode event: %v", err))
	}
	msg := dynamo.AppendEnvelope(nil, &dynamo.Envelope{Topic: dynamo.EventTopic, PublisherID: g.pub[w],
		Sequence: g.seq[w], PublishedAtMs: uint64(time.Now().UnixMilli()), Payload: payload})
	g.seq[w]++
	return msg
}

// Restart restarts worker w: its cache is empty and it publishes from
// sequence 0 again, under a new publisher id when newPublisher is set
// (Dynamo draws a new id per incarnation) or its old one (a publisher whose
// id outlives the engine). It emits nothing.
func (g *Generator) Restart(w uint64, newPublisher bool) {
	delete(g.held, w)
	if newPublisher {
		g.pub[w] = g.rng.Uint64() >> 11
	}
	g.seq[w] = 0
}

// Held returns, for every worker holding blocks, its member (rank 0) and
// each held block's external hash and canonical hash: the exact state a
// relay that saw every event holds.
func (g *Generator) Held() map[kv.Member]map[uint64]uint64 {
	out := map[kv.Member]map[uint64]uint64{}
	for w, h := range g.held {
		if len(h) == 0 {
			continue
		}
		m := map[uint64]uint64{}
		for _, b := range h {
			m[b.external] = b.canonical
		}
		out[kv.Member{Worker: w}] = m
	}
	return out
}

// Forget drops every block from the model without emitting anything: what
// a relay that restarted (and lost its exact state) knows of the workers.
func (g *Generator) Forget() { clear(g.held) }

// Tracked returns the canonical hash of every block some worker holds.
func (g *Generator) Tracked() []uint64 {
	var out []uint64
	for _, h := range g.held {
		for _, b := range h {
			out = append(out, b.canonical)
		}
	}
	return out
}

// TrackedPaths returns, for every block some worker holds, the local hashes
// of its run from the root (the block's own last): the request a probe of
// the library takes to reach it. Ancestors on a path may have been removed
// since; a probe's exact depth is the path's leading blocks that are held.
// The slices are the generator's: do not modify them.
func (g *Generator) TrackedPaths() [][]uint64 {
	var out [][]uint64
	for _, h := range g.held {
		for _, b := range h {
			out = append(out, b.path)
		}
	}
	return out
}
