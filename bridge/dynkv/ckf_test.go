package dynkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// ckfStreamSeedEnv overrides the seed of the random-stream tests (runStream).
const ckfStreamSeedEnv = "DYNKV_CKF_SEED"

// streamGen generates a random dynkv command stream: stores along a few
// shared documents (so ranks share nodes and trees branch), mid-chain
// removes, worker-wide clears, stale event ids, conflicting and malformed
// stores, retirement, resets, registrations and replacements with current
// and stale tickets, and MATCH/SELECT queries along and off the documents.
type streamGen struct {
	rng    *rand.Rand
	docs   [][]uint64 // local hashes
	chains [][]uint64 // their external hashes (the router chain)
	ranks  []Rank
	next   map[Rank]uint64 // next event id
}

func newStreamGen(seed uint64) *streamGen {
	g := &streamGen{rng: rand.New(rand.NewPCG(seed, 0xD1CE)), next: map[Rank]uint64{}}
	for d := 0; d < 10; d++ {
		doc := make([]uint64, 4+g.rng.IntN(17))
		for i := range doc {
			doc[i] = 1 + g.rng.Uint64N(4) // a small alphabet: documents share prefixes
		}
		g.docs = append(g.docs, doc)
		g.chains = append(g.chains, kv.AppendChain(nil, false, 0, doc))
	}
	for w := uint64(1); w <= 6; w++ {
		for r := uint32(0); r < 3; r++ {
			g.ranks = append(g.ranks, Rank{w, r})
		}
	}
	return g
}

func (g *streamGen) rank() Rank { return g.ranks[g.rng.IntN(len(g.ranks))] }

// eventID is usually the rank's next id, sometimes an older one.
func (g *streamGen) eventID(r Rank) uint64 {
	g.next[r]++
	if g.next[r] > 3 && g.rng.IntN(10) == 0 {
		return 1 + g.rng.Uint64N(g.next[r])
	}
	return g.next[r]
}

// store returns a store of r along a random document, now and then broken.
func (g *streamGen) store(r Rank, eventID uint64, fromRoot bool) Event {
	d := g.rng.IntN(len(g.docs))
	doc, chain := g.docs[d], g.chains[d]
	k := 0
	if !fromRoot && g.rng.IntN(2) == 0 {
		k = g.rng.IntN(len(doc)) // below a parent the rank may not hold
	}
	m := 1 + g.rng.IntN(len(doc)-k)
	ev := Event{Kind: KindStore, Rank: r, EventID: eventID, Parent: RootParent}
	if k > 0 {
		ev.Parent = chain[k-1]
	}
	for i := k; i < k+m; i++ {
		ev.Blocks = append(ev.Blocks, Block{External: chain[i], Local: doc[i]})
	}
	switch b := &ev.Blocks[g.rng.IntN(m)]; g.rng.IntN(50) {
	case 0:
		b.External = g.rng.Uint64() // an unknown hash: a conflict or an odd new node
	case 1:
		b.Local = 9 // a known hash under another tokens hash: a conflict
	case 2:
		b.External = RootParent // the reserved hash
	case 3:
		ev.Parent = g.rng.Uint64() // a parent nobody holds
	}
	return ev
}

// mutation returns the next mutating command's arguments (after the key).
func (g *streamGen) mutation(rankGen func(Rank) []byte) []any {
	r := g.rank()
	switch x := g.rng.IntN(100); {
	case x < 72:
		return []any{"DYNKV.APPLY", AppendEvent(nil, g.store(r, g.eventID(r), false))}
	case x < 86:
		d := g.rng.IntN(len(g.chains))
		var hashes []uint64
		for n := 1 + g.rng.IntN(3); n > 0; n-- {
			hashes = append(hashes, g.chains[d][g.rng.IntN(len(g.chains[d]))])
		}
		if g.rng.IntN(10) == 0 {
			hashes = append(hashes, g.rng.Uint64())
		}
		return []any{"DYNKV.APPLY", AppendEvent(nil, Event{Kind: KindRemove, Rank: r, EventID: g.eventID(r), Hashes: hashes})}
	case x < 88:
		return []any{"DYNKV.APPLY", AppendEvent(nil, Event{Kind: KindClear, Rank: r, EventID: g.eventID(r)})}
	case x < 90:
		g.next[r] = 0
		return []any{"DYNKV.RESET_WORKER", u64(r.Worker), u32(r.DPRank)}
	case x < 92:
		return []any{"DYNKV.REMOVE_WORKER", u64(r.Worker), u32(r.DPRank)}
	case x < 93:
		if g.rng.IntN(4) == 0 { // rare: it fences the worker's later ranks for good
			return []any{"DYNKV.REMOVE_WORKER_ALL", u64(r.Worker)}
		}
		return []any{"DYNKV.REGISTER_WORKER", u64(r.Worker), u32(r.DPRank)}
	default:
		ticket := rankGen(r)
		if g.rng.IntN(5) == 0 {
			ticket = u64(g.rng.Uint64N(4))
		}
		var events []Event
		for n := g.rng.IntN(4); n > 0; n-- {
			events = append(events, g.store(r, uint64(len(events)+1), len(events) == 0 || g.rng.IntN(3) > 0))
		}
		g.next[r] = uint64(len(events))
		return []any{"DYNKV.REPLACE_RANK_IF_GENERATION", u64(r.Worker), u32(r.DPRank), ticket, AppendSnapshot(nil, events)}
	}
}

