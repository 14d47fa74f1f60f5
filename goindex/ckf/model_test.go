package ckf

import (
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

// model is the trivial exact reference of spec §9 item 5: the set of
// (member, source id, canonical) triples, kept as one map per member, plus
// the counters the producer must agree with.
type model struct {
	lin                                   map[kv.Member]map[uint64]uint64
	unknown, missing, remaps, invalidSeqs uint64
	clearWorker                           bool
}

func newModel(clearWorker bool) *model {
	return &model{lin: map[kv.Member]map[uint64]uint64{}, clearWorker: clearWorker}
}

// apply applies ev and returns the error class the producer must report;
// for a Stored event that the model accepts, the producer may also report
// ErrCapacityExhausted.
func (md *model) apply(ev *kv.Event) error {
	switch ev.Kind {
	case kv.Stored:
		return md.store(ev)
	case kv.Removed:
		lin := md.lin[ev.Member]
		for _, src := range ev.Removed {
			if _, ok := lin[src]; !ok {
				md.unknown++
				continue
			}
			delete(lin, src)
		}
		if len(lin) == 0 {
			delete(md.lin, ev.Member)
		}
	case kv.Cleared:
		if md.clearWorker {
			md.removeWorker(ev.Member.Worker)
		} else {
			delete(md.lin, ev.Member)
		}
	}
	return nil
}

func (md *model) store(ev *kv.Event) error {
	lin := md.lin[ev.Member]
	var parent uint64
	if ev.HasParent {
		c, ok := lin[ev.Parent]
		if !ok {
			md.missing++
			return ErrParentBlockNotFound
		}
		parent = c
	} else if ev.HasStart && ev.StartPosition != 0 {
		md.invalidSeqs++
		return ErrInvalidBlockSequence
	}
	locals := make([]uint64, len(ev.Blocks))
	for i, b := range ev.Blocks {
		locals[i] = b.Local
	}
	chain := kv.AppendChain(nil, ev.HasParent, parent, locals)
	next := maps.Clone(lin)
	if next == nil {
		next = map[uint64]uint64{}
	}
	for i, b := range ev.Blocks {
		if old, ok := next[b.External]; ok && old != chain[i] {
			md.remaps++
			return ErrInvalidBlockSequence
		}
		next[b.External] = chain[i]
	}
	if len(next) > 0 {
		md.lin[ev.Member] = next
	}
	return nil
}

func (md *model) removeWorker(w uint64) {
	for m := range md.lin {
		if m.Worker == w {
			delete(md.lin, m)
		}
	}
}

// owners returns the owner count of every canonical (I1's right side).
func (md *model) owners() map[uint64]uint32 {
	counts := map[uint64]uint32{}
	for _, lin := range md.lin {
		for _, c := range lin {
			counts[c]++
		}
	}
	return counts
}

// streamGen draws random event streams over a few members: parented and
// root stores over a small local alphabet (so members share blocks and
// re-store them), aliases (several source ids for one canonical), remaps,
// missing parents, bad start positions, removes with unknown and repeated
// ids, clears, and member and worker removals.
type streamGen struct {
	rng     *rand.Rand
	members []kv.Member
	md      *model
}

// newStreamGen returns a generator over workers 10–12 with ranks 0 and 1
// that reads the expected state from md.
func newStreamGen(rng *rand.Rand, md *model) *streamGen {
	g := &streamGen{rng: rng, md: md}
	for w := range uint64(3) {
		for r := range uint32(2) {
			g.members = append(g.members, kv.Member{Worker: 10 + w, Rank: r})
		}
	}
	return g
}

var aliasSalts = [3]uint64{0, 0xA11A5, 0xB0B0CAFE}

func (g *streamGen) ext(c uint64, alias int) uint64 {
	r := splitmix{state: c ^ aliasSalts[alias]}
	return r.next()
}

// srcs returns member m's source ids in a deterministic order.
func (g *streamGen) srcs(m kv.Member) []uint64 {
	return slices.Sorted(maps.Keys(g.md.lin[m]))
}

// op is one step of the stream: an event, or a lifecycle call when
// lifecycle is set (then ev.Member or ev.Member.Worker names its target).
type op struct {
	ev        kv.Event
	lifecycle int // 0: Apply(ev); 1: RemoveMember; 2: RemoveWorker
}

func (g *streamGen) next() op {
	m := g.members[g.rng.IntN(len(g.members))]
	switch r := g.rng.IntN(100); {
	case r < 60:
		return op{ev: g.store(m)}
	case r < 90:
		ev := kv.Event{Member: m, Kind: kv.Removed}
		srcs := g.srcs(m)
		for range 1 + g.rng.IntN(4) {
			switch {
			case len(srcs) > 0 && g.rng.IntN(5) > 0:
				ev.Removed = append(ev.Removed, srcs[g.rng.IntN(len(srcs))])
			default:
				ev.Removed = append(ev.Removed, g.rng.Uint64()) // unknown
			}
		}
		return op{ev: ev}
	case r < 95:
		return op{ev: kv.Event{Member: m, Kind: kv.Cleared}}
	case r < 98:
		return op{ev: kv.Event{Member: m}, lifecycle: 1}
	}
	return op{ev: kv.Event{Member: m}, lifecycle: 2}
}

// apply performs o on the producer and on the model, returning the
// producer's step and error and the error the model expects.
func (o *op) apply(p *Producer, md *model) (st Step, err, want error) {
	switch o.lifecycle {
	case 0:
		st, err = p.Apply(&o.ev)
		want = md.apply(&o.ev)
	case 1:
		st, err = p.RemoveMember(o.ev.Member)
		delete(md.lin, o.ev.Member)
	case 2:
		st, err = p.RemoveWorker(o.ev.Member.Worker)
		md.removeWorker(o.ev.Member.Worker)
	}
	return st, err, want
}

func (g *streamGen) store(m kv.Member) kv.Event {
	ev := kv.Event{Member: m, Kind: kv.Stored}
	srcs := g.srcs(m)
	var parent uint64
	switch r := g.rng.IntN(100); {
	case r < 5:
		ev.HasParent, ev.Parent = true, g.rng.Uint64() // missing parent
	case r < 8:
		ev.HasStart, ev.StartPosition = true, 1+g.rng.Uint32N(9) // position without parent
	case r < 35 || len(srcs) == 0:
		ev.HasStart = g.rng.IntN(2) == 0 // root, position 0 or none
	default:
		ev.HasParent, ev.Parent = true, srcs[g.rng.IntN(len(srcs))]
		parent = g.md.lin[m][ev.Parent]
	}
	alias := 0
	if g.rng.IntN(5) == 0 {
		alias = 1 + g.rng.IntN(2)
	}
	locals := make([]uint64, 1+g.rng.IntN(6))
	for i := range locals {
		locals[i] = 1 + g.rng.Uint64N(4)
	}
	chain := kv.AppendChain(nil, ev.HasParent, parent, locals)
	for i, l := range locals {
		ev.Blocks = append(ev.Blocks, kv.Block{External: g.ext(chain[i], alias), Local: l})
	}
	switch r := g.rng.IntN(100); {
	case r < 4 && len(srcs) > 0: // remap an id the member already maps
		ev.Blocks[g.rng.IntN(len(ev.Blocks))].External = srcs[g.rng.IntN(len(srcs))]
	case r < 6 && len(ev.Blocks) > 1: // repeat an id within the batch
		i := g.rng.IntN(len(ev.Blocks) - 1)
		ev.Blocks[i+1+g.rng.IntN(len(ev.Blocks)-1-i)].External = ev.Blocks[i].External
	}
	return ev
}

// checkProducer checks I1–I5 and the counters against the model after
// every event; wasResident is the resident set after the previous event.
func checkProducer(t *testing.T, p *Producer, md *model, wasResident map[uint64]bool, step int) map[uint64]bool {
	t.Helper()
	// The lineages equal the model's triples.
	if len(p.members) != len(md.lin) {
		t.Fatalf("step %d: producer has %d members, model %d", step, len(p.members), len(md.lin))
	}
	tracked := uint64(0)
	for m, want := range md.lin {
		lin := p.members[m]
		if lin == nil || lin.len() != len(want) {
			t.Fatalf("step %d: member %v lineage = %v, want %d mappings", step, m, lin, len(want))
		}
		for src, c := range want {
			if got := lin.find(src); got == nil || *got != c {
				t.Fatalf("step %d: member %v block %#x maps to %v, want %#x", step, m, src, got, c)
			}
		}
		tracked += uint64(len(want))
	}
	if p.tracked != tracked {
		t.Fatalf("step %d: tracked = %d, want %d", step, p.tracked, tracked)
	}
	// I1: owner counts.
	counts := md.owners()
	if p.owners.len() != len(counts) {
		t.Fatalf("step %d: producer owns %d canonicals, model %d", step, p.owners.len(), len(counts))
	}
	resident := map[uint64]bool{}
	var held []Probe
	for c, o := range p.owners.all() {
		if o.count != counts[c] {
			t.Fatalf("step %d: owners(%#x) = %d, want %d", step, c, o.count, counts[c])
		}
		if o.offered {
			t.Fatalf("step %d: owners(%#x) still marked offered after the call", step, c)
		}
		if o.resident {
			resident[c] = true
			held = append(held, p.f.Probe(c))
		} else if p.stats.CapacityOmissions == 0 {
			t.Fatalf("step %d: canonical %#x is owned but not resident, with no capacity omission", step, c)
		}
	}
	// I2, I3, I4: the slots are exactly the resident fingerprints, each in
	// its pair, one copy per canonical; residentCount counts them.
	checkPlacement(t, p.f, p.tab.words, held)
	slots := 0
	for _, w := range p.tab.words {
		slots += Bucket(w).Occupied()
	}
	if p.resident != uint64(len(resident)) || slots != len(resident) {
		t.Fatalf("step %d: residentCount %d, occupied slots %d, resident canonicals %d: want all equal", step, p.resident, slots, len(resident))
	}
	for c := range resident {
		pr := p.f.Probe(c)
		if !Contains(p.tab.words[pr.A], pr.FP) && !Contains(p.tab.words[pr.B], pr.FP) {
			t.Fatalf("step %d: resident canonical %#x (%+v) not found by Contains in A or B", step, c, pr)
		}
	}
	// I5: a resident canonical loses its fingerprint only with its last owner.
	for c := range wasResident {
		if counts[c] > 0 && !resident[c] {
			t.Fatalf("step %d: canonical %#x still has %d owners but lost its fingerprint", step, c, counts[c])
		}
	}
	s := p.Stats()
	if s.UnknownRemovals != md.unknown || s.MissingParents != md.missing || s.RemapRejections != md.remaps || s.InvalidSequences != md.invalidSeqs {
		t.Fatalf("step %d: counters unknown/missing/remap/invalid = %d/%d/%d/%d, want %d/%d/%d/%d", step,
			s.UnknownRemovals, s.MissingParents, s.RemapRejections, s.InvalidSequences, md.unknown, md.missing, md.remaps, md.invalidSeqs)
	}
	return resident
}

// TestProducer_AgreesWithExactModel is spec §9 item 5 with the replica
// property: random streams against the model, I1–I5 after every event,
// and a replica that applies every drained batch to a copy of the initial
// words equals the producer's filter byte for byte after every boundary,
// each batch holding exactly the buckets that changed since the last one.
func TestProducer_AgreesWithExactModel(t *testing.T) {
	seed := testSeed(t, 5)
	steps := 3000
	if testing.Short() {
		steps = 600
	}
	configs := []struct {
		buckets     uint64
		maxKicks    int
		batch       int
		clearWorker bool
	}{
		{1024, 0, 16, false},
		{256, 500, 3, true},
		{64, 8, 1, false},
		{32, 500, 16, false},
		{16, 500, 16, false},
		{8, 1, 3, false},
		{2, 4, 1, true},
	}
	for ci, cfg := range configs {
		rng := rand.New(rand.NewPCG(seed, uint64(ci)))
		f := mustFormat(t, cfg.buckets)
		p, err := New(Config{Format: f, MaxKicks: cfg.maxKicks, BatchEvents: cfg.batch, ClearWorker: cfg.clearWorker})
		if err != nil {
			t.Fatalf("config %d: New: %v", ci, err)
		}
		md := newModel(cfg.clearWorker)
		g := newStreamGen(rng, md)
		replica := make([]uint64, cfg.buckets)
		var resident map[uint64]bool
		var images []Image
		for step := range steps {
			o := g.next()
			omissions := p.stats.CapacityOmissions
			st, err, want := o.apply(p, md)
			switch {
			case want != nil && !errors.Is(err, want):
				t.Fatalf("config %d step %d: %+v → %v, want %v", ci, step, o, err, want)
			case want == nil && err != nil && !errors.Is(err, ErrCapacityExhausted):
				t.Fatalf("config %d step %d: %+v → %v, want nil or ErrCapacityExhausted", ci, step, o, err)
			case errors.Is(err, ErrCapacityExhausted) != (p.stats.CapacityOmissions > omissions):
				t.Fatalf("config %d step %d: %+v → %v while omissions went %d → %d", ci, step, o, err, omissions, p.stats.CapacityOmissions)
			}
			if o.lifecycle != 0 && st != StepPublish {
				t.Fatalf("config %d step %d: lifecycle call %d returned step %v, want publish", ci, step, o.lifecycle, st)
			}
			resident = checkProducer(t, p, md, resident, step)
			// Publish at every due boundary, and at random "timer" flushes.
			if st == StepPublish || rng.IntN(10) == 0 {
				images = p.Drain(images[:0])
				checkBatch(t, replica, p, images, step)
			}
		}
	}
}

// checkBatch checks one drained batch and applies it to replica.
func checkBatch(t *testing.T, replica []uint64, p *Producer, images []Image, step int) {
	t.Helper()
	changed := 0
	for b := range replica {
		if replica[b] != p.tab.words[b] {
			changed++
		}
	}
	if len(images) != changed {
		t.Fatalf("step %d: Drain returned %d images, want %d (buckets changed since the last boundary)", step, len(images), changed)
	}
	for i, im := range images {
		if i > 0 && images[i-1].Bucket >= im.Bucket {
			t.Fatalf("step %d: images %v not strictly ascending", step, images)
		}
		if im.Word != p.tab.words[im.Bucket] || replica[im.Bucket] == im.Word {
			t.Fatalf("step %d: image %+v: word now %#x, replica had %#x", step, im, p.tab.words[im.Bucket], replica[im.Bucket])
		}
		replica[im.Bucket] = im.Word
	}
	if !slices.Equal(replica, p.tab.words) {
		t.Fatalf("step %d: replica after batch differs from producer words", step)
	}
	if p.PendingEvents() != 0 || p.DirtyBuckets() != 0 {
		t.Fatalf("step %d: after Drain pending %d, dirty %d; want 0, 0", step, p.PendingEvents(), p.DirtyBuckets())
	}
}
