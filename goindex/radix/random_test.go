package radix

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

// driver applies the same operations to an Index and to the reference
// model and compares every query's scores exactly. External hashes are the
// router chain of the local hashes, as in Dynamo's tests and the harness.
type driver struct {
	t     testing.TB
	cfg   Config
	x     *Index
	md    *model
	label string   // seed and configuration, printed on failure
	ops   []string // recent operations, printed on failure
}

func newDriver(t testing.TB, cfg Config, label string) *driver {
	return &driver{t: t, cfg: cfg, x: New(cfg), md: newModel(cfg.ClearScope), label: label}
}

func (d *driver) logf(format string, args ...any) {
	const keep = 40
	d.ops = append(d.ops, fmt.Sprintf(format, args...))
	if len(d.ops) > keep {
		d.ops = d.ops[len(d.ops)-keep:]
	}
}

func (d *driver) fatalf(format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("%s: %s\nrecent ops:\n  %s", d.label, fmt.Sprintf(format, args...), strings.Join(d.ops, "\n  "))
}

// held reports whether the index holds external hash h for m.
func (d *driver) held(m kv.Member, h uint64) bool {
	s, ok := d.x.members[m]
	if !ok {
		return false
	}
	_, ok = d.x.slots[s].lookup[h]
	return ok
}

// store stores path[i:j] for m below path[:i].
func (d *driver) store(m kv.Member, path []uint64, i, j int) {
	d.t.Helper()
	chain := kv.AppendChain(nil, false, 0, path[:j])
	ev := &kv.Event{Member: m, Kind: kv.Stored}
	parent := modelParent{}
	if i > 0 {
		ev.HasParent, ev.Parent = true, chain[i-1]
		parent = modelParent{true, chain[i-1]}
	}
	for k := i; k < j; k++ {
		ev.Blocks = append(ev.Blocks, kv.Block{External: chain[k], Local: path[k]})
	}
	d.logf("store %v %v→%v", m, path[:i], path[i:j])
	err := d.x.Apply(ev)
	v := d.md.store(m, parent, chain[i:j])
	switch {
	case err == nil:
	case v == mustApply:
		d.fatalf("Apply(store %v %v→%v) = %v, want nil (model: apply)", m, path[:i], path[i:j], err)
	case !errors.Is(err, ErrParentNotFound):
		d.fatalf("Apply(store %v %v→%v) = %v, want nil or ErrParentNotFound", m, path[:i], path[i:j], err)
	}
}

// remove removes the given external hashes of m.
func (d *driver) remove(m kv.Member, hashes []uint64) {
	d.t.Helper()
	unknown, first := 0, -1
	for k, h := range hashes {
		if !d.held(m, h) || containsBefore(hashes, k) {
			unknown++
			if first < 0 {
				first = k
			}
		}
	}
	d.logf("remove %v %v", m, hashes)
	err := d.x.Apply(&kv.Event{Member: m, Kind: kv.Removed, Removed: hashes})
	modelHashes := hashes
	if d.cfg.StopAtUnknownRemoval && first >= 0 {
		modelHashes = hashes[:first+1]
	}
	d.md.remove(m, modelHashes)
	if unknown == 0 {
		if err != nil {
			d.fatalf("Apply(remove %v %v) = %v, want nil", m, hashes, err)
		}
		return
	}
	var re *RemoveError
	if !errors.As(err, &re) || !errors.Is(err, ErrBlockNotFound) {
		d.fatalf("Apply(remove %v %v) = %v, want a *RemoveError", m, hashes, err)
	}
	wantMissing, wantRemoved := unknown, len(hashes)-unknown
	if d.cfg.StopAtUnknownRemoval {
		wantMissing, wantRemoved = 1, first
	}
	if re.First != hashes[first] || re.Missing != wantMissing || re.Removed != wantRemoved || re.Member != m {
		d.fatalf("Apply(remove %v %v) = %+v, want First=%d Missing=%d Removed=%d", m, hashes, re, hashes[first], wantMissing, wantRemoved)
	}
}

func containsBefore(hs []uint64, k int) bool {
	for _, h := range hs[:k] {
		if h == hs[k] {
			return true
		}
	}
	return false
}

