package dynkv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/internal/testseed"
)

// lifecycleGen extends streamGen's stream with the commands of owner leases
// and admission: leased registrations (v3 quoting the live token, v2,
// stale tokens), APPLY_OWNED from the owner and from strangers, lease
// renewals, unregistrations, SELECT_RESERVE, RELEASE, RENEW, GC with
// random watermarks and budgets, and now and then DEL or FLUSHALL, over
// several keys, while its clock moves so that leases and reservations
// expire.
type lifecycleGen struct {
	*streamGen
	keys  []string
	now   time.Time
	token func(key string, worker uint64) uint64 // the live registration token
	stamp map[string]uint64                      // key → a reservation's expiry seen (RELEASE and RENEW quote it)
}

func newLifecycleGen(seed uint64, token func(key string, worker uint64) uint64) *lifecycleGen {
	return &lifecycleGen{streamGen: newStreamGen(seed), keys: []string{"dynamo:a", "dynamo:b", "dynamo:c"},
		now: time.UnixMilli(1_700_000_000_000), token: token, stamp: map[string]uint64{}}
}

// owner is one of two owner nonces per worker.
func (g *lifecycleGen) owner(w uint64) uint64 { return 1000*w + 1 + g.rng.Uint64N(2) }

// next advances the clock and returns the next command (name and key
// first).
func (g *lifecycleGen) next(tickets func(key string, r Rank) []byte) [][]byte {
	switch g.rng.IntN(20) {
	case 0:
		g.now = g.now.Add(time.Duration(1+g.rng.IntN(3)) * time.Second)
	default:
		g.now = g.now.Add(time.Duration(g.rng.IntN(40)) * time.Millisecond)
	}
	key := g.keys[g.rng.IntN(len(g.keys))]
	r := g.rank()
	var rest []any
	switch x := g.rng.IntN(100); {
	case x < 45:
		rest = g.mutation(func(r Rank) []byte { return tickets(key, r) })
	case x < 53:
		tok := g.token(key, r.Worker)
		if g.rng.IntN(6) == 0 {
			tok = g.rng.Uint64N(tok + 2)
		}
		version := uint8(3)
		if g.rng.IntN(8) == 0 {
			version = 2
		}
		ranks := []uint32{r.DPRank}
		if g.rng.IntN(3) == 0 {
			ranks = []uint32{0, 1}
		}
		reg := Registration{Version: version, OwnerNonce: g.owner(r.Worker), LeaseMs: 200 + g.rng.Uint64N(3000), ExpectedGeneration: tok, Ranks: ranks}
		rest = []any{"DYNKV.REGISTER_WORKER_RANKS", u64(r.Worker), AppendRegistration(nil, reg)}
	case x < 65:
		rest = []any{"DYNKV.APPLY_OWNED", u64(g.owner(r.Worker)), AppendEvent(nil, g.store(r, g.eventID(r), g.rng.IntN(2) == 0))}
	case x < 68:
		ev := Event{Kind: KindRemove, Rank: r, EventID: g.eventID(r), Hashes: []uint64{g.chains[0][0], g.chains[1][1]}}
		if g.rng.IntN(3) == 0 {
			ev = Event{Kind: KindClear, Rank: r, EventID: g.eventID(r)}
		}
		rest = []any{"DYNKV.APPLY_OWNED", u64(g.owner(r.Worker)), AppendEvent(nil, ev)}
	case x < 71:
		rest = []any{"DYNKV.RENEW_WORKER_LEASE", AppendLease(nil, LeasePayload{Worker: r.Worker, OwnerNonce: g.owner(r.Worker), LeaseMs: 500 + g.rng.Uint64N(2000)}, true)}
	case x < 74:
		rest = []any{"DYNKV.UNREGISTER_WORKER", AppendLease(nil, LeasePayload{Worker: r.Worker, OwnerNonce: g.owner(r.Worker)}, false)}
	case x < 82:
		var cands [][3]uint64
		for range 1 + g.rng.IntN(3) {
			c := g.rank()
			cands = append(cands, [3]uint64{c.Worker, uint64(c.DPRank), 1 + g.rng.Uint64N(2)})
		}
		doc := g.docs[g.rng.IntN(len(g.docs))]
		rest = []any{"DYNKV.SELECT_RESERVE", reserveRequest(fmt.Sprint("d", g.rng.IntN(2)), g.rng.Uint64N(3), g.rng.Uint64N(6), 100+g.rng.Uint64N(2000), doc[:1+g.rng.IntN(len(doc))], cands...)}
	case x < 86:
		id := identity(fmt.Sprint("d", g.rng.IntN(2)), g.rng.Uint64N(3), g.rng.Uint64N(6), g.stamp[key])
		rest = []any{"DYNKV.RELEASE", id}
	case x < 89:
		id := identity(fmt.Sprint("d", g.rng.IntN(2)), g.rng.Uint64N(3), g.rng.Uint64N(6), g.stamp[key], 100+g.rng.Uint64N(2000))
		rest = []any{"DYNKV.RENEW", id}
	case x < 97:
		mark := []byte("CURRENT")
		if g.rng.IntN(3) == 0 {
			mark = u64(g.rng.Uint64N(40))
		}
		rest = []any{"DYNKV.GC", mark, u32(uint32(1 + g.rng.IntN(12)))}
	case x < 98:
		rest = []any{"DYNKV.REGISTER_WORKER_RANKS", u64(r.Worker), AppendRegistration(nil, Registration{Version: 1, Ranks: []uint32{r.DPRank}})}
	case x < 99:
		return args("DEL", key)
	default:
		if g.rng.IntN(20) == 0 {
			return args("FLUSHALL")
		}
		return args("DYNKV.BARRIER", key)
	}
	return args(append([]any{rest[0], key}, rest[1:]...)...)
}

