package ckf

import (
	"encoding/binary"
	"errors"
	"hash"
	"hash/fnv"
	"math/rand/v2"
	"testing"
)

// Pinned digests of everything a producer publishes over fixed streams:
// each event's step and error class, every drained batch's images, the
// final words and the counters. They were taken from the producer before
// its ingest path was restructured for speed; any change to the order of
// physical writes, the kick RNG's draws or the drain would change them.
// Layouts are part of what consumers copy, so a faster producer must
// publish the same bytes.
const (
	layoutDigestMooncake uint64 = 0x9ce5ca0f8337c364
	layoutDigestRandom   uint64 = 0xe86ffbcb7e139010
)

// layoutDigest folds a producer's published output into an FNV-1a hash.
type layoutDigest struct {
	buf [8]byte
	h   hash.Hash64
}

func newLayoutDigest() *layoutDigest { return &layoutDigest{h: fnv.New64a()} }

func (d *layoutDigest) add(v uint64) {
	binary.LittleEndian.PutUint64(d.buf[:], v)
	d.h.Write(d.buf[:])
}

func (d *layoutDigest) step(st Step, err error) {
	class := uint64(0)
	for i, e := range []error{ErrParentBlockNotFound, ErrInvalidBlockSequence, ErrOwnershipDegreeOverflow, ErrCapacityExhausted, ErrInvariantViolation, ErrFenced, ErrBadEvent} {
		if errors.Is(err, e) {
			class |= 1 << i
		}
	}
	if err != nil && class == 0 {
		class = 1 << 63
	}
	d.add(uint64(st)<<32 | class)
}

func (d *layoutDigest) images(ims []Image) {
	d.add(uint64(len(ims)))
	for _, im := range ims {
		d.add(uint64(im.Bucket))
		d.add(im.Word)
	}
}

func (d *layoutDigest) final(p *Producer) uint64 {
	for _, w := range p.AppendWords(nil) {
		d.add(w)
	}
	s := p.Stats()
	for _, v := range []uint64{s.UnknownRemovals, s.MissingParents, s.RemapRejections, s.InvalidSequences, s.OwnershipOverflows,
		s.CapacityOmissions, s.Touches, s.EmittedImages, s.NetReversions, s.Batches, s.InvariantViolations,
		uint64(s.Members), s.TrackedBlocks, s.Canonicals, s.Resident} {
		d.add(v)
	}
	return d.h.Sum64()
}

// TestProducer_PublishesPinnedLayouts replays a Mooncake stream into a
// filter too small for it (so insertions kick and some fail) and the
// model test's random streams (remaps, repeats, aliases, clears, fences),
// and holds the digest of everything published to the pinned value.
func TestProducer_PublishesPinnedLayouts(t *testing.T) {
	st := mooncakeStream(readTrace(t, mooncakeTrace), 4, 1024, 2)
	f := mustFormat(t, 512) // 2048 slots for up to 4096 blocks
	p, err := New(Config{Format: f, MaxKicks: 64})
	if err != nil {
		t.Fatal(err)
	}
	d := newLayoutDigest()
	var images []Image
	for i := range st.events {
		step, err := p.Apply(&st.events[i])
		d.step(step, err)
		if step == StepPublish {
			images = p.Drain(images[:0])
			d.images(images)
		}
	}
	if s := p.Stats(); s.CapacityOmissions == 0 || s.Touches <= s.Resident || s.NetReversions == 0 {
		t.Fatalf("Mooncake stream stats %+v: want kicks, omissions and net reversions exercised", s)
	}
	if got := d.final(p); got != layoutDigestMooncake {
		t.Errorf("Mooncake stream digest %#x, want %#x", got, layoutDigestMooncake)
	}

	d = newLayoutDigest()
	for ci, cfg := range []struct {
		buckets     uint64
		maxKicks    int
		batch       int
		clearWorker bool
	}{{1024, 0, 16, false}, {64, 8, 1, false}, {16, 500, 16, true}, {2, 4, 1, false}} {
		rng := rand.New(rand.NewPCG(7, uint64(ci)))
		p, err := New(Config{Format: mustFormat(t, cfg.buckets), MaxKicks: cfg.maxKicks, BatchEvents: cfg.batch, ClearWorker: cfg.clearWorker})
		if err != nil {
			t.Fatal(err)
		}
		md := newModel(cfg.clearWorker)
		g := newStreamGen(rng, md)
		for range 2000 {
			o := g.next()
			step, err, _ := o.apply(p, md)
			d.step(step, err)
			if step == StepPublish || rng.IntN(10) == 0 {
				images = p.Drain(images[:0])
				d.images(images)
			}
		}
		d.final(p)
	}
	if got := d.h.Sum64(); got != layoutDigestRandom {
		t.Errorf("random streams digest %#x, want %#x", got, layoutDigestRandom)
	}
}
