package dynkv

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/internal/harness"
	"github.com/redis/go-redis/v9"
)

// storeIndex drives a Store through kv.Index so the differential harness can
// hold the module's semantics against Dynamo's exact model. Removing a member
// retires and resets it (the harness's workers may return under the same id,
// which the module allows only after RESET_WORKER).
type storeIndex struct{ s *Store }

func (x storeIndex) Apply(ev *kv.Event) error {
	_, err := x.s.Apply(toEvent(ev))
	return err
}

// toEvent converts a harness event to the module's event.
func toEvent(ev *kv.Event) Event {
	e := Event{Rank: Rank{ev.Member.Worker, ev.Member.Rank}, EventID: ev.EventID}
	switch ev.Kind {
	case kv.Stored:
		e.Kind, e.Parent = KindStore, RootParent
		if ev.HasParent {
			e.Parent = ev.Parent
		}
		for _, b := range ev.Blocks {
			e.Blocks = append(e.Blocks, Block{External: b.External, Local: b.Local})
		}
	case kv.Removed:
		e.Kind, e.Hashes = KindRemove, ev.Removed
	case kv.Cleared:
		e.Kind = KindClear
	}
	return e
}

func (x storeIndex) RemoveMember(m kv.Member) error {
	r := Rank{m.Worker, m.Rank}
	x.s.mu.Lock()
	defer x.s.mu.Unlock()
	x.s.removeRank(r)
	x.s.resetRank(r)
	return nil
}

func (x storeIndex) RemoveWorker(worker uint64) error {
	x.s.mu.RLock()
	var ranks []Rank
	for r := range x.s.ranks {
		if r.Worker == worker {
			ranks = append(ranks, r)
		}
	}
	x.s.mu.RUnlock()
	for _, r := range ranks {
		x.RemoveMember(kv.Member{Worker: r.Worker, Rank: r.DPRank})
	}
	return nil
}

func (x storeIndex) Match(dst []kv.Overlap, locals []uint64) []kv.Overlap {
	for _, e := range x.s.Match(locals, 0) {
		dst = append(dst, kv.Overlap{Member: kv.Member{Worker: e.Rank.Worker, Rank: e.Rank.DPRank}, Blocks: int(e.Matched)})
	}
	return dst
}

// TestStore_WithinHarnessBounds runs the §3.7 randomized workload: the module
// counts contiguous held blocks, so every score must lie in
// [reach_len, held_len] of the reference model, with worker-wide clears.
func TestStore_WithinHarnessBounds(t *testing.T) {
	newIndex := func() kv.Index { return storeIndex{NewStore()} }
	for _, mode := range []harness.Mode{harness.Serial, harness.ConcurrentReaders} {
		rep := harness.Run(t, newIndex, harness.Options{Mode: mode, ClearScope: harness.ClearWorker, Short: testing.Short()})
		if rep.Counters.Queries == 0 {
			t.Errorf("%v: harness checked no queries", mode)
		}
		t.Logf("%v: %s", mode, &rep.Counters)
	}
}

// wireIndex drives a Server through a Redis client, one key per index, and
// holds every reply against a Store fed the same commands in process: APPLY
// must answer the same (OK, NOOP or the same error name) and, when exact is
// set (serial mode, where no MATCH runs between the two applies), MATCH
// must return the same bytes. The harness then holds the decoded scores
// against its model, so the randomized stream is checked on the wire end to
// end.
type wireIndex struct {
	t     *testing.T
	c     *redis.Client
	key   string
	ref   storeIndex
	exact bool

	mu    sync.Mutex
	ranks map[uint64]map[uint32]bool // ranks seen per worker, for RemoveWorker
}

func (x *wireIndex) do(args ...any) (string, error) {
	v, err := x.c.Do(context.Background(), args...).Text()
	return v, err
}

func (x *wireIndex) Apply(ev *kv.Event) error {
	x.mu.Lock()
	if x.ranks[ev.Member.Worker] == nil {
		x.ranks[ev.Member.Worker] = map[uint32]bool{}
	}
	x.ranks[ev.Member.Worker][ev.Member.Rank] = true
	x.mu.Unlock()
	e := toEvent(ev)
	got, err := x.do("DYNKV.APPLY", x.key, AppendEvent(nil, e))
	changed, refErr := x.ref.s.Apply(e)
	want := "NOOP"
	if changed {
		want = "OK"
	}
	switch {
	case refErr != nil && replyCode(err) != CodeOf(refErr):
		x.t.Errorf("DYNKV.APPLY(%+v) over the wire = %q, %v; the Store answers %v", e, got, err, refErr)
	case refErr == nil && (err != nil || got != want):
		x.t.Errorf("DYNKV.APPLY(%+v) over the wire = %q, %v; the Store answers %s", e, got, err, want)
	}
	return err
}

func (x *wireIndex) RemoveMember(m kv.Member) error {
	for _, cmd := range []string{"DYNKV.REMOVE_WORKER", "DYNKV.RESET_WORKER"} {
		if _, err := x.do(cmd, x.key, u64(m.Worker), u32(m.Rank)); err != nil {
			x.t.Errorf("%s(%d/%d) over the wire: %v", cmd, m.Worker, m.Rank, err)
			return err
		}
	}
	return x.ref.RemoveMember(m)
}