// observe records what a reply tells the generator (a reservation's expiry
// for later RELEASE and RENEW).
func (g *lifecycleGen) observe(cmd [][]byte, r reply) {
	if string(cmd[0]) == "DYNKV.SELECT_RESERVE" && r.kind == replyBulk && len(r.bulk) == 46 {
		v, _ := be64(r.bulk[30:38])
		g.stamp[string(cmd[1])] = v
	}
}

// engineSignature renders every read of the generator's universe: per key
// STATS, GC_STATS, LIFECYCLE_STATS, ADMISSION_STATS, each rank's ticket,
// each worker's registration token, MATCH of every document's prefixes and
// a SELECT over every rank; and the keys that exist.
func engineSignature(e *Engine, g *lifecycleGen, now time.Time) string {
	var b strings.Builder
	do := func(vs ...any) { fmt.Fprintf(&b, "%s %s\n", vs[0], render(e.ExecAt(now, args(vs...)))) }
	for _, key := range g.keys {
		fmt.Fprintf(&b, "exists %s %v\n", key, e.Exists([]byte(key)))
		do("DYNKV.STATS", key)
		do("DYNKV.GC_STATS", key)
		do("DYNKV.LIFECYCLE_STATS", key)
		do("DYNKV.ADMISSION_STATS", key)
		var cands []SelectCandidate
		for _, r := range g.ranks {
			do("DYNKV.RANK_GENERATION", key, u64(r.Worker), u32(r.DPRank))
			do("DYNKV.REGISTRATION_GENERATION", key, u64(r.Worker))
			cands = append(cands, SelectCandidate{Rank: r, Load: uint64(r.DPRank)})
		}
		for _, doc := range g.docs {
			for i := 1; i <= len(doc); i += 3 {
				do("DYNKV.MATCH", key, AppendMatchRequest(nil, doc[:i]))
			}
			do("DYNKV.SELECT", key, AppendSelectRequest(nil, doc, cands))
		}
	}
	return b.String()
}

