package ckf

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

var (
	memberA = kv.Member{Worker: 1, Rank: 0}
	memberB = kv.Member{Worker: 2, Rank: 0}
)

func newTestProducer(t *testing.T, expectedBlocks uint64, cfg Config) *Producer {
	t.Helper()
	n, err := BucketCount(expectedBlocks)
	if err != nil {
		t.Fatalf("BucketCount(%d): %v", expectedBlocks, err)
	}
	cfg.Format = mustFormat(t, n)
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return p
}

// rootRun is a Stored event of a chain from the root with locals
// base, base+1, …; block k's source id is the chain hash at k.
func rootRun(m kv.Member, base uint64, blocks int) kv.Event {
	locals := make([]uint64, blocks)
	for i := range locals {
		locals[i] = base + uint64(i)
	}
	chain := kv.AppendChain(nil, false, 0, locals)
	ev := kv.Event{Member: m, Kind: kv.Stored}
	for i := range locals {
		ev.Blocks = append(ev.Blocks, kv.Block{External: chain[i], Local: locals[i]})
	}
	return ev
}

// roots is one Stored event of blocks independent root blocks (each block
// starts its own chain only when stored alone, so each is its own event).
func roots(m kv.Member, base uint64, blocks int) []kv.Event {
	evs := make([]kv.Event, blocks)
	for i := range evs {
		evs[i] = kv.Event{Member: m, Kind: kv.Stored, Blocks: []kv.Block{{External: base + uint64(i), Local: base + uint64(i)}}}
	}
	return evs
}

func apply(t *testing.T, p *Producer, ev kv.Event) error {
	t.Helper()
	_, err := p.Apply(&ev)
	return err
}

func mustApply(t *testing.T, p *Producer, ev kv.Event) {
	t.Helper()
	if err := apply(t, p, ev); err != nil {
		t.Fatalf("Apply(%v %v, %d blocks) = %v, want nil", ev.Kind, ev.Member, len(ev.Blocks)+len(ev.Removed), err)
	}
}

func removal(m kv.Member, srcs ...uint64) kv.Event {
	return kv.Event{Member: m, Kind: kv.Removed, Removed: srcs}
}

func resident(p *Producer, c uint64) bool {
	o := p.owners.find(c)
	return o != nil && o.resident
}

func TestProducer_FinalOwnerRemovalClearsFingerprint(t *testing.T) {
	p := newTestProducer(t, 64, Config{})
	ev := rootRun(memberA, 100, 4)
	mustApply(t, p, ev)
	shared := ev
	shared.Member = memberB
	mustApply(t, p, shared)
	c := ev.Blocks[2].External // root-run source ids equal their canonicals
	pr := p.f.Probe(c)
	mustApply(t, p, removal(memberA, c))
	if !resident(p, c) || !(Contains(p.Word(pr.A), pr.FP) || Contains(p.Word(pr.B), pr.FP)) {
		t.Fatalf("after removing 1 of 2 owners of %#x: resident %v, want still resident and in the filter", c, resident(p, c))
	}
	mustApply(t, p, removal(memberB, c))
	if p.owners.find(c) != nil || p.Stats().Resident != 3 {
		t.Errorf("after removing both owners of %#x: owner entry %v, resident %d; want none, 3", c, p.owners.find(c), p.Stats().Resident)
	}
}

