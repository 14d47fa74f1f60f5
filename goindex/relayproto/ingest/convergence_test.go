package ingest

import (
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/publish"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/internal/testseed"
)

// faultKind is one fault the convergence test injects on one lane.
type faultKind int

const (
	faultDrop faultKind = iota
	faultDuplicate
	faultReorder
	faultCorrupt
	faultSinkFailure
	faultRelayRestart
	faultStaleReplay
	faultBadIndex
	faultWorkerCrash
	faultKinds
)

// inject applies fault k to lane d's queued traffic or its relay.
func (g *grid) inject(t *testing.T, d *dc, k faultKind) {
	t.Helper()
	q := d.w.queue
	switch k {
	case faultDrop:
		if len(q) > 0 {
			i := g.rng.IntN(len(q))
			d.w.queue = slices.Delete(q, i, i+1)
		}
	case faultDuplicate:
		if len(q) > 0 {
			d.w.queue = append(q, q[g.rng.IntN(len(q))])
		}
	case faultReorder:
		if len(q) > 1 {
			i, j := g.rng.IntN(len(q)), g.rng.IntN(len(q))
			q[i], q[j] = q[j], q[i]
		}
	case faultCorrupt:
		if len(q) > 0 {
			f := slices.Clone(q[g.rng.IntN(len(q))])
			f[g.rng.IntN(len(f))] ^= byte(1 + g.rng.IntN(255))
			d.w.queue = append(q, f)
		}
	case faultSinkFailure:
		d.w.fail = true
		if err := d.step(g.rng, 1+g.rng.IntN(3)); err != nil && d.pub.Status().Fence == publish.FenceNone { // every publisher error fences it
			t.Fatalf("Publish into a failing sink: %v", err)
		}
		d.w.fail = false
	case faultRelayRestart:
		d.restart()
	case faultStaleReplay:
		if n := len(d.w.history); n > 0 {
			d.w.queue = append(q, d.w.history[g.rng.IntN(n)])
		}
	case faultBadIndex:
		for i, f := range q {
			if bad, ok := decodeDelta(f); ok {
				bad.Images = append(bad.Images, relayproto.Image{Bucket: uint32(d.lane.n) + uint32(g.rng.IntN(9))})
				q[i], _ = wire.AppendFrame(nil, bad)
				break
			}
		}
	case faultWorkerCrash:
		g.tbl.panicAfter[d.lane.Index()] = 1 + g.rng.IntN(3)
		func() {
			defer func() {
				if recover() != nil {
					d.w.queue = nil
					d.lane.Release()
				}
			}()
			d.w.pump()
		}()
		g.tbl.panicAfter[d.lane.Index()] = 0
	}
}

// heal is the control plane: a lane that is not READY, or whose relay is
// fenced or restarted (its identity no longer matches), gets a new lease and
// a snapshot.
func (g *grid) heal() {
	for _, d := range g.dcs {
		st := d.lane.Status()
		if st.State != StateReady || d.pub.Status().Fence != publish.FenceNone || st.Identity != d.id {
			d.recover()
			g.recoveries++
		}
	}
}

// TestConvergence_RandomBatchesCadenceAndFaults is spec §9 item 11: random
// word-level batch streams at random cadence (1, 3 or 16 events per
// boundary, or an early timer flush), random faults on random lanes, and
// after an exact drain every lane's words equal its producer's, byte for
// byte.
func TestConvergence_RandomBatchesCadenceAndFaults(t *testing.T) {
	seeds, rounds := 8, 300
	if testing.Short() {
		seeds, rounds = 2, 100
	}
	base := testseed.For(t, 1000)
	for s := range uint64(seeds) {
		seed := base + s
		g := newGrid(t, 4, 128, 48, Config{OrderedHeartbeats: seed%2 == 0}, seed)
		for _, d := range g.dcs {
			d.w.lossy = true
		}
		injected := make([]int, faultKinds)
		for round := range rounds {
			for _, d := range g.dcs {
				events := []int{1, 3, 16}[g.rng.IntN(3)]
				if g.rng.IntN(4) == 0 { // the timer fired before the window filled
					events = 1 + g.rng.IntN(events)
				}
				fenced := d.pub.Status().Fence != publish.FenceNone
				if err := d.step(g.rng, events); err != nil && !fenced { // only a fenced publisher may refuse
					t.Fatalf("seed %d round %d lane %d: Publish: %v", seed, round, d.lane.Index(), err)
				}
				if g.rng.IntN(20) == 0 {
					k := faultKind(g.rng.IntN(int(faultKinds)))
					injected[k]++
					g.inject(t, d, k)
				}
				if g.rng.IntN(5) == 0 {
					if h, err := d.pub.Heartbeat(); err == nil {
						_ = d.w.Send(h)
					}
				}
				d.w.pump()
			}
			if g.rng.IntN(3) == 0 {
				g.heal()
			}
		}
		// Exact drain: heal until every lane acknowledges its marker.
		for _, d := range g.dcs {
			acked := false
			for try := 0; try < 4 && !acked; try++ {
				g.heal()
				acked = d.drain() == Acknowledged
			}
			if !acked {
				t.Errorf("seed %d: lane %d never acknowledged a drain marker", seed, d.lane.Index())
			}
			d.checkConverged(g.tbl)
		}
		corrupt := 0
		for _, d := range g.dcs {
			corrupt += d.w.corrupt
		}
		if g.recoveries == 0 {
			t.Errorf("seed %d: faults %v caused no recovery", seed, injected)
		}
		t.Logf("seed %d: faults injected by kind %v, %d recoveries, %d corrupt frames dropped", seed, injected, g.recoveries, corrupt)
	}
}
