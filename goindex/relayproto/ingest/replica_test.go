package ingest

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/internal/prototest"
	"github.com/goindex/goindex/goindex/replica"
	"github.com/goindex/goindex/internal/testseed"
)

// *replica.Table is the production LaneTable; no adapter is needed.
var _ LaneTable = (*replica.Table)(nil)

// TestReplica_RealProducerToRealTable runs two real producers through
// publishers, frames and a consumer into a real replica.Table, faults one
// lane on the way, and checks after a drain that both lanes equal their
// producers and that the replica's Probe finds every tracked block.
func TestReplica_RealProducerToRealTable(t *testing.T) {
	const n = 256
	cf, err := ckf.NewFormat(ckf.DefaultSeed, n)
	if err != nil {
		t.Fatal(err)
	}
	f := relayproto.FormatOf(cf)
	tbl, err := replica.New(replica.Config{Lanes: 2, Buckets: n})
	if err != nil {
		t.Fatal(err)
	}
	m := relayproto.Manifest{ConsumerInstance: 42, Domain: prototest.Domain, Format: f, Lanes: []relayproto.PoolID{{Domain: prototest.Domain, DC: 1}, {Domain: prototest.Domain, DC: 2}}}
	c, err := New(m, tbl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(testseed.For(t, 31), 1))
	type lane struct {
		d   *dc
		p   *ckf.Producer
		gen *eventGen
	}
	var lanes []lane
	for i := range 2 {
		p, err := ckf.New(ckf.Config{Format: cf})
		if err != nil {
			t.Fatal(err)
		}
		ln := lane{d: newDCOver(t, c, i, f, 100, p), p: p, gen: newEventGen(rng, 2)}
		ln.d.advance = func(_ *rand.Rand, events int) error {
			for range events {
				ev := ln.gen.next()
				step, err := p.Apply(&ev)
				if err != nil && !errors.Is(err, ckf.ErrCapacityExhausted) {
					t.Fatalf("Apply: %v", err)
				}
				if step == ckf.StepPublish {
					if _, err := ln.d.pub.Publish(p.Drain(nil)); err != nil {
						return err
					}
				}
			}
			_, err := ln.d.pub.Publish(p.Drain(nil)) // the timer flush
			return err
		}
		ln.d.recover()
		lanes = append(lanes, ln)
	}
	lose := false
	for round := range 200 {
		lose = lose || round == 100
		for i, ln := range lanes {
			if err := ln.d.step(rng, 1+rng.IntN(6)); err != nil {
				t.Fatal(err)
			}
			if i == 0 && lose && len(ln.d.w.queue) > 0 {
				ln.d.w.queue, lose = nil, false // lose lane 0's delta: the next one faults it
			}
			ln.d.w.pump()
			if ln.d.lane.Status().State != StateReady {
				ln.d.recover()
			}
		}
	}
	for i, ln := range lanes {
		if o := ln.d.drain(); o != Acknowledged {
			t.Errorf("lane %d drain = %v", i, o)
		}
		if got, want := tbl.AppendLane(nil, i), ln.p.AppendWords(nil); !slices.Equal(got, want) {
			t.Errorf("lane %d of the replica differs from its producer", i)
		}
		if tbl.Ready()&(1<<i) == 0 {
			t.Errorf("lane %d is not ready in the replica", i)
		}
		if st := ln.p.Stats(); st.CapacityOmissions != 0 || st.TrackedBlocks == 0 {
			t.Fatalf("lane %d: %d omissions, %d tracked blocks", i, st.CapacityOmissions, st.TrackedBlocks)
		}
		for mi := range ln.gen.members {
			for _, ext := range ln.gen.keys[mi] {
				if tbl.Probe(cf.Probe(ln.gen.lineage[mi][ext]), 1<<i)&(1<<i) == 0 {
					t.Fatalf("lane %d: a tracked block is missing from the replica", i)
				}
			}
		}
	}
	if faults(lanes[0].d.lane) == 0 || faults(lanes[1].d.lane) != 0 {
		t.Errorf("faults: lane 0 %d (want ≥ 1), lane 1 %d (want 0)", faults(lanes[0].d.lane), faults(lanes[1].d.lane))
	}
}