// query returns local hashes along a document, sometimes leaving it: into
// the documents' alphabet (blocks other ranks may hold) or into fresh
// random hashes (a new canonical hash each time, so the filter's collision
// checks there are independent trials).
func (g *streamGen) query() []uint64 {
	doc := g.docs[g.rng.IntN(len(g.docs))]
	q := slices.Clone(doc[:1+g.rng.IntN(len(doc))])
	fresh := g.rng.IntN(2) == 0
	for n := g.rng.IntN(3); n > 0; n-- {
		if fresh {
			q = append(q, g.rng.Uint64())
		} else {
			q = append(q, 1+g.rng.Uint64N(4))
		}
	}
	return q
}

// rawReply renders a reply exactly as it came: a value or the error line.
func rawReply(c *redis.Client, args ...any) string {
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil {
		return "-" + err.Error()
	}
	return fmt.Sprintf("+%v", v)
}

// ckfOracle predicts a ckf-backed Store's MATCH from its exact state: rank
// r's lane holds the fingerprints of the canonical hashes of the nodes r
// actively owns, and an absent hash hits the lane exactly when one of those
// has its fingerprint and bucket pair (equal fingerprints have equal
// alternate distances, so two pairs that meet are equal). Without capacity
// omissions that is the filter's whole membership, whatever the cuckoo
// placement. raw is each rank's run of hits before the node-tree cap.
func ckfOracle(s *Store, locals []uint64) (want []MatchEntry, raw map[Rank]int, load map[Rank]float64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	f := s.proj.x.Format()
	key := func(h uint64) uint64 {
		p := f.Probe(h)
		return uint64(p.FP)<<32 | uint64(min(p.A, p.B))
	}
	chain := kv.AppendChain(nil, false, 0, locals)
	var path []*node
	for parent := RootParent; len(path) < len(locals); {
		n := s.child(parent, locals[len(path)])
		if n == nil {
			break
		}
		path = append(path, n)
		parent = n.hash
	}
	raw, load = map[Rank]int{}, map[Rank]float64{}
	for r, st := range s.ranks {
		if st.active == 0 {
			continue
		}
		held := map[uint64]bool{}
		for n := range st.nodes {
			if o := n.owner(st); o != nil && o.active {
				held[key(n.canon)] = true
			}
		}
		d := 0
		for d < len(chain) && held[key(chain[d])] {
			d++
		}
		raw[r], load[r] = d, float64(st.active)/float64(4*f.Buckets())
		if d = min(d, len(path)); d > 0 {
			want = append(want, MatchEntry{Rank: r, Matched: uint32(d), Last: path[d-1].hash})
		}
	}
	slices.SortFunc(want, func(a, b MatchEntry) int { return compareRank(a.Rank, b.Rank) })
	return want, raw, load
}

// streamSides runs one command on the exact or the ckf side: do returns
// the reply rendered so that equal strings mean equal replies, bulk the
// bytes of a bulk reply (MATCH, tickets).
type streamSides struct {
	do       func(ckf bool, args ...any) string
	bulk     func(ckf bool, args ...any) []byte
	ckfStore func() *Store // nil until the key exists
	// freshProbes is how many one-block queries of a fresh random hash
	// each query step also puts to the ckf filters directly: no rank
	// holds such a block, so every lane that hits is a collision, an
	// independent trial at p = 8α/65535 (spec §7).
	freshProbes int
}