func (d *driver) clear(m kv.Member) {
	d.logf("clear %v", m)
	if err := d.x.Apply(&kv.Event{Member: m, Kind: kv.Cleared}); err != nil {
		d.fatalf("Apply(cleared %v) = %v", m, err)
	}
	d.md.clear(m)
}

func (d *driver) removeMember(m kv.Member) {
	d.logf("remove member %v", m)
	if err := d.x.RemoveMember(m); err != nil {
		d.fatalf("RemoveMember(%v) = %v", m, err)
	}
	d.md.removeMember(m)
}

func (d *driver) removeWorker(w uint64) {
	d.logf("remove worker %d", w)
	if err := d.x.RemoveWorker(w); err != nil {
		d.fatalf("RemoveWorker(%d) = %v", w, err)
	}
	d.md.removeWorker(w)
}

// verify compares the scores of one query with the model's reach_len, and
// the detailed matches with the plain ones.
func (d *driver) verify(locals []uint64) {
	d.t.Helper()
	chain := kv.AppendChain(nil, false, 0, locals)
	got := d.x.Match(nil, locals)
	sortOverlaps(got)
	want := d.md.expected(chain)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		d.fatalf("Match(%v) = %v, want %v (model reach_len)", locals, got, want)
	}
	det := d.x.MatchDetailed(nil, locals)
	if len(det) != len(got) {
		d.fatalf("MatchDetailed(%v) = %v, want the %d entries of Match", locals, det, len(got))
	}
	for _, e := range det {
		if e.Blocks < 1 || e.Blocks > len(chain) || e.Last != chain[e.Blocks-1] {
			d.fatalf("MatchDetailed(%v) entry %+v: Last want chain[%d]", locals, e, e.Blocks-1)
		}
		if _, reach := d.md.lens(e.Member, chain); reach != e.Blocks {
			d.fatalf("MatchDetailed(%v) entry %+v, want %d blocks", locals, e, reach)
		}
	}
}

// checkInvariants runs the brute-force invariant check.
func (d *driver) checkInvariants() {
	d.t.Helper()
	if err := d.x.check(); err != nil {
		d.fatalf("invariant: %v", err)
	}
}

// checkReplay replays Dump into a fresh index and compares snapshots and
// the given queries' scores.
func (d *driver) checkReplay(queries [][]uint64) {
	d.t.Helper()
	y := New(d.cfg)
	for _, ev := range d.x.Dump() {
		if err := y.Apply(&ev); err != nil {
			d.fatalf("replaying Dump: Apply(%+v) = %v", ev, err)
		}
	}
	if diff := d.x.Snapshot().Diff(y.Snapshot()); diff != "" {
		d.fatalf("Snapshot after Dump replay differs: %s", diff)
	}
	if err := y.check(); err != nil {
		d.fatalf("replayed index invariant: %v", err)
	}
	for _, q := range queries {
		a, b := d.x.Match(nil, q), y.Match(nil, q)
		sortOverlaps(a)
		sortOverlaps(b)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			d.fatalf("Match(%v) = %v before Dump replay, %v after", q, a, b)
		}
	}
}

// checkCompact compacts and checks that nothing observable changed.
func (d *driver) checkCompact() {
	d.t.Helper()
	d.logf("compact")
	before := d.x.Snapshot()
	d.x.Compact()
	if diff := before.Diff(d.x.Snapshot()); diff != "" {
		d.fatalf("Snapshot changed by Compact: %s", diff)
	}
	d.checkInvariants()
}

// testSeed returns the base seed: RADIX_SEED if set, else def.
func testSeed(t testing.TB, def int64) int64 {
	if v := os.Getenv("RADIX_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("RADIX_SEED=%q: %v", v, err)
		}
		return s
	}
	return def
}

// workload draws paths with shared prefixes over a small alphabet, so that
// stores collide, branch and cut each other's chains often.
type workload struct {
	rng      *rand.Rand
	alphabet int
	maxLen   int
	members  []kv.Member
	paths    [][]uint64
}

func newWorkload(rng *rand.Rand, members []kv.Member, alphabet, maxLen, paths int) *workload {
	w := &workload{rng: rng, alphabet: alphabet, maxLen: maxLen, members: members}
	for range paths {
		w.paths = append(w.paths, w.freshPath())
	}
	return w
}