func TestProducer_RemapBatchCommitsNothing(t *testing.T) {
	p := newTestProducer(t, 64, Config{})
	mustApply(t, p, rootRun(memberA, 1, 3))
	p.Drain(nil)
	words, stats := p.AppendWords(nil), p.Stats()
	// Two new blocks below the root, then a block reusing the id of the
	// member's second block for a different canonical.
	first := rootRun(memberA, 1, 3)
	ev := kv.Event{Member: memberA, Kind: kv.Stored, HasParent: true, Parent: first.Blocks[0].External,
		Blocks: []kv.Block{{External: 0xAAAA, Local: 50}, {External: 0xBBBB, Local: 51}, {External: first.Blocks[1].External, Local: 52}}}
	st, err := p.Apply(&ev)
	if !errors.Is(err, ErrInvalidBlockSequence) {
		t.Fatalf("Apply(remapping store) = %v, want ErrInvalidBlockSequence", err)
	}
	if !slices.Equal(words, p.AppendWords(nil)) {
		t.Error("remap rejection changed the filter words")
	}
	got := p.Stats()
	if got.TrackedBlocks != stats.TrackedBlocks || got.Canonicals != stats.Canonicals || got.RemapRejections != 1 {
		t.Errorf("after remap rejection: tracked %d canonicals %d rejections %d; want %d, %d, 1", got.TrackedBlocks, got.Canonicals, got.RemapRejections, stats.TrackedBlocks, stats.Canonicals)
	}
	if p.members[memberA].find(0xAAAA) != nil || p.members[memberA].find(0xBBBB) != nil {
		t.Error("remap rejection kept the batch's earlier new mappings")
	}
	if st != StepArmTimer || p.PendingEvents() != 1 {
		t.Errorf("rejected event: step %v, pending %d; want arm-timer, 1 (a failed event still counts)", st, p.PendingEvents())
	}
	if images := p.Drain(nil); len(images) != 0 {
		t.Errorf("Drain after a rejected event = %v, want no batch", images)
	}
}

func TestProducer_StoreThenRemoveInOneWindowPublishesNothing(t *testing.T) {
	p := newTestProducer(t, 64, Config{})
	ev := rootRun(memberA, 7, 5)
	mustApply(t, p, ev)
	var ids []uint64
	for _, b := range ev.Blocks {
		ids = append(ids, b.External)
	}
	mustApply(t, p, removal(memberA, ids...))
	if images := p.Drain(nil); len(images) != 0 {
		t.Fatalf("Drain after store+remove in one window = %v, want no batch", images)
	}
	if s := p.Stats(); s.NetReversions == 0 || s.Batches != 0 || s.EmittedImages != 0 {
		t.Errorf("stats after the reverted window: %+v; want net reversions > 0, no batch, no image", s.Counters)
	}
}

func TestProducer_TwoBucketTableHoldsExactlyEightFingerprints(t *testing.T) {
	p := newTestProducer(t, 1, Config{})
	if n := p.Format().Buckets(); n != 2 {
		t.Fatalf("bucket_count(1) = %d, want 2", n)
	}
	evs := roots(memberA, 1000, 9)
	for _, ev := range evs[:8] {
		mustApply(t, p, ev)
	}
	for b := range uint32(2) {
		if Bucket(p.Word(b)).Occupied() != SlotsPerBucket {
			t.Fatalf("after 8 inserts bucket %d = %#x, want full", b, p.Word(b))
		}
	}
	before := p.AppendWords(nil)
	dirty := p.DirtyBuckets()
	if err := apply(t, p, evs[8]); !errors.Is(err, ErrCapacityExhausted) {
		t.Fatalf("9th store = %v, want ErrCapacityExhausted", err)
	}
	if !slices.Equal(before, p.AppendWords(nil)) || p.DirtyBuckets() != dirty {
		t.Errorf("9th store changed the filter (%#x → %#x) or the window (%d → %d dirty)", before, p.AppendWords(nil), dirty, p.DirtyBuckets())
	}
	if s := p.Stats(); s.Resident != 8 || s.TrackedBlocks != 9 || s.CapacityOmissions != 1 || s.LoadFactor != 1 {
		t.Errorf("stats = resident %d tracked %d omissions %d load %v; want 8, 9, 1, 1", s.Resident, s.TrackedBlocks, s.CapacityOmissions, s.LoadFactor)
	}
}

