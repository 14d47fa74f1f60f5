package ckfindex

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/replica"
	"github.com/goindex/goindex/internal/harness"
)

// Absent probes per mutation in the dense case, plain and under -short:
// enough lookups of never-stored hashes for about 540 and 420 expected
// false hits (40 seeds × 2000 steps; 8 × 400).
const (
	absentProbesPerOp      = 128
	absentProbesPerOpShort = 2560
)

// TestIndex_WithinHarnessBounds holds the CKF index against Dynamo's exact
// model in every harness mode: no score below reach_len, ever; overcounts
// are reported, not failed on. In the serial cases a collisionAudit keeps a
// second model beside the index and checks that the overcounts are
// fingerprint collisions, at the rate spec §7 gives for the lanes' actual
// slot occupancy α (false hit per lane and position 1 − (1 − 1/65535)^(8α)):
//
//   - Exactness. A member's score passes held_len exactly when the
//     fingerprint of the query's first absent block sits in bucket A or B of
//     its lane, and every such hit is explained by a block the member holds
//     with the same fingerprint and bucket pair (a stale fingerprint or a
//     search bug fails here).
//   - Harness rate. A collision repeats at every later check of the same
//     query against the same lane, so overcounts come in clumps of tens to
//     hundreds (333 overcounts in the serial case are one collision), and
//     their raw rate is logged beside its α-based expectation but not
//     judged. Counted once per distinct first absent block, collisions are
//     independent: their number must stay within overcountLimit of Σ over
//     those blocks of (distinct fingerprints seen in their buckets) / 65535.
//     The harness's queries give under one such collision expected, so this
//     catches only gross failures (8-bit fingerprints: 200 against a limit
//     of 8).
//   - Per-position rate. In the dense case (64 buckets per member) every
//     mutation is followed by probes of random never-stored hashes against
//     every lane in use, hundreds of independent false hits in all; they
//     must lie within overcountLimit of Σ falseHitProb(α) over the lanes
//     probed, and not below e/1.5 − 4√e (else the measurement is broken).
//     15-bit fingerprints (twice the rate) fail this.
//
// The concurrent modes are checked for undercounts only, their overcounts
// logged: the audit's model would serialize the lane pool's concurrent
// mutations, and a reader's Match racing a mutation cannot be told from a
// judged one.
func TestIndex_WithinHarnessBounds(t *testing.T) {
	absentPerOp := absentProbesPerOp
	if testing.Short() {
		absentPerOp = absentProbesPerOpShort
	}
	cases := []struct {
		name     string
		opts     harness.Options
		scope    ClearScope
		expected uint64 // ExpectedBlocksPerLane
		audit    bool
		absent   int // absent probes per mutation
	}{
		{"serial", harness.Options{Mode: harness.Serial}, ClearRank, 512, true, 0},
		{"readers", harness.Options{Mode: harness.ConcurrentReaders}, ClearRank, 512, false, 0},
		{"lanes4", harness.Options{Mode: harness.LanePool, Lanes: 4}, ClearRank, 512, false, 0},
		{"worker-clear", harness.Options{Mode: harness.Serial, ClearScope: harness.ClearWorker}, ClearWorker, 512, false, 0},
		// 64 buckets (256 slots) per member instead of 256: mean α ≈ 0.12
		// against 0.03; the fullest lane reaches 0.55 over 40 seeds, 0.68
		// over 400. With 32 buckets lanes fill up: capacity omissions on
		// 18 of 200 seeds (seed 6 among them), which fail the strict
		// harness.
		{"dense", harness.Options{Mode: harness.Serial}, ClearRank, 128, true, absentPerOp},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.AllowOvercount, c.opts.Short = true, testing.Short()
			st := newAuditStats()
			newIndex := func() kv.Index {
				x, err := New(Config{Lanes: 64, ExpectedBlocksPerLane: c.expected, ClearScope: c.scope})
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if !c.audit {
					return x
				}
				return st.wrap(x, c.opts.ClearScope, c.absent)
			}
			rep := harness.Run(t, newIndex, c.opts)
			cnt := rep.Counters
			if cnt.Queries == 0 {
				t.Fatalf("harness checked no queries")
			}
			if cnt.Undercounts != 0 {
				t.Errorf("undercounts = %d, want 0 (%s)", cnt.Undercounts, &cnt)
			}
			t.Logf("%s: %s", c.name, &cnt)
			if c.audit {
				st.check(t, cnt)
			}
		})
	}
}

// falseHitProb is spec §7's false-hit probability of one lane at one
// position, at slot occupancy alpha: 1 − (1 − 1/65535)^(8α).
func falseHitProb(alpha float64) float64 {
	return -math.Expm1(8 * alpha * math.Log1p(-1.0/65535))
}

// overcountLimit is the most independent false hits a correct filter may
// show against an expectation of e: 1.5·e plus four Poisson standard
// deviations plus 3. At e ≈ 540 a filter with twice the rate (1080 ± 33)
// exceeds it (910) by five of its own standard deviations.
func overcountLimit(e float64) float64 { return 1.5*e + 4*math.Sqrt(e) + 3 }

