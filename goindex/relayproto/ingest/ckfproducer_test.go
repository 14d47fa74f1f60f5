package ingest

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/internal/prototest"
	"github.com/goindex/goindex/goindex/relayproto/publish"
	"github.com/goindex/goindex/internal/testseed"
)

// eventGen generates random KV event streams (parented stores, shared
// blocks across members and chains, removes, clears) and tracks the
// canonical hash of every block each member holds.
type eventGen struct {
	rng      *rand.Rand
	members  []kv.Member
	keys     [][]uint64          // per member: external hashes held, in a stable order
	lineage  []map[uint64]uint64 // per member: external → canonical
	external uint64
}

// maxHeldBlocks bounds each member's blocks so that 3 members never load a
// 128-bucket table past 3·(80+6)/512 ≈ 50%, far below where cuckoo
// insertion starts failing (≈ 96%, spec §4.6): no block is ever omitted, so
// every tracked block must be found.
const maxHeldBlocks = 80

func newEventGen(rng *rand.Rand, members int) *eventGen {
	g := &eventGen{rng: rng}
	for i := range members {
		g.members = append(g.members, kv.Member{Worker: uint64(10 + i)})
		g.keys = append(g.keys, nil)
		g.lineage = append(g.lineage, map[uint64]uint64{})
	}
	return g
}

func (g *eventGen) forget(m int, ext uint64) {
	delete(g.lineage[m], ext)
	for i, k := range g.keys[m] {
		if k == ext {
			g.keys[m] = append(g.keys[m][:i], g.keys[m][i+1:]...)
			return
		}
	}
}

func (g *eventGen) next() kv.Event {
	m := g.rng.IntN(len(g.members))
	ev := kv.Event{Member: g.members[m]}
	switch r := g.rng.IntN(40); {
	case r == 0:
		ev.Kind = kv.Cleared
		g.keys[m] = nil
		clear(g.lineage[m])
	case (r < 16 || len(g.keys[m]) >= maxHeldBlocks) && len(g.keys[m]) > 0:
		ev.Kind = kv.Removed
		for range 1 + g.rng.IntN(3) {
			if len(g.keys[m]) == 0 {
				break
			}
			ext := g.keys[m][g.rng.IntN(len(g.keys[m]))]
			ev.Removed = append(ev.Removed, ext)
			g.forget(m, ext)
		}
	default:
		ev.Kind = kv.Stored
		var prev uint64
		if len(g.keys[m]) > 0 && g.rng.IntN(2) == 0 {
			ev.HasParent = true
			ev.Parent = g.keys[m][g.rng.IntN(len(g.keys[m]))]
			prev = g.lineage[m][ev.Parent]
		}
		for i := range 1 + g.rng.IntN(6) {
			g.external++
			local := uint64(1 + g.rng.IntN(48)) // a small alphabet: members share blocks
			c := local
			if ev.HasParent || i > 0 {
				c = kv.ChainHash(prev, local)
			}
			prev = c
			ev.Blocks = append(ev.Blocks, kv.Block{External: g.external, Local: local})
			g.keys[m] = append(g.keys[m], g.external)
			g.lineage[m][g.external] = c
		}
	}
	return ev
}

// TestConvergence_RealProducer drives the publication protocol with the
// real ckf.Producer: random event streams, the producer's own cadence
// (N ∈ {1, 3, 16}, timer flush on or off), random faults; after an exact
// drain the lane equals the producer's filter byte for byte and every
// tracked block is found in the lane.
func TestConvergence_RealProducer(t *testing.T) {
	rounds := 400
	if testing.Short() {
		rounds = 120
	}
	seed := testseed.For(t, 2000)
	for ci, cfg := range []struct {
		batch int
		timer bool
	}{{1, false}, {3, true}, {16, true}, {16, false}} {
		rng := rand.New(rand.NewPCG(seed+uint64(ci), 77))
		cf, err := ckf.NewFormat(ckf.DefaultSeed, 128)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ckf.New(ckf.Config{Format: cf, BatchEvents: cfg.batch})
		if err != nil {
			t.Fatal(err)
		}
		f := relayproto.FormatOf(cf)
		m := relayproto.Manifest{ConsumerInstance: 42, Domain: prototest.Domain, Format: f, Lanes: []relayproto.PoolID{{Domain: prototest.Domain, DC: 1}}}
		tbl := newMemTable(1, 128)
		c, err := New(m, tbl, Config{OrderedHeartbeats: true})
		if err != nil {
			t.Fatal(err)
		}
		gen := newEventGen(rng, 3)
		d := newDCOver(t, c, 0, f, 100, p)
		d.w.lossy = true
		var batch []relayproto.Image
		flush := func() error {
			batch = p.Drain(batch[:0])
			_, err := d.pub.Publish(batch)
			return err
		}
		d.advance = func(_ *rand.Rand, events int) error {
			for range events {
				ev := gen.next()
				step, err := p.Apply(&ev)
				if err != nil && !errors.Is(err, ckf.ErrCapacityExhausted) {
					t.Fatalf("Apply(%v): %v", ev.Kind, err)
				}
				if step == ckf.StepPublish {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			if cfg.timer && p.PendingEvents() > 0 {
				return flush()
			}
			return nil
		}
		g := &grid{c: c, tbl: tbl, dcs: []*dc{d}, rng: rng}
		d.recover()
		for round := range rounds {
			if err := d.step(rng, 1+rng.IntN(8)); err != nil && d.pub.Status().Fence == publish.FenceNone { // every publisher error fences it
				t.Fatal(err)
			}
			if round == rounds/2 { // at least one recovery per run
				g.inject(t, d, faultRelayRestart)
			} else if rng.IntN(25) == 0 {
				g.inject(t, d, faultKind(rng.IntN(int(faultKinds))))
			}
			d.w.pump()
			if rng.IntN(3) == 0 {
				g.heal()
			}
		}
		acked := false
		for try := 0; try < 4 && !acked; try++ {
			g.heal()
			if err := flush(); err != nil {
				t.Fatal(err)
			}
			acked = d.drain() == Acknowledged
		}
		if !acked {
			t.Errorf("N=%d timer=%v: the lane never acknowledged a drain marker", cfg.batch, cfg.timer)
		}
		d.checkConverged(tbl)
		st := p.Stats()
		if st.TrackedBlocks == 0 || g.recoveries == 0 {
			t.Errorf("N=%d timer=%v: weak run: %d tracked blocks, %d recoveries", cfg.batch, cfg.timer, st.TrackedBlocks, g.recoveries)
		}
		if st.CapacityOmissions != 0 {
			t.Fatalf("N=%d: %d capacity omissions; the table is too small for this check", cfg.batch, st.CapacityOmissions)
		}
		t.Logf("N=%d timer=%v: %d tracked blocks, %d resident (load %.2f), %d recoveries, %d sequences", cfg.batch, cfg.timer, st.TrackedBlocks, st.Resident, st.LoadFactor, g.recoveries, d.pub.Status().LastSequence)
		missed := 0
		for mi := range gen.members {
			for _, ext := range gen.keys[mi] {
				pr := cf.Probe(gen.lineage[mi][ext])
				if !ckf.Contains(tbl.words[0][pr.A], pr.FP) && !ckf.Contains(tbl.words[0][pr.B], pr.FP) {
					missed++
				}
			}
		}
		if missed != 0 {
			t.Errorf("N=%d timer=%v: %d tracked blocks missing from the converged lane", cfg.batch, cfg.timer, missed)
		}
	}
}