func TestProducer_OmittedBlocksKeepLineageAndAreAdmittedLater(t *testing.T) {
	p := newTestProducer(t, 1, Config{BatchEvents: 1})
	ev := rootRun(memberA, 1, 32)
	if err := apply(t, p, ev); !errors.Is(err, ErrCapacityExhausted) {
		t.Fatalf("storing 32 blocks in 8 slots = %v, want ErrCapacityExhausted", err)
	}
	s := p.Stats()
	if s.CapacityOmissions != 24 || s.Resident != 8 || s.TrackedBlocks != 32 || s.Canonicals != 32 {
		t.Fatalf("after 32 stores: omissions %d resident %d tracked %d canonicals %d; want 24, 8, 32, 32", s.CapacityOmissions, s.Resident, s.TrackedBlocks, s.Canonicals)
	}
	var admitted, omitted []uint64
	for _, b := range ev.Blocks {
		if resident(p, b.External) {
			admitted = append(admitted, b.External)
		} else {
			omitted = append(omitted, b.External)
		}
	}
	// An omitted block's later removal only drops its owner.
	words := p.AppendWords(nil)
	mustApply(t, p, removal(memberA, omitted[0]))
	if !slices.Equal(words, p.AppendWords(nil)) || p.Stats().TrackedBlocks != 31 {
		t.Fatalf("removing an omitted block changed the filter or left %d tracked (want 31)", p.Stats().TrackedBlocks)
	}
	// Free three slots, then re-store the whole run: the member's own
	// re-offers get relocation-free insertion and fill exactly those slots.
	mustApply(t, p, removal(memberA, admitted[:3]...))
	omissions := p.Stats().CapacityOmissions
	if err := apply(t, p, ev); !errors.Is(err, ErrCapacityExhausted) {
		t.Fatalf("re-store after freeing 3 slots = %v, want ErrCapacityExhausted (4 new candidates, 3 slots)", err)
	}
	// The run now has 4 new candidates (the removed blocks, which are full
	// insertions) and 23 omitted re-offers; 3 free slots admit 3 of the 4
	// candidates first, then nothing is left for re-offers.
	if s := p.Stats(); s.Resident != 8 || s.CapacityOmissions != omissions+1 {
		t.Fatalf("after re-store: resident %d omissions %d; want 8, %d", s.Resident, s.CapacityOmissions, omissions+1)
	}
	// Now blocks 0..7 are resident and 8..31 omitted, all mapped by A.
	for i, b := range ev.Blocks {
		if resident(p, b.External) != (i < 8) {
			t.Fatalf("after re-store: block %d resident %v, want blocks 0..7 resident only", i, resident(p, b.External))
		}
	}
	ext := func(i int) uint64 { return ev.Blocks[i].External }
	// A second owner of an omitted canonical admits it through full
	// insertion: B takes blocks 0..7 (owner counts only), frees a slot by
	// dropping the last owner of block 3, then stores block 8 below 7.
	mustApply(t, p, rootRun(memberB, 1, 8))
	mustApply(t, p, removal(memberA, ext(3)))
	mustApply(t, p, removal(memberB, ext(3)))
	omissions = p.Stats().CapacityOmissions
	mustApply(t, p, kv.Event{Member: memberB, Kind: kv.Stored, HasParent: true, Parent: ext(7), Blocks: ev.Blocks[8:9]})
	if o := p.owners.find(ext(8)); !resident(p, ext(8)) || o.count != 2 || p.Stats().CapacityOmissions != omissions {
		t.Fatalf("second owner of omitted block 8: resident %v, owners %d, omissions %d → %d; want admitted with 2 owners", resident(p, ext(8)), o.count, omissions, p.Stats().CapacityOmissions)
	}
	// The same member re-storing an omitted block admits it through a
	// relocation-free insertion once a slot is free, uncounted.
	mustApply(t, p, removal(memberA, ext(4)))
	mustApply(t, p, removal(memberB, ext(4)))
	mustApply(t, p, kv.Event{Member: memberA, Kind: kv.Stored, HasParent: true, Parent: ext(8), Blocks: ev.Blocks[9:10]})
	if o := p.owners.find(ext(9)); !resident(p, ext(9)) || o.count != 1 || p.Stats().CapacityOmissions != omissions {
		t.Fatalf("re-offer of omitted block 9: resident %v, owners %d, omissions %d → %d; want admitted, 1 owner, uncounted", resident(p, ext(9)), o.count, omissions, p.Stats().CapacityOmissions)
	}
}