// TestImage_RestoredEngineAnswersAsTheOriginal runs a random lifecycle
// stream on an engine and, at random points, restores its state image into
// fresh engines that then receive every later command too: every reply of
// every restored engine must equal the original's, their state images must
// equal its image, and at the end every read of the universe must agree.
// Exact and ckf backings; seeds GOINDEX_SEED (default 1) and the next three.
func TestImage_RestoredEngineAnswersAsTheOriginal(t *testing.T) {
	base := testseed.For(t, 1)
	for _, backing := range testBackings() {
		for seed := base; seed < base+4; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", backing.Index, seed), func(t *testing.T) {
				restoredEnginesAgree(t, backing, seed, 2500)
			})
		}
	}
}

func restoredEnginesAgree(t *testing.T, backing Backing, seed uint64, steps int) {
	orig, err := NewEngineWith(backing)
	if err != nil {
		t.Fatal(err)
	}
	var g *lifecycleGen
	g = newLifecycleGen(seed, func(key string, worker uint64) uint64 {
		v, _ := be64(orig.ExecAt(g.now, args("DYNKV.REGISTRATION_GENERATION", key, u64(worker))).bulk)
		return v
	})
	tickets := func(key string, r Rank) []byte {
		return orig.ExecAt(g.now, args("DYNKV.RANK_GENERATION", key, u64(r.Worker), u32(r.DPRank))).bulk
	}
	var restored []*Engine
	var restoredAt []int
	checkpoints := map[int]bool{}
	for len(checkpoints) < 5 {
		checkpoints[g.rng.IntN(steps)] = true
	}
	codes := map[string]int{}
	for step := range steps {
		if checkpoints[step] {
			img := orig.image()
			e, err := NewEngineWith(backing)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.restoreImage(img); err != nil {
				t.Fatalf("step %d: restore the image: %v", step, err)
			}
			if again := e.image(); !bytes.Equal(again, img) {
				t.Fatalf("step %d: the restored engine's image differs from the one it was restored from (%d vs %d bytes)", step, len(again), len(img))
			}
			restored, restoredAt = append(restored, e), append(restoredAt, step)
		}
		cmd := g.next(tickets)
		want := orig.ExecAt(g.now, cmd)
		g.observe(cmd, want)
		codes[tally(want)]++
		for i, e := range restored {
			if got := e.ExecAt(g.now, cmd); render(got) != render(want) {
				t.Fatalf("step %d %s: the engine restored at step %d answers %s, the original %s", step, cmd[0], restoredAt[i], render(got), render(want))
			}
		}
	}
	want := engineSignature(orig, g, g.now)
	for i, e := range restored {
		if got := engineSignature(e, g, g.now); got != want {
			t.Fatalf("the engine restored at step %d reads differently at the end:\n%s", restoredAt[i], firstLineDiff(got, want))
		}
		if !bytes.Equal(e.image(), orig.image()) {
			t.Fatalf("the engine restored at step %d has another image at the end", restoredAt[i])
		}
	}
	t.Logf("%d commands, %d restores; reply kinds: %v", steps, len(restored), codes)
}

// tally names a reply for a test's tally: its status or error, or its
// type.
func tally(r reply) string {
	switch r.kind {
	case replyStatus, replyError:
		return render(r)
	case replyBulk:
		return "bulk"
	case replyArray:
		return "array"
	}
	return "integer"
}

// firstLineDiff returns the first differing line of two renderings.
func firstLineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n  got:  %s\n  want: %s", i, g[i], w[i])
		}
	}
	return fmt.Sprintf("%d lines vs %d", len(g), len(w))
}