// blockKey names one first absent block of one index (one seed).
type blockKey struct {
	index int
	hash  uint64 // its sequence hash
}

// auditStats is what the collisionAudits of one harness run saw.
type auditStats struct {
	indexes int

	// First absent positions of the harness's queries: one per (query,
	// lane) whose member holds less than the whole query.
	risky       int     // such checks
	expected    float64 // Σ falseHitProb(α of the lane then)
	overcounts  int     // member scored above held_len
	hits        int     // fingerprint in bucket A or B of the lane
	mismatches  int     // hit != overcount
	unexplained int     // hit without a held block of the same address
	first       string  // the first mismatch or unexplained hit
	// seen[k] holds the distinct fingerprints that sat in the buckets of
	// k's hash in a lane while it was that lane's first absent block;
	// collided holds the blocks that hit at least once.
	seen     map[blockKey]*[]uint16
	collided map[blockKey]bool

	// Probes of never-stored hashes (dense case).
	absentLanes    int     // lane probes
	absentExpected float64 // Σ falseHitProb(α of the lane then)
	absentHits     int
}

func newAuditStats() *auditStats {
	return &auditStats{seen: map[blockKey]*[]uint16{}, collided: map[blockKey]bool{}}
}

// wrap returns x behind a collisionAudit that records into st.
func (st *auditStats) wrap(x *Index, scope harness.ClearScope, absentPerOp int) *collisionAudit {
	st.indexes++
	return &collisionAudit{Index: x, st: st, index: st.indexes, model: harness.NewModel(scope),
		stored: map[uint64]bool{}, byFP: map[uint16][]uint64{}, absentPerOp: absentPerOp,
		rng: rand.New(rand.NewPCG(uint64(st.indexes), 0xAB5E)), stale: true}
}

// check judges and logs what st saw.
func (st *auditStats) check(t *testing.T, cnt harness.Counters) {
	t.Helper()
	if st.overcounts != cnt.Overcounts {
		t.Errorf("audit counted %d overcounts, harness %d: the audit's model is out of step", st.overcounts, cnt.Overcounts)
	}
	if st.mismatches+st.unexplained != 0 {
		t.Errorf("first absent blocks: %d overcounts disagree with a fingerprint hit, %d hits have no held block of the same fingerprint and buckets; first: %s",
			st.mismatches, st.unexplained, st.first)
	}
	t.Logf("harness overcounts (raw, clumped): %d in %d first absent checks (rate %.3g); expected %.1f from the lanes' loads (rate %.3g): ratio %.2f",
		st.overcounts, st.risky, ratio(float64(st.overcounts), float64(st.risky)), st.expected,
		ratio(st.expected, float64(st.risky)), ratio(float64(st.overcounts), st.expected))

	var e float64
	for _, fps := range st.seen {
		e += float64(len(*fps)) / 65535
	}
	d, limit := len(st.collided), overcountLimit(e)
	t.Logf("harness overcounts (distinct first absent blocks): %d of %d collided (rate %.3g); expected %.2f (rate %.3g): ratio %.2f, limit %.1f",
		d, len(st.seen), ratio(float64(d), float64(len(st.seen))), e, ratio(e, float64(len(st.seen))), ratio(float64(d), e), limit)
	if float64(d) > limit {
		t.Errorf("%d distinct first absent blocks collided, want ≤ %.1f (expected %.2f from the fingerprints in their buckets)", d, limit, e)
	}

	if st.absentLanes == 0 {
		return
	}
	e = st.absentExpected
	lo, hi := e/1.5-4*math.Sqrt(e), overcountLimit(e)
	t.Logf("absent probes: %d false hits in %d lane probes (rate %.3g); expected %.1f from the lanes' loads (rate %.3g, α %.3f): ratio %.3f, allowed %.0f..%.0f",
		st.absentHits, st.absentLanes, ratio(float64(st.absentHits), float64(st.absentLanes)), e,
		ratio(e, float64(st.absentLanes)), alphaOf(e/float64(st.absentLanes)), ratio(float64(st.absentHits), e), lo, hi)
	if h := float64(st.absentHits); h < lo || h > hi {
		t.Errorf("absent probes: %d false hits in %d lane probes, want %.0f..%.0f (expected %.1f)", st.absentHits, st.absentLanes, lo, hi, e)
	}
}

// alphaOf inverts falseHitProb.
func alphaOf(p float64) float64 { return math.Log1p(-p) / (8 * math.Log1p(-1.0/65535)) }

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// collisionAudit is a kv.Index for serial harness runs. It passes every call
// to its Index and keeps its own harness.Model in step (applying each op to
// the model first, as the harness does), then audits every Match against
// it; after every mutation it probes absentPerOp random hashes. It is not
// safe for concurrent use.
type collisionAudit struct {
	*Index
	st    *auditStats
	index int // which of st's indexes
	model *harness.Model
	// stored holds every hash ever stored; byFP indexes them by
	// fingerprint, to find the held block that explains a hit.
	stored      map[uint64]bool
	byFP        map[uint16][]uint64
	absentPerOp int
	rng         *rand.Rand

	stale    bool                      // falseHit needs a refresh
	falseHit [replica.MaxLanes]float64 // falseHitProb of each lane in use
	chain    []uint64                  // scratch
}