func TestProducer_ReverseRemovalOf128LeavesEveryWordZero(t *testing.T) {
	p := newTestProducer(t, 128, Config{})
	evs := roots(memberA, 1<<20, 128)
	for _, ev := range evs {
		mustApply(t, p, ev)
	}
	if s := p.Stats(); s.Resident != 128 || s.CapacityOmissions != 0 {
		t.Fatalf("after 128 inserts into %d buckets: resident %d, omissions %d; want 128, 0", s.Buckets, s.Resident, s.CapacityOmissions)
	}
	p.Drain(nil)
	for i := len(evs) - 1; i >= 0; i-- {
		mustApply(t, p, removal(memberA, evs[i].Blocks[0].External))
	}
	for b, w := range p.AppendWords(nil) {
		if w != 0 {
			t.Errorf("after removing all 128 in reverse: bucket %d = %#x, want 0", b, w)
		}
	}
	images := p.Drain(nil)
	for _, im := range images {
		if im.Word != 0 {
			t.Errorf("final batch image %+v, want word 0 (removals publish 0 words)", im)
		}
	}
	if len(images) == 0 || p.Stats().Members != 0 {
		t.Errorf("final batch has %d images and %d members remain; want > 0 images, 0 members", len(images), p.Stats().Members)
	}
}

func TestProducer_MissingParentRejectsWholeEvent(t *testing.T) {
	p := newTestProducer(t, 64, Config{})
	mustApply(t, p, rootRun(memberA, 1, 2))
	ev := kv.Event{Member: memberB, Kind: kv.Stored, HasParent: true, Parent: rootRun(memberA, 1, 2).Blocks[1].External,
		Blocks: []kv.Block{{External: 5, Local: 5}}}
	if err := apply(t, p, ev); !errors.Is(err, ErrParentBlockNotFound) {
		t.Fatalf("store below another member's block = %v, want ErrParentBlockNotFound", err)
	}
	pos := kv.Event{Member: memberB, Kind: kv.Stored, HasStart: true, StartPosition: 3, Blocks: []kv.Block{{External: 5, Local: 5}}}
	if err := apply(t, p, pos); !errors.Is(err, ErrInvalidBlockSequence) {
		t.Fatalf("store at position 3 without parent = %v, want ErrInvalidBlockSequence", err)
	}
	if s := p.Stats(); s.Members != 1 || s.TrackedBlocks != 2 || s.MissingParents != 1 || s.InvalidSequences != 1 {
		t.Errorf("stats = %+v; want 1 member, 2 tracked, 1 missing parent, 1 invalid sequence", s)
	}
}

func TestProducer_OwnershipOverflowRejectsWholeEvent(t *testing.T) {
	p := newTestProducer(t, 64, Config{})
	ev := rootRun(memberA, 1, 3)
	mustApply(t, p, ev)
	c := ev.Blocks[1].External
	p.owners.find(c).count = math.MaxUint32 // as if 2^32−1 members held it
	words := p.AppendWords(nil)
	other := rootRun(memberB, 1, 3)
	if err := apply(t, p, other); !errors.Is(err, ErrOwnershipDegreeOverflow) {
		t.Fatalf("store pushing owners of %#x past 2^32−1 = %v, want ErrOwnershipDegreeOverflow", c, err)
	}
	if p.members[memberB] != nil || p.owners.find(ev.Blocks[0].External).count != 1 || p.owners.find(c).count != math.MaxUint32 {
		t.Error("overflow rejection left member B's mappings or owner increments behind")
	}
	if !slices.Equal(words, p.AppendWords(nil)) || p.Stats().OwnershipOverflows != 1 {
		t.Errorf("overflow rejection changed the words or counted %d overflows (want 1)", p.Stats().OwnershipOverflows)
	}
}