// streamResult counts what runStream saw.
type streamResult struct {
	mutations, errs, queries, selects int
	replaced                          int // successful REPLACE_RANK_IF_GENERATION
	errCodes                          map[string]int
	overcounts                        int     // MATCH entries above exact
	checks, collisions                int     // first absent positions probed; filter hits there
	estimate                          float64 // Σ 8α/65535 over the checks (spec §7)
	// The same query meets the same lane again and again, and a repeated
	// check repeats its verdict: distinct counts (rank, hash) checks
	// once, with the estimate of its first occurrence.
	distinct         map[[3]uint64]bool
	distinctEstimate float64
	// Fresh probes (streamSides.freshProbes): lane trials, lanes that
	// hit, and Σ p over the trials.
	freshTrials, freshHits int
	freshEstimate          float64
	queriesSeen            [][]uint64
}

// runStream drives both sides with the generator's stream. Every mutation
// must reply the same on both. Every ckf MATCH reply must equal what
// ckfOracle predicts from the exact state, hence lie in [exact, exact +
// collisions], with every exact entry present; SELECT must agree whenever
// MATCH does.
func runStream(t *testing.T, seed uint64, steps int, sides streamSides) streamResult {
	t.Helper()
	g := newStreamGen(seed)
	res := streamResult{distinct: map[[3]uint64]bool{}, errCodes: map[string]int{}}
	rankGen := func(r Rank) []byte {
		return sides.bulk(false, "DYNKV.RANK_GENERATION", testKey, u64(r.Worker), u32(r.DPRank))
	}
	for step := 0; step < steps; step++ {
		if g.rng.IntN(100) < 70 {
			m := g.mutation(rankGen)
			args := append([]any{m[0], testKey}, m[1:]...)
			want, got := sides.do(false, args...), sides.do(true, args...)
			if got != want {
				t.Fatalf("step %d: %v: ckf %q, exact %q (seed %d)", step, args[0], got, want, seed)
			}
			res.mutations++
			switch {
			case want[0] == '-':
				res.errs++
				res.errCodes[strings.Fields(want[1:])[0]]++
			case args[0] == "DYNKV.REPLACE_RANK_IF_GENERATION":
				res.replaced++
			}
			continue
		}
		locals := g.query()
		if len(res.queriesSeen) < 200 {
			res.queriesSeen = append(res.queriesSeen, locals)
		}
		req := AppendMatchRequest(nil, locals)
		eb, cb := sides.bulk(false, "DYNKV.MATCH_PRIMARY", testKey, req), sides.bulk(true, "DYNKV.MATCH_PRIMARY", testKey, req)
		ee, err1 := DecodeMatchReply(eb)
		ce, err2 := DecodeMatchReply(cb)
		require.NoError(t, err1, "decode exact MATCH_PRIMARY reply %x", eb)
		require.NoError(t, err2, "decode ckf MATCH_PRIMARY reply %x", cb)
		res.queries++
		st := sides.ckfStore()
		if st == nil {
			continue
		}
		want, raw, load := ckfOracle(st, locals)
		st.mu.RLock()
		lanes := st.proj.x.Match(nil, locals) // the filters' own runs, before the node-tree cap
		st.mu.RUnlock()
		for _, o := range lanes {
			if r := (Rank{o.Member.Worker, o.Member.Rank}); raw[r] != o.Blocks {
				t.Errorf("step %d: rank %d/%d's lane holds a run of %d for %v, its membership predicts %d (seed %d)", step, r.Worker, r.DPRank, o.Blocks, locals, raw[r], seed)
			}
		}
		if n := len(lanes); n != countPositive(raw) {
			t.Errorf("step %d: %d lanes hit %v, the membership predicts %d (seed %d)", step, n, locals, countPositive(raw), seed)
		}
		if !slices.Equal(ce, want) {
			t.Errorf("step %d: MATCH_PRIMARY(%v) ckf = %+v, the filter's membership predicts %+v (exact %+v; seed %d)", step, locals, ce, want, ee, seed)
		}
		exactDepth := map[Rank]int{}
		for _, e := range ee {
			exactDepth[e.Rank] = int(e.Matched)
		}
		for _, e := range ce {
			if int(e.Matched) < exactDepth[e.Rank] {
				t.Errorf("step %d: MATCH_PRIMARY(%v) rank %d/%d = %d, below the exact %d (seed %d)", step, locals, e.Rank.Worker, e.Rank.DPRank, e.Matched, exactDepth[e.Rank], seed)
			}
			if int(e.Matched) > exactDepth[e.Rank] {
				res.overcounts++
			}
		}
		for r, d := range exactDepth {
			if !slices.ContainsFunc(ce, func(e MatchEntry) bool { return e.Rank == r }) {
				t.Errorf("step %d: MATCH_PRIMARY(%v) rank %d/%d missing from the ckf reply, exact %d (seed %d)", step, locals, r.Worker, r.DPRank, d, seed)
			}
		}
		// One collision check per rank holding blocks whose exact run
		// stops inside the query: its first absent position is probed.
		exactAll := map[Rank]int{}
		for _, e := range ee {
			exactAll[e.Rank] = int(e.Matched)
		}
		var chain []uint64
		for r, d := range raw {
			if e := exactAll[r]; e < len(locals) {
				p := -math.Expm1(8 * load[r] * math.Log1p(-1.0/65535)) // 1 − (1 − 1/65535)^(8α)
				res.checks++
				res.estimate += p
				if chain == nil {
					chain = kv.AppendChain(nil, false, 0, locals)
				}
				if k := [3]uint64{r.Worker, uint64(r.DPRank), chain[e]}; !res.distinct[k] {
					res.distinct[k] = true
					res.distinctEstimate += p
				}
				if d > e {
					res.collisions++
				}
			}
		}
		if d, active := st.Detail(), activeStates(st); d.CKF.TrackedBlocks != uint64(active) || d.CKF.Resident != uint64(active) || d.CKF.Members != d.RanksWithBlocks {
			t.Fatalf("step %d: the CKF tracks %d blocks (%d resident) in %d lanes; the Store has %d active states in %d ranks (seed %d)",
				step, d.CKF.TrackedBlocks, d.CKF.Resident, d.CKF.Members, active, d.RanksWithBlocks, seed)
		}
		if sides.freshProbes > 0 {
			st.mu.RLock()
			sum, holding := 0.0, 0
			for _, rs := range st.ranks {
				if rs.active > 0 {
					holding++
					sum += -math.Expm1(8 * float64(rs.active) / float64(4*st.proj.x.Format().Buckets()) * math.Log1p(-1.0/65535))
				}
			}
			for i := 0; i < sides.freshProbes; i++ {
				res.freshHits += len(st.proj.x.Match(nil, []uint64{g.rng.Uint64()}))
			}
			st.mu.RUnlock()
			res.freshTrials += holding * sides.freshProbes
			res.freshEstimate += sum * float64(sides.freshProbes)
		}
		if g.rng.IntN(4) == 0 && bytes.Equal(eb, cb) {
			var cands []SelectCandidate
			for _, r := range g.ranks[:1+g.rng.IntN(len(g.ranks))] {
				cands = append(cands, SelectCandidate{Rank: r, Load: g.rng.Uint64N(3)})
			}
			sel := AppendSelectRequest(nil, locals, cands)
			if w, c := sides.do(false, "DYNKV.SELECT", testKey, sel), sides.do(true, "DYNKV.SELECT", testKey, sel); w != c {
				t.Errorf("step %d: SELECT(%v) ckf %x, exact %x with equal MATCH replies", step, locals, c, w)
			}
			res.selects++
		}
	}
	if want, got := sides.do(false, "DYNKV.STATS", testKey), sides.do(true, "DYNKV.STATS", testKey); got != want {
		t.Errorf("STATS ckf %s, exact %s", got, want)
	}
	if st := sides.ckfStore(); st != nil {
		d := st.Detail()
		if d.CKFMirrorErrors != 0 || d.CKF.CapacityOmissions != 0 || d.CKF.TrackedBlocks != uint64(activeStates(st)) {
			t.Errorf("ckf detail %+v: want no mirror errors, no capacity omissions and one tracked block per active state", d)
		}
	}
	if res.checks == 0 || res.errs == 0 || res.mutations == res.errs || res.replaced == 0 {
		t.Errorf("the stream exercised too little: %d checks, %d error replies, %d successful mutations, %d replacements", res.checks, res.errs, res.mutations-res.errs, res.replaced)
	}
	// Loose: a few events of Poisson noise, so 3× the estimate plus 10.
	if float64(res.collisions) > 3*res.estimate+10 {
		t.Errorf("filter collisions %d > 3 × the estimate %.1f + 10", res.collisions, res.estimate)
	}
	t.Logf("%d mutations (%d error replies, all identical: %v; %d replacements), %d queries, %d SELECTs; %d MATCH entries above exact (after the node-tree cap), none below",
		res.mutations, res.errs, res.errCodes, res.replaced, res.queries, res.selects, res.overcounts)
	t.Logf("filter collisions at the first absent position: %d of %d checks, rate %.3g; spec estimate Σ 8α/65535 = %.1f (rate %.3g); %d distinct (rank, hash) checks, estimate %.2f",
		res.collisions, res.checks, float64(res.collisions)/float64(max(res.checks, 1)), res.estimate, res.estimate/float64(max(res.checks, 1)),
		len(res.distinct), res.distinctEstimate)
	if res.freshTrials > 0 {
		t.Logf("fresh probes: %d lanes hit of %d lane trials, rate %.3g; spec estimate %.1f (rate %.3g)",
			res.freshHits, res.freshTrials, float64(res.freshHits)/float64(res.freshTrials), res.freshEstimate, res.freshEstimate/float64(res.freshTrials))
		// Loose both ways: ranks share blocks, and a probe that meets a
		// shared block's fingerprint hits all their lanes at once, so the
		// count is far more dispersed than a Poisson count of the same mean.
		if h, e := float64(res.freshHits), res.freshEstimate; h > 3*e+10 || h < e/3-10 {
			t.Errorf("fresh probes: %d lanes hit, outside [estimate/3 − 10, 3 × estimate + 10] for the estimate %.1f", res.freshHits, e)
		}
	}
	return res
}