func (x *wireIndex) RemoveWorker(worker uint64) error {
	x.mu.Lock()
	var ranks []uint32
	for r := range x.ranks[worker] {
		ranks = append(ranks, r)
	}
	x.mu.Unlock()
	for _, r := range ranks {
		if err := x.RemoveMember(kv.Member{Worker: worker, Rank: r}); err != nil {
			return err
		}
	}
	return nil
}

func (x *wireIndex) Match(dst []kv.Overlap, locals []uint64) []kv.Overlap {
	got, err := x.do("DYNKV.MATCH_PRIMARY", x.key, AppendMatchRequest(nil, locals))
	if err != nil {
		x.t.Errorf("DYNKV.MATCH_PRIMARY(%v) over the wire: %v", locals, err)
		return dst
	}
	if want := AppendMatchReply(nil, x.ref.s.Match(locals, 0)); x.exact && got != string(want) {
		x.t.Errorf("DYNKV.MATCH_PRIMARY(%v) over the wire = %x, the Store answers %x", locals, got, want)
	}
	entries, err := DecodeMatchReply([]byte(got))
	if err != nil {
		x.t.Errorf("DYNKV.MATCH_PRIMARY(%v) reply %x: %v", locals, got, err)
		return dst
	}
	for _, e := range entries {
		dst = append(dst, kv.Overlap{Member: kv.Member{Worker: e.Rank.Worker, Rank: e.Rank.DPRank}, Blocks: int(e.Matched)})
	}
	return dst
}

// TestServer_RandomizedStreamOverTheWire runs the §3.7 workload through a
// real Redis client: replies equal the in-process Store's, and scores lie in
// the harness's bounds. It always runs the short-mode seeds and steps
// (HARNESS_* still override them): every op and query is a loopback round
// trip, about 25 times the in-process cost, and TestStore_WithinHarnessBounds
// carries the long run of the same semantics.
func TestServer_RandomizedStreamOverTheWire(t *testing.T) {
	knobs, err := harness.KnobsFromEnv(true)
	if err != nil {
		t.Fatalf("harness knobs: %v", err)
	}
	s := startServer(t, Config{})
	c := client(t, s)
	var n atomic.Int64
	for _, mode := range []harness.Mode{harness.Serial, harness.ConcurrentReaders} {
		newIndex := func() kv.Index {
			return &wireIndex{t: t, c: c, key: fmt.Sprintf("%s-%d", testKey, n.Add(1)), ref: storeIndex{NewStore()},
				exact: mode == harness.Serial, ranks: map[uint64]map[uint32]bool{}}
		}
		rep := harness.Run(t, newIndex, harness.Options{Mode: mode, ClearScope: harness.ClearWorker, Knobs: &knobs})
		if rep.Counters.Queries == 0 {
			t.Errorf("%v: harness checked no queries over the wire", mode)
		}
		t.Logf("%v: %s", mode, &rep.Counters)
	}
}

// TestStore_CKFWithinHarnessBounds runs the §3.7 workload against a
// ckf-backed Store with worker-wide clears: no score below reach_len, no
// capacity omission or mirror error, and overcounts (fingerprint collisions)
// counted and bounded as ckfindex bounds them. Filters are sized for 128
// blocks a rank (64 buckets), which the workload fills to about half its
// slots: the densest size at which it never meets a full filter (at 64
// blocks it does, and an omitted block is a documented false negative).
func TestStore_CKFWithinHarnessBounds(t *testing.T) {
	const expected = 128
	var made []*Store
	newIndex := func() kv.Index {
		s, err := NewStoreWith(Backing{Index: IndexCKF, CKFExpectedBlocks: expected})
		if err != nil {
			t.Fatalf("NewStoreWith(ckf, %d): %v", expected, err)
		}
		made = append(made, s)
		return storeIndex{s}
	}
	rep := harness.Run(t, newIndex, harness.Options{ClearScope: harness.ClearWorker, AllowOvercount: true, Short: testing.Short()})
	cnt := rep.Counters
	if cnt.Queries == 0 {
		t.Fatalf("harness checked no queries")
	}
	if cnt.Undercounts != 0 {
		t.Errorf("undercounts = %d, want 0", cnt.Undercounts)
	}
	// ckfindex's bound (spec §7, α ≤ 1, 3× for runs of false hits).
	const bound = 3 * 8.0 / 65535
	if rate := cnt.OvercountRate(); rate > bound {
		t.Errorf("overcount rate %.3g > bound %.3g (%s)", rate, bound, &cnt)
	}
	var omitted, mirror uint64
	var load float64
	for _, s := range made {
		d := s.Detail()
		omitted += d.CKF.CapacityOmissions
		mirror += d.CKFMirrorErrors
		load = max(load, d.CKF.LoadFactor)
	}
	if omitted != 0 || mirror != 0 {
		t.Errorf("capacity omissions %d, mirror errors %d; want 0, 0", omitted, mirror)
	}
	t.Logf("overcount rate %.3g (bound %.3g); final max load %.3f", cnt.OvercountRate(), bound, load)
}