func TestProducer_MissingFingerprintFencesAndRestores(t *testing.T) {
	p := newTestProducer(t, 64, Config{})
	ev := rootRun(memberA, 1, 3)
	mustApply(t, p, ev)
	p.Drain(nil)
	c := ev.Blocks[2].External
	pr := p.f.Probe(c)
	for _, b := range []uint32{pr.A, pr.B} { // corrupt the filter behind the producer's back
		w := Bucket(p.tab.words[b])
		for i := w.First(pr.FP); i >= 0; i = w.First(pr.FP) {
			w = w.WithSlot(i, 0)
		}
		p.tab.words[b] = uint64(w)
	}
	err := apply(t, p, removal(memberA, ev.Blocks[0].External, c))
	if !errors.Is(err, ErrInvariantViolation) || p.Fenced() == nil {
		t.Fatalf("removing %#x with its fingerprint gone = %v (fenced %v), want ErrInvariantViolation and a fence", c, err, p.Fenced())
	}
	if o := p.owners.find(c); o == nil || o.count != 1 || !o.resident || p.members[memberA].find(c) == nil {
		t.Errorf("after the violation %#x's state = %v, want restored (1 owner, resident, mapped)", c, o)
	}
	if p.members[memberA].find(ev.Blocks[0].External) != nil {
		t.Error("the block removed before the violation was restored too; it must stay removed")
	}
	if err := apply(t, p, rootRun(memberB, 9, 1)); !errors.Is(err, ErrFenced) || !errors.Is(err, ErrInvariantViolation) {
		t.Errorf("Apply on a fenced producer = %v, want ErrFenced wrapping the violation", err)
	}
	if _, err := p.RemoveWorker(1); !errors.Is(err, ErrFenced) {
		t.Errorf("RemoveWorker on a fenced producer = %v, want ErrFenced", err)
	}
	if images := p.Drain(nil); len(images) != 0 || p.DirtyBuckets() != 0 {
		t.Errorf("Drain on a fenced producer = %v, want nothing published and the window discarded", images)
	}
}

func TestProducer_ClearsDropEveryAlias(t *testing.T) {
	p := newTestProducer(t, 64, Config{})
	ev := rootRun(memberA, 1, 3)
	mustApply(t, p, ev)
	alias := ev // same canonicals under other source ids
	alias.Blocks = slices.Clone(ev.Blocks)
	for i := range alias.Blocks {
		alias.Blocks[i].External ^= 0xFF00
	}
	mustApply(t, p, alias)
	rank1 := rootRun(kv.Member{Worker: 1, Rank: 1}, 40, 2)
	mustApply(t, p, rank1)
	mustApply(t, p, rootRun(memberB, 1, 1))
	if s := p.Stats(); s.TrackedBlocks != 9 || s.Canonicals != 5 {
		t.Fatalf("setup: tracked %d canonicals %d, want 9, 5", s.TrackedBlocks, s.Canonicals)
	}
	mustApply(t, p, kv.Event{Member: memberA, Kind: kv.Cleared})
	if s := p.Stats(); s.TrackedBlocks != 3 || s.Canonicals != 3 || s.Resident != 3 {
		t.Errorf("after Cleared(1/0): tracked %d canonicals %d resident %d; want 3, 3, 3 (block 0 still owned by 2/0)", s.TrackedBlocks, s.Canonicals, s.Resident)
	}
	st, err := p.RemoveWorker(1)
	if err != nil || st != StepPublish {
		t.Fatalf("RemoveWorker(1) = %v, %v; want publish, nil", st, err)
	}
	if s := p.Stats(); s.Members != 1 || s.TrackedBlocks != 1 || s.Resident != 1 {
		t.Errorf("after RemoveWorker(1): members %d tracked %d resident %d; want 1, 1, 1", s.Members, s.TrackedBlocks, s.Resident)
	}
	if st, err := p.RemoveMember(memberB); err != nil || st != StepPublish || p.Stats().Resident != 0 {
		t.Errorf("RemoveMember(2/0) = %v, %v, resident %d; want publish, nil, 0", st, err, p.Stats().Resident)
	}
}