// TestImage_CoversEveryField keeps the image in step with the state: every
// field of the state's types must be listed here as written to the image or
// as derived on restore (and the restore test then proves the choice). A
// new field fails this test until it is placed.
func TestImage_CoversEveryField(t *testing.T) {
	placed := map[reflect.Type][]string{
		reflect.TypeOf(Store{}): {"mu", "nodes", "edges", "ranks", "epochs", "mutations", "tickets", "lifecycle", "gcFloor",
			"admissions", "reservations", "reservationSeq", "holding", "proj", "laneLimit",
			"gcPhase", "gcCursor", "nodeOrder", "rankOrder", "epochOrder", "admissionOrder"},
		reflect.TypeOf(node{}):  {"hash", "parent", "local", "canon", "owners", "children"},
		reflect.TypeOf(owner{}): {"rank", "eventID", "active", "cleanupGen"},
		reflect.TypeOf(rankState{}): {"rank", "lastClear", "dedupe", "hasDedupe", "generation", "retired", "registered", "tombstone", "tombGen", "managed", "tainted", "cleanupGen", "members", "nodes", "active",
			"epochIdx", "admissionCount", "reservationCount", "cleanupNodeGen", "cleanupNodesLeft"},
		reflect.TypeOf(epoch{}): {"worker", "generation", "lifecycle", "retiredAll", "ownerSet", "nonce", "expiresMs", "managed", "tainted", "lastExpSet", "lastExp", "pending", "cleanupGen", "ranks",
			"admissions", "reservations", "cleanupRanksLeft", "cleanupAdmissionsLeft"},
		reflect.TypeOf(admissionRank{}): {"key", "capacity", "incarnation", "active", "cleanupGen", "epochIdx"},
		reflect.TypeOf(reservation{}):   {"key", "rank", "incarnation", "expiresMs", "matched", "atGrant", "raw", "seq", "epochIdx"},
		reflect.TypeOf(gcKey{}):         {"set", "rank", "admission", "hash"},
		reflect.TypeOf(ownedNode{}):     {"n", "owner"},
	}
	for typ, names := range placed {
		var fields []string
		for i := range typ.NumField() {
			fields = append(fields, typ.Field(i).Name)
		}
		slices.Sort(fields)
		slices.Sort(names)
		if !slices.Equal(fields, names) {
			t.Errorf("%s has fields %v; the image places %v: write a new field to the image (image.go) or rebuild it on restore, then list it here", typ, fields, names)
		}
	}
}

// TestImage_DamagedImagesAreErrors: every truncation of a real image and
// random byte changes decode to an error or to a consistent engine (its own
// image decodes again), never a panic.
func TestImage_DamagedImagesAreErrors(t *testing.T) {
	img := sampleImage(t)
	for n := range len(img) {
		if _, err := decodeImage(img[:n], Backing{}); err == nil {
			t.Fatalf("an image cut to %d of %d bytes decoded", n, len(img))
		}
	}
	rng := rand.New(rand.NewPCG(testseed.For(t, 1), 7))
	for range 2000 {
		b := bytes.Clone(img)
		for range 1 + rng.IntN(3) {
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		}
		decodedAgain(t, b)
	}
}

// decodedAgain decodes b; if that succeeds, the engine must image and
// restore again.
func decodedAgain(t testing.TB, b []byte) {
	stores, err := decodeImage(b, Backing{})
	if err != nil {
		return
	}
	e := NewEngine()
	e.stores = stores
	if err := NewEngine().restoreImage(e.image()); err != nil {
		t.Fatalf("an accepted image re-images into one that fails: %v", err)
	}
}

// sampleImage is the image of a short lifecycle stream.
func sampleImage(t testing.TB) []byte {
	e := NewEngine()
	var g *lifecycleGen
	g = newLifecycleGen(3, func(key string, worker uint64) uint64 {
		v, _ := be64(e.ExecAt(g.now, args("DYNKV.REGISTRATION_GENERATION", key, u64(worker))).bulk)
		return v
	})
	tickets := func(key string, r Rank) []byte {
		return e.ExecAt(g.now, args("DYNKV.RANK_GENERATION", key, u64(r.Worker), u32(r.DPRank))).bulk
	}
	for range 300 {
		cmd := g.next(tickets)
		if string(cmd[0]) == "FLUSHALL" || string(cmd[0]) == "DEL" {
			continue
		}
		g.observe(cmd, e.ExecAt(g.now, cmd))
	}
	return e.image()
}

// FuzzDecodeImage: no input panics the image decoder, and an image it
// accepts images and restores again.
func FuzzDecodeImage(f *testing.F) {
	f.Add(sampleImage(f))
	f.Add([]byte(imageMagic))
	f.Fuzz(func(t *testing.T, b []byte) { decodedAgain(t, b) })
}