// streamSeed returns the stream seed: 7, or DYNKV_CKF_SEED.
func streamSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(7)
	if v := os.Getenv(ckfStreamSeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 0, 64)
		require.NoError(t, err, "%s=%q", ckfStreamSeedEnv, v)
		seed = n
	}
	t.Logf("seed %d (override with %s)", seed, ckfStreamSeedEnv)
	return seed
}

// TestServer_CKFStreamMatchesExactWithinCollisions drives an exact and a
// ckf-backed server (with an append-only log) with the same random stream
// over the wire (runStream): mutation replies, error lines included, are
// byte-identical, and every MATCH entry lies in [exact, exact + collisions].
// The ckf server then restarts from its log and must answer the same MATCH
// bytes and STATS.
func TestServer_CKFStreamMatchesExactWithinCollisions(t *testing.T) {
	seed, steps := streamSeed(t), 20000
	if testing.Short() {
		steps = 4000
	}
	backing := Backing{Index: IndexCKF, CKFExpectedBlocks: 64}
	logPath := filepath.Join(t.TempDir(), "ckf.aof")
	exactSrv := startServer(t, Config{})
	ckfSrv, err := NewServer(Config{Addr: "127.0.0.1:0", LogPath: logPath, Backing: backing})
	require.NoError(t, err, "NewServer(ckf)")
	go ckfSrv.Serve()
	exact, ckfc := client(t, exactSrv), client(t, ckfSrv)
	side := func(ckf bool) *redis.Client {
		if ckf {
			return ckfc
		}
		return exact
	}
	res := runStream(t, seed, steps, streamSides{
		do: func(ckf bool, args ...any) string { return rawReply(side(ckf), args...) },
		bulk: func(ckf bool, args ...any) []byte {
			b, err := side(ckf).Do(context.Background(), args...).Text()
			require.NoError(t, err, "%v (ckf %v)", args[0], ckf)
			return []byte(b)
		},
		ckfStore: func() *Store { return ckfSrv.Engine().lookup([]byte(testKey)) },
	})

	wantStats := rawReply(ckfc, "DYNKV.STATS", testKey)
	before := make([]string, len(res.queriesSeen))
	for i, q := range res.queriesSeen {
		before[i] = rawReply(ckfc, "DYNKV.MATCH", testKey, AppendMatchRequest(nil, q))
	}
	require.NoError(t, ckfSrv.Close(), "Close ckf server")
	restarted := startServer(t, Config{LogPath: logPath, Backing: backing})
	rc := client(t, restarted)
	for i, q := range res.queriesSeen {
		if got := rawReply(rc, "DYNKV.MATCH", testKey, AppendMatchRequest(nil, q)); got != before[i] {
			t.Errorf("MATCH(%v) after restart from the log = %x, before %x", q, got, before[i])
		}
	}
	if got := rawReply(rc, "DYNKV.STATS", testKey); got != wantStats {
		t.Errorf("STATS after restart %s, want %s", got, wantStats)
	}
}