func TestProducer_ClearWorkerScopeClearsEveryRank(t *testing.T) {
	p := newTestProducer(t, 64, Config{ClearWorker: true})
	mustApply(t, p, rootRun(kv.Member{Worker: 1, Rank: 0}, 1, 2))
	mustApply(t, p, rootRun(kv.Member{Worker: 1, Rank: 3}, 9, 2))
	mustApply(t, p, rootRun(memberB, 20, 2))
	mustApply(t, p, kv.Event{Member: kv.Member{Worker: 1, Rank: 3}, Kind: kv.Cleared})
	if s := p.Stats(); s.Members != 1 || s.TrackedBlocks != 2 {
		t.Errorf("worker-scope Cleared: members %d tracked %d, want 1, 2", s.Members, s.TrackedBlocks)
	}
}

func TestProducer_CadenceStepsFollowPendingEvents(t *testing.T) {
	p := newTestProducer(t, 64, Config{BatchEvents: 3})
	want := []Step{StepArmTimer, StepContinue, StepPublish, StepPublish}
	evs := roots(memberA, 1, 4)
	evs[1] = removal(memberA, 999) // a no-op still counts as pending
	for i, ev := range evs {
		st, err := p.Apply(&ev)
		if err != nil || st != want[i] {
			t.Fatalf("Apply #%d = %v, %v; want %v, nil", i, st, err, want[i])
		}
	}
	p.Drain(nil)
	if st, _ := p.Apply(&evs[0]); st != StepArmTimer {
		t.Errorf("first Apply after Drain = %v, want arm-timer", st)
	}
	if _, err := p.Apply(&kv.Event{Kind: kv.Removed, Blocks: []kv.Block{{External: 1, Local: 1}}}); !errors.Is(err, ErrBadEvent) || p.PendingEvents() != 1 {
		t.Errorf("Apply(malformed) = %v with %d pending; want ErrBadEvent, not counted (1)", err, p.PendingEvents())
	}
	if p.BatchEvents() != 3 || p.FlushAfter() != DefaultFlushAfter || p.MaxKicks() != DefaultMaxKicks {
		t.Errorf("BatchEvents, FlushAfter, MaxKicks = %d, %v, %d; want 3, %v, %d", p.BatchEvents(), p.FlushAfter(), p.MaxKicks(), DefaultFlushAfter, DefaultMaxKicks)
	}
}

func TestNew_ValidatesConfigAndUsesCallerWords(t *testing.T) {
	f := mustFormat(t, 8)
	bad := []Config{
		{},
		{Format: f, MaxKicks: -1},
		{Format: f, MaxKicks: MaxMaxKicks + 1},
		{Format: f, BatchEvents: -1},
		{Format: f, FlushAfter: -1},
		{Format: f, Words: make([]uint64, 4)},
		{Format: f, Words: []uint64{0, 0, 0, 1, 0, 0, 0, 0}},
		{Format: f, ExpectedBlocks: -1},
		{Format: f, ExpectedBlocks: 4*MaxBuckets + 1},
		{Format: f, ExpectedMemberBlocks: -1},
		{Format: f, ExpectedMemberBlocks: 4*MaxBuckets + 1},
	}
	for i, cfg := range bad {
		if _, err := New(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("New(bad config %d) = %v, want ErrBadConfig", i, err)
		}
	}
	words := make([]uint64, 8)
	p, err := New(Config{Format: f, Words: words, MaxKicks: MaxMaxKicks})
	if err != nil {
		t.Fatalf("New(caller words) = %v", err)
	}
	mustApply(t, p, rootRun(memberA, 1, 5))
	if !slices.Equal(words, p.AppendWords(nil)) || slices.Equal(words, make([]uint64, 8)) {
		t.Errorf("caller-provided words = %#x, want the live filter %#x", words, p.AppendWords(nil))
	}
}