func (a *collisionAudit) Apply(ev *kv.Event) error {
	a.model.Apply(&harness.Op{Kind: harness.OpEvent, Event: *ev})
	for _, b := range ev.Blocks {
		if !a.stored[b.External] {
			a.stored[b.External] = true
			fp := a.Index.format.Probe(b.External).FP
			a.byFP[fp] = append(a.byFP[fp], b.External)
		}
	}
	defer a.mutated()
	return a.Index.Apply(ev)
}

func (a *collisionAudit) RemoveMember(m kv.Member) error {
	a.model.Apply(&harness.Op{Kind: harness.OpRemoveMember, Member: m})
	defer a.mutated()
	return a.Index.RemoveMember(m)
}

func (a *collisionAudit) RemoveWorker(worker uint64) error {
	a.model.Apply(&harness.Op{Kind: harness.OpRemoveWorker, Worker: worker})
	defer a.mutated()
	return a.Index.RemoveWorker(worker)
}

// mutated marks the loads stale and runs the absent probes: random hashes
// (never stored, with overwhelming probability) probed against every lane
// in use, as Match probes one position.
func (a *collisionAudit) mutated() {
	a.stale = true
	if a.absentPerOp == 0 {
		return
	}
	used := a.Index.lanes.Load().used
	var e float64
	for m := used; m != 0; m &= m - 1 {
		e += a.falseHitProbOf(bits.TrailingZeros64(m))
	}
	for range a.absentPerOp {
		a.st.absentHits += bits.OnesCount64(a.Index.table.Probe(a.Index.format.Probe(a.rng.Uint64()), used))
	}
	a.st.absentLanes += a.absentPerOp * bits.OnesCount64(used)
	a.st.absentExpected += float64(a.absentPerOp) * e
}

// falseHitProbOf returns falseHitProb of lane's current slot occupancy,
// refreshing every lane's after a mutation.
func (a *collisionAudit) falseHitProbOf(lane int) float64 {
	if a.stale {
		for l, p := range a.Index.producers {
			if p != nil {
				a.falseHit[l] = falseHitProb(p.Stats().LoadFactor)
			}
		}
		a.stale = false
	}
	return a.falseHit[lane]
}

// Match answers from the index and audits the first absent block of every
// lane whose member holds less than the whole query.
func (a *collisionAudit) Match(dst []kv.Overlap, locals []uint64) []kv.Overlap {
	n := len(dst)
	dst = a.Index.Match(dst, locals)
	got := dst[n:]
	a.chain = kv.AppendChain(a.chain[:0], false, 0, locals)
	lanes := a.Index.lanes.Load()
	for m := lanes.used; m != 0; m &= m - 1 {
		lane := bits.TrailingZeros64(m)
		mem := lanes.member[lane]
		held, _ := a.model.Bounds(mem, a.chain)
		if held == len(a.chain) {
			continue
		}
		score := 0
		for _, o := range got {
			if o.Member == mem {
				score = o.Blocks
			}
		}
		a.audit(lane, mem, a.chain[held], held, score)
	}
	return dst
}

// audit records one first absent block h at position held of a query, in
// lane (member mem, which scored score).
func (a *collisionAudit) audit(lane int, mem kv.Member, h uint64, held, score int) {
	st := a.st
	st.risky++
	st.expected += a.falseHitProbOf(lane)
	p := a.Index.format.Probe(h)
	hit := a.Index.table.Probe(p, 1<<lane) != 0
	over := score > held
	k := blockKey{a.index, h}
	if over {
		st.overcounts++
	}
	if hit {
		st.hits++
		st.collided[k] = true
	}
	fail := ""
	switch {
	case hit != over:
		st.mismatches++
		fail = fmt.Sprintf("scored %d, fingerprint hit %t", score, hit)
	case hit && !a.explained(mem, p):
		st.unexplained++
		fail = "no held block with its fingerprint and buckets"
	}
	if fail != "" && st.first == "" {
		st.first = fmt.Sprintf("index %d, member %v (lane %d), block %#x at held_len %d (fingerprint %#x, buckets %d/%d): %s",
			a.index, mem, lane, h, held, p.FP, p.A, p.B, fail)
	}
	fps := st.seen[k]
	if fps == nil {
		fps = new([]uint16)
		st.seen[k] = fps
	}
	for _, b := range [2]uint32{p.A, p.B} {
		for w := a.Index.table.Word(lane, uint64(b)); w != 0; w >>= 16 {
			if fp := uint16(w); fp != 0 && !slices.Contains(*fps, fp) {
				*fps = append(*fps, fp)
			}
		}
	}
}

// explained reports whether mem holds a block with p's fingerprint and
// bucket pair (whose fingerprint a correct lane holds in bucket A or B).
func (a *collisionAudit) explained(mem kv.Member, p ckf.Probe) bool {
	for _, s := range a.byFP[p.FP] {
		if q := a.Index.format.Probe(s); (q.A == p.A || q.A == p.B) && a.model.Held(mem, s) {
			return true
		}
	}
	return false
}