// TestEngine_CKFStreamCollisionsMatchTheEstimate runs the same comparison
// in process, long enough (and with filters small enough) that fingerprint
// collisions actually occur: each must be one the filter's membership
// predicts, and their count must stay within the loose bound of the spec's
// estimate.
func TestEngine_CKFStreamCollisionsMatchTheEstimate(t *testing.T) {
	seed, steps := streamSeed(t), 60000
	if testing.Short() {
		steps = 20000
	}
	engines := [2]*Engine{NewEngine()}
	var err error
	engines[1], err = NewEngineWith(Backing{Index: IndexCKF, CKFExpectedBlocks: 64})
	require.NoError(t, err, "NewEngineWith(ckf)")
	exec := func(ckf bool, args ...any) reply {
		b := make([][]byte, len(args))
		for i, a := range args {
			switch v := a.(type) {
			case string:
				b[i] = []byte(v)
			case []byte:
				b[i] = v
			default:
				t.Fatalf("argument %d of %v: %T", i, args[0], a)
			}
		}
		r := engines[b2i(ckf)].Exec(b)
		return r
	}
	runStream(t, seed+1, steps, streamSides{
		do:          func(ckf bool, args ...any) string { return render(exec(ckf, args...)) },
		bulk:        func(ckf bool, args ...any) []byte { return exec(ckf, args...).bulk },
		ckfStore:    func() *Store { return engines[1].lookup([]byte(testKey)) },
		freshProbes: 16,
	})
}