func TestProducer_SteadyIngestDoesNotAllocate(t *testing.T) {
	p := newTestProducer(t, 1024, Config{})
	mustApply(t, p, rootRun(memberA, 1, 1)) // keeps the member's lineage alive
	ev := rootRun(memberA, 100, 16)
	rm := removal(memberA)
	for _, b := range ev.Blocks {
		rm.Removed = append(rm.Removed, b.External)
	}
	var images []Image
	cycle := func() {
		p.Apply(&ev)
		p.Apply(&rm)
		images = p.Drain(images[:0])
	}
	cycle()
	if allocs := testing.AllocsPerRun(100, cycle); allocs != 0 {
		t.Errorf("store 16 + remove 16 + drain allocates %v times, want 0", allocs)
	}
	batch := []kv.Event{ev, rm, ev, rm}
	each := func(int, Step, error) {}
	batched := func() {
		p.ApplyBatch(batch, each)
		images = p.Drain(images[:0])
	}
	batched()
	if allocs := testing.AllocsPerRun(100, batched); allocs != 0 {
		t.Errorf("ApplyBatch of 2 × (store 16 + remove 16) + drain allocates %v times, want 0", allocs)
	}
}

// TestProducer_ExpectedBlocksChangesNothingButSizing feeds one Mooncake
// stream (stores, FIFO removes, drains) to a producer with the default
// tables and to one whose owner table and lineages are presized for the
// pool and its members (each lineage from its first event), and holds their filter
// words, images and counts equal after every event.
func TestProducer_ExpectedBlocksChangesNothingButSizing(t *testing.T) {
	st := mooncakeStream(readTrace(t, mooncakeTrace), 4, 1024, 2)
	n, err := BucketCount(4 * 1024)
	if err != nil {
		t.Fatal(err)
	}
	f := mustFormat(t, n)
	plain, err := New(Config{Format: f})
	if err != nil {
		t.Fatal(err)
	}
	sized, err := New(Config{Format: f, ExpectedBlocks: 4 * 1024, ExpectedMemberBlocks: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if sized.owners.bytes() <= plain.owners.bytes() {
		t.Fatalf("presized owner table %d bytes, default %d: want it larger from the start", sized.owners.bytes(), plain.owners.bytes())
	}
	checkLineages := func(at int) {
		for m, lin := range sized.members {
			if len(lin.slots) < slotsFor(1024) {
				t.Fatalf("event %d: member %v lineage has %d slots, want ≥ %d from its first event", at, m, len(lin.slots), slotsFor(1024))
			}
		}
	}
	var ip, is []Image
	for i := range st.events {
		sp, errP := plain.Apply(&st.events[i])
		ss, errS := sized.Apply(&st.events[i])
		if sp != ss || (errP == nil) != (errS == nil) {
			t.Fatalf("event %d: steps %v / %v, errors %v / %v", i, sp, ss, errP, errS)
		}
		checkLineages(i)
		if sp == StepPublish {
			ip, is = plain.Drain(ip[:0]), sized.Drain(is[:0])
			if !slices.Equal(ip, is) {
				t.Fatalf("event %d: drained images differ: %v vs %v", i, ip, is)
			}
		}
	}
	if !slices.Equal(plain.AppendWords(nil), sized.AppendWords(nil)) {
		t.Fatal("filter words differ after the stream")
	}
	a, b := plain.Stats(), sized.Stats()
	if a.TrackedBlocks != b.TrackedBlocks || a.Canonicals != b.Canonicals || a.Resident != b.Resident || a.TrackedBlocks == 0 {
		t.Fatalf("stats differ or empty: %+v vs %+v", a, b)
	}
}