// freshPath extends a random prefix of an existing path (or the root).
func (w *workload) freshPath() []uint64 {
	var p []uint64
	if len(w.paths) > 0 && w.rng.Intn(4) != 0 {
		base := w.paths[w.rng.Intn(len(w.paths))]
		p = append(p, base[:w.rng.Intn(len(base)+1)]...)
	}
	for n := 1 + w.rng.Intn(w.maxLen); len(p) < n; {
		p = append(p, uint64(1+w.rng.Intn(w.alphabet)))
	}
	return p
}

func (w *workload) path() []uint64 {
	if w.rng.Intn(10) == 0 {
		return w.freshPath()
	}
	return w.paths[w.rng.Intn(len(w.paths))]
}

func (w *workload) member() kv.Member { return w.members[w.rng.Intn(len(w.members))] }

// queries returns a few query paths: pool paths, prefixes, a path with one
// position replaced, and a fresh one.
func (w *workload) queries() [][]uint64 {
	q := [][]uint64{w.path(), w.path(), w.freshPath()}
	p := w.path()
	q = append(q, p[:w.rng.Intn(len(p)+1)])
	alt := append([]uint64(nil), w.path()...)
	alt[w.rng.Intn(len(alt))] = uint64(1 + w.rng.Intn(w.alphabet+1))
	return append(q, alt)
}

// step performs one random operation on d.
func (w *workload) step(d *driver) {
	switch r := w.rng.Intn(100); {
	case r < 50:
		p := w.path()
		i := w.rng.Intn(len(p))
		if w.rng.Intn(3) == 0 {
			i = 0
		}
		j := i + 1 + w.rng.Intn(len(p)-i)
		d.store(w.member(), p, i, j)
	case r < 85:
		m := w.member()
		var pool []uint64
		if rk := d.md.ranks[m]; rk != nil {
			pool = sortedKeys(rk.held)
		}
		var hs []uint64
		for n := 1 + w.rng.Intn(3); len(hs) < n; {
			if len(pool) > 0 && w.rng.Intn(10) < 8 {
				hs = append(hs, pool[w.rng.Intn(len(pool))])
			} else {
				p := w.path()
				hs = append(hs, kv.AppendChain(nil, false, 0, p)[w.rng.Intn(len(p))])
			}
		}
		d.remove(m, hs)
	case r < 90:
		d.clear(w.member())
	case r < 93:
		d.removeMember(w.member())
	case r < 95:
		d.removeWorker(w.member().Worker)
	case r < 97:
		d.checkCompact()
	default:
		d.checkReplay(w.queries())
	}
}

func members(workers, ranks int) []kv.Member {
	var ms []kv.Member
	for w := range workers {
		for r := range ranks {
			ms = append(ms, kv.Member{Worker: uint64(w), Rank: uint32(r)})
		}
	}
	return ms
}

func TestIndex_RandomStreamsScoreExactlyReachLen(t *testing.T) {
	seeds, steps := 24, 500
	if testing.Short() {
		seeds, steps = 6, 200
	}
	base := testSeed(t, 1)
	cases := []struct {
		name     string
		cfg      Config
		members  []kv.Member
		alphabet int
		maxLen   int
	}{
		{"rank-scope", Config{}, members(3, 1), 3, 10},
		{"worker-scope", Config{ClearScope: ClearWorker}, members(2, 2), 3, 8},
		{"stop-at-unknown", Config{StopAtUnknownRemoval: true}, members(2, 2), 2, 8},
		// 90 members: slots from 64 up use the wide sets.
		{"wide", Config{}, members(30, 3), 3, 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := seeds
			if c.name == "wide" {
				n = max(2, seeds/4)
			}
			for k := range n {
				seed := base + int64(k)
				rng := rand.New(rand.NewSource(seed))
				w := newWorkload(rng, c.members, c.alphabet, c.maxLen, 12)
				d := newDriver(t, c.cfg, fmt.Sprintf("%s seed %d (RADIX_SEED=%d)", c.name, seed, seed))
				for step := range steps {
					w.step(d)
					for _, q := range w.queries() {
						d.verify(q)
					}
					if step%25 == 0 {
						d.checkInvariants()
					}
				}
				d.checkInvariants()
				d.checkReplay(w.queries())
			}
		})
	}
}