func countPositive(m map[Rank]int) int {
	n := 0
	for _, v := range m {
		if v > 0 {
			n++
		}
	}
	return n
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestStore_CKFLaneLimit: in ckf mode at most CKFLanes ranks hold blocks at
// once. A store that would add one more fails whole with
// DYNKV_INVALID_EVENT (a replacement with DYNKV_INVALID_REPLACE) and
// changes nothing; one that would activate nothing still answers NOOP; a
// freed lane is taken again. The exact backing has no such limit.
func TestStore_CKFLaneLimit(t *testing.T) {
	ckfStore, err := NewStoreWith(Backing{Index: IndexCKF, CKFExpectedBlocks: 16})
	require.NoError(t, err, "NewStoreWith(ckf)")
	exactStore := NewStore()
	for w := uint64(1); w <= CKFLanes; w++ {
		for _, s := range []*Store{ckfStore, exactStore} {
			mustApply(t, s, chainStore(Rank{w, 0}, 1, nil, []uint64{w, 1}), true)
		}
	}
	extra := Rank{CKFLanes + 1, 0}
	mustApply(t, exactStore, chainStore(extra, 1, nil, []uint64{1}), true)
	before := snapshotStats(ckfStore)
	if _, err := ckfStore.Apply(chainStore(extra, 1, nil, []uint64{1})); CodeOf(err) != CodeInvalidEvent {
		t.Errorf("store for rank %d of %d: err = %v, want %s", CKFLanes+1, CKFLanes, err, CodeInvalidEvent)
	}
	if ckfStore.validReplacement([]Event{chainStore(extra, 1, nil, []uint64{1})}) {
		t.Errorf("replace for rank %d of %d: valid, want DYNKV_INVALID_REPLACE", CKFLanes+1, CKFLanes)
	}
	if after := snapshotStats(ckfStore); after[0] != before[0] || after[1] != before[1] {
		t.Errorf("refused stores changed the index: stats %v → %v", before, after)
	}
	if got := matched(ckfStore, extra, 1); got != 0 {
		t.Errorf("refused rank matched %d blocks", got)
	}
	// A rank holding a lane may still replace its blocks: the lane is its own.
	r30 := Rank{3, 0}
	dump := []Event{chainStore(r30, 1, nil, []uint64{3})}
	if !ckfStore.validReplacement(dump) {
		t.Errorf("replace of a rank holding a lane: invalid")
	}
	ckfStore.mu.Lock()
	rep := ckfStore.replaceRank(r30, dump)
	ckfStore.mu.Unlock()
	if rep.kind == replyError {
		t.Errorf("replace of a rank holding a lane: %s", rep.str)
	}
	if got := matched(ckfStore, r30, 3, 1); got != 1 {
		t.Errorf("after replacing rank 3/0 with [3]: Match([3 1]) = %d, want 1", got)
	}
	// Removing every block of one rank frees its lane.
	mustApply(t, ckfStore, Event{Kind: KindRemove, Rank: Rank{2, 0}, EventID: 2, Hashes: []uint64{chainHash(2), chainHash(2, 1)}}, true)
	mustApply(t, ckfStore, chainStore(extra, 1, nil, []uint64{1}), true)
	if got := matched(ckfStore, extra, 1); got != 1 {
		t.Errorf("rank taking a freed lane matched %d, want 1", got)
	}
	// Full again: a store that activates nothing (older than the rank's
	// remove of its only block) answers NOOP, not an error.
	mustApply(t, ckfStore, chainStore(Rank{2, 0}, 1, nil, []uint64{2}), false)

	if d := ckfStore.Detail(); d.RanksWithBlocks != CKFLanes || d.CKF.Members != CKFLanes || d.CKFMirrorErrors != 0 {
		t.Errorf("Detail = %d ranks with blocks, %d CKF members, %d mirror errors; want %d, %d, 0", d.RanksWithBlocks, d.CKF.Members, d.CKFMirrorErrors, CKFLanes, CKFLanes)
	}
}

// TestStore_CKFCapacityOmissionIsCountedNotAnError: a rank holding more
// blocks than its filter has slots keeps the exact bookkeeping (APPLY
// answers OK), the blocks the filter could not admit are counted in the
// detail, and MATCH reports only the run the filter holds (a documented
// stable false negative until space frees).
func TestStore_CKFCapacityOmissionIsCountedNotAnError(t *testing.T) {
	s, err := NewStoreWith(Backing{Index: IndexCKF, CKFExpectedBlocks: 1}) // 2 buckets = 8 slots
	require.NoError(t, err, "NewStoreWith(ckf, 1 block)")
	locals := make([]uint64, 12)
	for i := range locals {
		locals[i] = uint64(100 + i)
	}
	mustApply(t, s, chainStore(r10, 1, nil, locals), true)
	d := s.Detail()
	if d.CKF.TrackedBlocks != 12 || d.CKF.Resident != 8 || d.CKF.CapacityOmissions != 4 || d.CKFMirrorErrors != 0 {
		t.Errorf("Detail = %d tracked, %d resident, %d omitted, %d mirror errors; want 12, 8, 4, 0", d.CKF.TrackedBlocks, d.CKF.Resident, d.CKF.CapacityOmissions, d.CKFMirrorErrors)
	}
	if got := matched(s, r10, locals...); got != 8 {
		t.Errorf("Match(12 stored blocks, 8 admitted) = %d, want 8", got)
	}
	// Freeing the lane's tail makes room: a re-store is admitted.
	mustApply(t, s, Event{Kind: KindRemove, Rank: r10, EventID: 2, Hashes: kv.AppendChain(nil, false, 0, locals)[6:]}, true)
	mustApply(t, s, chainStore(r10, 3, locals[:6], locals[6:8]), true)
	if got := matched(s, r10, locals...); got != 8 {
		t.Errorf("Match after freeing and re-storing = %d, want 8", got)
	}
}

// TestServer_StatsDetail: DYNKV.STATS keeps the module's triple in both
// backings; DYNKV.STATS key DETAIL names the backing and, in ckf mode, the
// CKF's counters.
func TestServer_StatsDetail(t *testing.T) {
	for _, b := range testBackings() {
		t.Run("index="+string(b.Index), func(t *testing.T) {
			s := startServer(t, Config{Backing: b})
			c := client(t, s)
			ctx := context.Background()
			absent, err := c.Do(ctx, "DYNKV.STATS", testKey, "detail").Slice()
			require.NoError(t, err, "STATS DETAIL on an absent key")
			require.Equal(t, string(b.Index), absent[1], "STATS DETAIL index on an absent key")
			require.Equal(t, "OK", c.Do(ctx, "DYNKV.APPLY", testKey, mustHex(t, goldenStore)).Val(), "APPLY golden store")
			stats, err := c.Do(ctx, "DYNKV.STATS", testKey).Int64Slice()
			require.NoError(t, err, "STATS")
			require.Equal(t, []int64{2, 1, 1}, stats, "STATS [nodes, rank states, mutations]")
			arr, err := c.Do(ctx, "DYNKV.STATS", testKey, "DETAIL").Slice()
			require.NoError(t, err, "STATS DETAIL")
			got := map[string]any{}
			for i := 0; i+1 < len(arr); i += 2 {
				got[arr[i].(string)] = arr[i+1]
			}
			want := map[string]any{"index": string(b.Index), "nodes": int64(2), "rank_states": int64(1), "mutations": int64(1), "ranks_with_blocks": int64(1)}
			if b.Index == IndexCKF {
				want["ckf_lanes"], want["ckf_expected_blocks"], want["ckf_buckets"] = int64(CKFLanes), int64(1024), int64(512)
				want["ckf_members"], want["ckf_tracked_blocks"], want["ckf_resident"] = int64(1), int64(2), int64(2)
				want["ckf_capacity_omissions"], want["ckf_mirror_errors"], want["ckf_load_factor"] = int64(0), int64(0), "0.0010"
				require.Greater(t, got["ckf_memory_bytes"], int64(0), "ckf_memory_bytes")
				delete(got, "ckf_memory_bytes")
			}
			require.Equal(t, want, got, "STATS DETAIL")
			err = c.Do(ctx, "DYNKV.STATS", testKey, "MORE").Err()
			require.ErrorContains(t, err, "ERR goindex dynkv: DYNKV.STATS takes a key and optionally DETAIL", "STATS with an unknown argument")
		})
	}
}

func TestNewServer_RejectsBadBacking(t *testing.T) {
	for _, b := range []Backing{{Index: "radix"}, {Index: IndexCKF, CKFExpectedBlocks: 1 << 40}} {
		if _, err := NewServer(Config{Addr: "127.0.0.1:0", Backing: b}); !errors.Is(err, ErrBadBacking) {
			t.Errorf("NewServer(backing %+v) err = %v, want ErrBadBacking", b, err)
		}
	}
}

// TestStore_CKFCollisionOvercountsOnlyWhereANodeExists builds a fingerprint
// collision on purpose: a root block x whose fingerprint and bucket pair are
// those of rank 1/0's block. A query for x alone gets nothing from ckf mode
// (no node represents x, so the lane's false hit is capped away); once rank
// 2/0 stores x, the query reports 1/0 one block above its exact 0, the only
// kind of overcount ckf mode makes, with x's node as the last hash.
func TestStore_CKFCollisionOvercountsOnlyWhereANodeExists(t *testing.T) {
	s, err := NewStoreWith(Backing{Index: IndexCKF, CKFExpectedBlocks: 1}) // 2 buckets: pairs collide often
	require.NoError(t, err, "NewStoreWith(ckf)")
	const held = 11
	mustApply(t, s, chainStore(r10, 1, nil, []uint64{held}), true)
	f := s.proj.x.Format()
	key := func(h uint64) [2]uint64 {
		p := f.Probe(h)
		return [2]uint64{uint64(p.FP), uint64(min(p.A, p.B))}
	}
	x := uint64(0)
	for h := uint64(held + 1); ; h++ { // a root block's canonical hash is its local hash
		if key(h) == key(held) {
			x = h
			break
		}
	}
	if got := s.Match([]uint64{x}, 0); len(got) != 0 {
		t.Errorf("Match([%#x]) with no node for it = %+v, want nothing", x, got)
	}
	mustApply(t, s, chainStore(r20, 1, nil, []uint64{x}), true)
	want := []MatchEntry{{Rank: r10, Matched: 1, Last: x}, {Rank: r20, Matched: 1, Last: x}}
	if got := s.Match([]uint64{x}, 0); !slices.Equal(got, want) {
		t.Errorf("Match([%#x]) = %+v, want the collision on 1/0 and 2/0's own block: %+v", x, got, want)
	}
	exact := NewStore()
	mustApply(t, exact, chainStore(r10, 1, nil, []uint64{held}), true)
	mustApply(t, exact, chainStore(r20, 1, nil, []uint64{x}), true)
	if got := exact.Match([]uint64{x}, 0); !slices.Equal(got, want[1:]) {
		t.Errorf("exact Match([%#x]) = %+v, want only 2/0", x, got)
	}
}
