package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/follow"
	"github.com/goindex/goindex/goindex/hostindex"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/internal/testseed"
	"github.com/goindex/goindex/tests/c/fixture"
)

func applyFrame(h cU64, frame []byte) status {
	return goindex_apply_frame(h, (*inU8)(unsafe.SliceData(frame)), cSize(len(frame)))
}

func attach(h cU64, path string) status {
	return goindex_attach_replica(h, charp(path), cSize(len(path)))
}

// The frames scenario (fixture.FramesScenario) through the Go exports: the
// same expectations tests/c checks through the C ABI.
func TestGlobal_FramesScenario(t *testing.T) {
	var s fixture.Script
	if err := fixture.FramesScenario(&s); err != nil {
		t.Fatalf("building the frames scenario: %v", err)
	}
	h := openT(t, scriptConfig(t, s.String()))
	runScript(t, h, s.String(), 0)
}

// The replica scenario: variant 1 attached, then variant 2 written as the
// next generation and picked up by the next probe (replica_check_ms 0).
func TestGlobal_ReplicaScenarioFollowsGenerations(t *testing.T) {
	var s fixture.Script
	if err := fixture.ReplicaScenario(&s); err != nil {
		t.Fatalf("building the replica scenario: %v", err)
	}
	path := filepath.Join(t.TempDir(), "replica")
	h := openT(t, scriptConfig(t, s.String()))
	for _, v := range fixture.ReplicaVariants() {
		if _, err := fixture.WriteReplicaVariant(path, v, time.Now()); err != nil {
			t.Fatalf("writing variant %d: %v", v, err)
		}
		if v == 1 {
			if rc := attach(h, path); rc != 0 {
				t.Fatalf("goindex_attach_replica(%s) = %d: %s", path, rc, lastError(h))
			}
		}
		runScript(t, h, s.String(), v)
	}
}

// hotAnswers returns, per replica variant, the entries of its "hot" probe
// as probe formats them.
func hotAnswers(t *testing.T) map[int][]string {
	var s fixture.Script
	if err := fixture.ReplicaScenario(&s); err != nil {
		t.Fatalf("building the replica scenario: %v", err)
	}
	answers := map[int][]string{}
	v := 0
	for _, line := range strings.Split(s.String(), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "variant" {
			fmt.Sscan(f[1], &v)
		}
		if len(f) > 2 && f[0] == "probe" && f[1] == "hot" {
			l := scriptLine{fields: f[2:]}
			_, i := l.hashes(t, 0)
			for k := l.int(t, i); k > 0; k-- {
				answers[v] = append(answers[v], fmt.Sprintf("%s/%s=%s", l.fields[i+1], l.fields[i+2], l.fields[i+3]))
				i += 3
			}
		}
	}
	return answers
}

// variantOf returns the variant whose hot answer holds every entry of got
// (a generation may be caught while the consumer is still installing its
// lanes, so some of its entries may be missing, never mixed with another
// generation's or at another depth), or 0.
func variantOf(answers map[int][]string, got string) int {
	entries := strings.Fields(got)
	for v, want := range answers {
		if len(entries) > 0 && !slices.ContainsFunc(entries, func(e string) bool { return !slices.Contains(want, e) }) {
			return v
		}
	}
	return 0
}

// Probes on several goroutines while the consumer replaces the file, twice:
// every answer belongs to one generation (never a mix, never a fault on an
// unmapped page), and the handle ends on the last generation.
func TestGlobal_GenerationChangesUnderConcurrentProbes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replica")
	if _, err := fixture.WriteReplicaVariant(path, 1, time.Now()); err != nil {
		t.Fatalf("writing variant 1: %v", err)
	}
	h := openT(t, fixture.ReplicaConfig())
	if rc := attach(h, path); rc != 0 {
		t.Fatalf("goindex_attach_replica = %d: %s", rc, lastError(h))
	}
	answers := hotAnswers(t)
	full := strings.Join(answers[1], " ")
	if got := probe(t, h, fixture.DocA); got != full {
		t.Fatalf("probe of variant 1 = %q, want %q", got, full)
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	var seen [3]atomic.Int64 // per variant; 0: an empty answer (a generation with no lane installed yet)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !done.Load() || n < 20; n++ {
				got := probe(t, h, fixture.DocA)
				v := variantOf(answers, got)
				if v == 0 && got != "" {
					t.Errorf("probe during generation changes = %q, want entries of one of %v", got, answers)
					return
				}
				seen[v].Add(1)
			}
		}()
	}
	for _, v := range []int{2, 1} {
		if _, err := fixture.WriteReplicaVariant(path, v, time.Now()); err != nil {
			t.Fatalf("writing variant %d: %v", v, err)
		}
		time.Sleep(5 * time.Millisecond) // let the probes run on this generation
	}
	done.Store(true)
	wg.Wait()
	if got := probe(t, h, fixture.DocA); got != full {
		t.Errorf("probe after the last change = %q, want variant 1's %q", got, full)
	}
	if g := stats(t, h).replica_generation; g != 3 {
		t.Errorf("replica_generation after two changes = %d, want 3", g)
	}
	t.Logf("answers seen: variant 1: %d, variant 2: %d, empty: %d", seen[1].Load(), seen[2].Load(), seen[0].Load())
}

// Every mode mismatch is GOINDEX_EMODE, after the argument checks.
func TestGlobal_ModeMismatchesAreEMODE(t *testing.T) {
	exact := openT(t, "{}")
	frame := []byte("frame")
	emode := code(hostindex.ErrMode)
	for _, c := range []struct {
		name string
		rc   status
	}{
		{"apply_frame on exact", applyFrame(exact, frame)},
		{"attach_replica on exact", attach(exact, "/dev/shm/x")},
		{"set_rtt on exact", goindex_set_rtt(exact, 1, 1)},
	} {
		if c.rc != emode {
			t.Errorf("%s = %d, want GOINDEX_EMODE", c.name, c.rc)
		}
	}
	if rc := goindex_apply_frame(exact, nil, 3); rc != code(errInvalid) {
		t.Errorf("apply_frame(NULL, 3) on exact = %d, want GOINDEX_EINVAL (arguments first)", rc)
	}
	bare := openT(t, `{"mode": "global"}`)
	fed := openT(t, `{"mode": "global", "dcs": [1, 2], "buckets": 64}`)
	one := []uint64{1}
	for _, h := range []cU64{bare, fed} {
		for name, rc := range map[string]status{
			"insert":        store(h, 0, nil, one),
			"remove":        goindex_remove(h, 0, 0, 0, u64p(one), 1),
			"clear":         goindex_clear(h, 0, 0, 0),
			"remove_worker": goindex_remove_worker(h, 0),
			"remove_rank":   goindex_remove_rank(h, 0, 0),
		} {
			if rc != emode {
				t.Errorf("%s on a global handle = %d, want GOINDEX_EMODE", name, rc)
			}
		}
		if c := stats(t, h); c.events_rejected != 0 || c.mode != cU32(hostindex.Global) {
			t.Errorf("stats after refused events: mode %d, events_rejected %d; want 3 and 0 (a mode error is no event)", c.mode, c.events_rejected)
		}
	}
	if rc := applyFrame(bare, frame); rc != emode || !strings.Contains(lastError(bare), `"dcs"`) {
		t.Errorf("apply_frame without dcs = %d (%s), want GOINDEX_EMODE naming dcs", rc, lastError(bare))
	}
	if rc := goindex_set_rtt(bare, 1, 1); rc != emode {
		t.Errorf("set_rtt without dcs = %d, want GOINDEX_EMODE", rc)
	}
	if got := probe(t, bare, one); got != "" {
		t.Errorf("probe of a global handle with no lanes = %q, want nothing", got)
	}
	path := filepath.Join(t.TempDir(), "replica")
	if _, err := fixture.WriteReplicaVariant(path, 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	if rc := attach(fed, path); rc != 0 {
		t.Fatalf("attach = %d: %s", rc, lastError(fed))
	}
	if rc := applyFrame(fed, frame); rc != emode || !strings.Contains(lastError(fed), "replica is attached") {
		t.Errorf("apply_frame after attach = %d (%s), want GOINDEX_EMODE", rc, lastError(fed))
	}
	if rc := goindex_set_rtt(fed, 1, 1); rc != emode {
		t.Errorf("set_rtt after attach = %d, want GOINDEX_EMODE", rc)
	}
}

// Bad paths and files are GOINDEX_EREPLICA (or EINVAL for the argument)
// and change nothing: a replica attached before keeps serving.
func TestGlobal_AttachRejectsBadPathsAndFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "replica")
	if _, err := fixture.WriteReplicaVariant(good, 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "foreign")
	if err := os.WriteFile(foreign, []byte(strings.Repeat("not a replica ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, "corrupt")
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	b[30] ^= 1 // the bucket count, under the checksum
	if err := os.WriteFile(corrupt, b, 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	h := openT(t, fixture.ReplicaConfig())
	if rc := attach(h, good); rc != 0 {
		t.Fatalf("attach(%s) = %d: %s", good, rc, lastError(h))
	}
	before := probe(t, h, fixture.DocA)
	for _, c := range []struct {
		path, detail string
		want         status
	}{
		{filepath.Join(dir, "missing"), "no such file", code(follow.ErrNoReplica)},
		{dir, "", code(follow.ErrNoReplica)},
		{foreign, "not a replica file", code(follow.ErrNoReplica)},
		{corrupt, "checksum", code(follow.ErrNoReplica)},
		{short, "corrupt", code(follow.ErrNoReplica)},
		{"", "empty", code(errInvalid)},
		{good + "\x00x", "NUL", code(errInvalid)},
	} {
		if rc := attach(h, c.path); rc != c.want || !strings.Contains(lastError(h), c.detail) {
			t.Errorf("attach(%q) = %d (%s), want %d mentioning %q", c.path, rc, lastError(h), c.want, c.detail)
		}
	}
	if rc := goindex_attach_replica(h, nil, 4); rc != code(errInvalid) {
		t.Errorf("attach(NULL, 4) = %d, want GOINDEX_EINVAL", rc)
	}
	if rc := goindex_attach_replica(h, charp(good), maxNameBytes+1); rc != code(errTooBig) {
		t.Errorf("attach(over the name limit) = %d, want GOINDEX_ETOOBIG", rc)
	}
	if got := probe(t, h, fixture.DocA); got != before {
		t.Errorf("probe after failed attaches = %q, want %q as before", got, before)
	}
}

// TestGlobal_RandomFramesMatchTheExactModel feeds random relay traffic of
// several DCs (stores and removals published as deltas, lost and duplicated
// deltas, re-snapshots, relay restarts, heartbeats, frames of a DC without
// a lane, corrupted frames) and after every step compares each probe with
// an exact model of what each lane holds: the members' chains as of the
// last frame the lane installed. A lane leaves READY exactly when a delta
// after a gap, or a frame of a restarted relay, arrives, and returns with
// its DC's next snapshot. The filter may overcount through fingerprint
// collisions, never undercount; overcounts are counted and must stay rare.
func TestGlobal_RandomFramesMatchTheExactModel(t *testing.T) {
	s := testseed.For(t, 11)
	rng := rand.New(rand.NewPCG(s, 5))
	steps := 1500
	if testing.Short() {
		steps = 300
	}
	const buckets, members = 256, 3
	format, err := ckf.NewFormat(ckf.DefaultSeed, buckets)
	if err != nil {
		t.Fatal(err)
	}
	ids := []uint64{5, 2, 7, 4}
	h := openT(t, fmt.Sprintf(`{"mode": "global", "dcs": [5, 2, 7, 4], "domain": 3, "buckets": %d}`, buckets))
	type chains = [members][]uint64 // each member's local hashes from the root
	type dcState struct {
		d           *fixture.DC
		incarnation uint64
		members     chains // the producer's state
		// What the lane holds: ready, the incarnation it was installed
		// from, whether a delta went missing since, and its content.
		ready, gap bool
		laneInc    uint64
		lane       chains
	}
	dcs := make([]*dcState, len(ids)+1) // the last one has no lane
	restart := func(i int) {
		id, inc := uint64(99), uint64(1)
		if i < len(ids) {
			id = ids[i]
		}
		st := dcs[i]
		if st == nil {
			st = &dcState{}
			dcs[i] = st
		} else {
			inc = st.incarnation + 1
		}
		d, err := fixture.NewDC(3, id, inc, format, 50+rng.IntN(200))
		if err != nil {
			t.Fatal(err)
		}
		st.d, st.incarnation, st.members = d, inc, chains{}
	}
	for i := range dcs {
		restart(i)
	}
	queries := [][]uint64{fixture.DocA, fixture.DocB, fixture.DocC}
	fed := map[string]int{}
	feed := func(what string, frame []byte, want status) {
		t.Helper()
		fed[what]++
		if rc := applyFrame(h, frame); rc != want {
			t.Fatalf("%s: goindex_apply_frame = %d, want %d: %s (GOINDEX_SEED=%d)", what, rc, want, lastError(h), s)
		}
	}
	// foreign expects the frame of a restarted relay (or after a gap) to
	// fault a ready lane, and any frame to be ignored by a lane that is not.
	foreign := func(st *dcState, laned bool) bool { return laned && st.ready && st.laneInc != st.incarnation }
	probes, over := 0, 0
	for step := range steps {
		i := rng.IntN(len(dcs))
		st := dcs[i]
		laned := i < len(ids)
		switch op := rng.IntN(10); {
		case op < 4: // members change; the delta is delivered, lost or delivered twice
			m := rng.IntN(members)
			q := queries[rng.IntN(len(queries))]
			mem := kv.Member{Worker: uint64(m)}
			if have := len(st.members[m]); have > 0 && rng.IntN(2) == 0 {
				keep := rng.IntN(have)
				if err := st.d.Truncate(mem, keep); err != nil {
					t.Fatal(err)
				}
				st.members[m] = st.members[m][:keep]
			} else if have == 0 {
				n := 1 + rng.IntN(len(q))
				if err := st.d.Extend(mem, q[:n]); err != nil {
					t.Fatal(err)
				}
				st.members[m] = q[:n]
			}
			if err := st.d.Publish(); err != nil {
				t.Fatal(err)
			}
			for _, fr := range st.d.TakeLog() {
				switch r := rng.IntN(10); {
				case r == 0:
					st.gap = true // lost on the way
				case foreign(st, laned):
					feed("delta of a restarted relay", fr, code(follow.ErrFrameRejected))
					st.ready = false
				case !laned || !st.ready:
					feed("delta for a lane that is not ready", fr, 0)
				case st.gap:
					feed("delta after a gap", fr, code(follow.ErrFrameRejected))
					st.ready = false
				default:
					feed("delta", fr, 0)
					st.lane = st.members
					if r == 1 {
						feed("duplicate delta", fr, 0)
					}
				}
			}
		case op < 6: // the host (re)subscribes from the DC's stored snapshot
			snap, err := st.d.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			st.d.TakeLog()
			for _, fr := range snap {
				feed("snapshot chunk", fr, 0)
			}
			if laned {
				st.ready, st.gap, st.laneInc, st.lane = true, false, st.incarnation, st.members
			}
		case op == 6: // the relay restarts empty; the lane serves the old words until the new relay's first frame
			restart(i)
		case op == 7: // a heartbeat: only lag is measured, but a restarted relay's faults the lane
			if err := st.d.Heartbeat(); err != nil {
				t.Fatal(err)
			}
			for _, fr := range st.d.TakeLog() {
				if foreign(st, laned) {
					feed("heartbeat of a restarted relay", fr, code(follow.ErrFrameRejected))
					st.ready = false
				} else {
					feed("heartbeat", fr, 0)
				}
			}
		default: // a corrupted frame changes nothing
			frame, err := st.d.LoadReport(uint64(step)+1, 1, 2, 3)
			if err != nil {
				t.Fatal(err)
			}
			frame[len(frame)-1-rng.IntN(8)] ^= byte(1 + rng.IntN(255))
			feed("corrupted frame", frame, code(follow.ErrFrameRejected))
		}
		for _, q := range queries {
			got := probeDepths(t, h, q)
			for l, id := range ids {
				st := dcs[l]
				want := 0
				if st.ready {
					for _, c := range st.lane {
						want = max(want, commonPrefix(c, q))
					}
				}
				g, ok := got[id]
				switch {
				case ok && g.lane != l:
					t.Fatalf("step %d: probe(%d hashes) reports DC %d as lane %d, want %d", step, len(q), id, g.lane, l)
				case !st.ready && ok:
					t.Fatalf("step %d: probe(%d hashes) reports DC %d (lane %d, not ready) at depth %d (GOINDEX_SEED=%d)", step, len(q), id, l, g.depth, s)
				case st.ready && g.depth < want:
					t.Fatalf("step %d: probe(%d hashes) DC %d (lane %d) = %d, want %d: a tracked block missed (GOINDEX_SEED=%d)", step, len(q), id, l, g.depth, want, s)
				case st.ready && g.depth > want:
					over++
				}
				if st.ready {
					probes++
				}
				delete(got, id)
			}
			if len(got) > 0 {
				t.Fatalf("step %d: probe(%d hashes) reports DCs without a lane: %v", step, len(q), got)
			}
		}
	}
	// 16-bit fingerprints in 2 buckets × 4 slots: a false match per probed
	// position is about 8/65536; allow a hundred times that.
	if probes == 0 || float64(over) > 0.01*float64(probes) {
		t.Errorf("%d of %d lane probes overcounted (want under 1%%) (GOINDEX_SEED=%d)", over, probes, s)
	}
	for _, what := range []string{"delta", "duplicate delta", "delta after a gap", "delta of a restarted relay", "delta for a lane that is not ready",
		"snapshot chunk", "heartbeat", "heartbeat of a restarted relay", "corrupted frame"} {
		if fed[what] == 0 && !testing.Short() {
			t.Errorf("no %q in %d steps: the walk misses a case (GOINDEX_SEED=%d)", what, steps, s)
		}
	}
	t.Logf("%d lane probes, %d overcounted; frames fed: %v", probes, over, fed)
}

// laneDepth is one DC's entry of a probe.
type laneDepth struct{ lane, depth int }

// probeDepths probes q and returns each reported DC's lane and depth.
func probeDepths(t testing.TB, h cU64, q []uint64) map[uint64]laneDepth {
	t.Helper()
	out := make([]overlapC, 64)
	var n cSize
	if rc := goindex_probe(h, u64p(q), cSize(len(q)), &out[0], cSize(len(out)), &n); rc != 0 {
		t.Fatalf("goindex_probe(%d hashes) = %d: %s", len(q), rc, lastError(h))
	}
	got := map[uint64]laneDepth{}
	for _, o := range out[:n] {
		got[uint64(o.id)] = laneDepth{int(o.rank), int(o.blocks)}
	}
	return got
}

// commonPrefix is the number of leading local hashes a and b share: the
// depth to which a member holding chain a matches query b.
func commonPrefix(a, b []uint64) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// The global-mode workload of tests/c/bench.c (fixture.WriteBenchReplica),
// small: every answer goindex_probe and goindex_probe_batch give an
// attached handle is the one the fixture recorded for bench.c's check, in
// (DC, lane) order with DC = lane + 1.
func TestGlobal_BenchWorkloadAnswersAsRecorded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replica")
	cfg := fixture.BenchConfig{LaneBlocks: make([]int, fixture.BenchDCs), Docs: 128}
	for l := range cfg.LaneBlocks {
		cfg.LaneBlocks[l] = 16384 >> (l / 3)
	}
	queries, sum, err := fixture.WriteBenchReplica(path, cfg)
	if err != nil {
		t.Fatalf("WriteBenchReplica: %v", err)
	}
	if sum.Entries == 0 || sum.Entries == sum.Queries*sum.Lanes {
		t.Fatalf("WriteBenchReplica: %v; want queries that hit some lanes but not all", sum)
	}
	h := openT(t, `{"mode": "global"}`)
	if rc := attach(h, path); rc != 0 {
		t.Fatalf("goindex_attach_replica = %d: %s", rc, lastError(h))
	}
	check := func(call string, q int, got []overlapC) {
		t.Helper()
		blocks := 0
		for i, o := range got {
			blocks += int(o.blocks)
			if uint64(o.id) != fixture.BenchDCID(int(o.rank)) || i > 0 && o.id <= got[i-1].id {
				t.Errorf("%s(query %d)[%d] = DC %d lane %d, want DC = lane + 1 in ascending order", call, q, i, o.id, o.rank)
			}
		}
		if len(got) != queries[q].Entries || blocks != queries[q].Blocks {
			t.Errorf("%s(query %d) = %d lanes, %d blocks; want %d, %d", call, q, len(got), blocks, queries[q].Entries, queries[q].Blocks)
		}
	}
	out := make([]overlapC, fixture.BenchDCs*len(queries))
	var n cSize
	for q := range queries {
		if rc := goindex_probe(h, u64p(queries[q].Locals), cSize(len(queries[q].Locals)), &out[0], fixture.BenchDCs, &n); rc != 0 {
			t.Fatalf("goindex_probe(query %d) = %d: %s", q, rc, lastError(h))
		}
		check("goindex_probe", q, out[:n])
	}
	flat := make([]uint64, 0, len(queries)*len(queries[0].Locals))
	lens, counts := make([]inSize, len(queries)), make([]cSize, len(queries))
	for q := range queries {
		flat = append(flat, queries[q].Locals...)
		lens[q] = inSize(len(queries[q].Locals))
	}
	if rc := goindex_probe_batch(h, u64p(flat), &lens[0], cSize(len(queries)), &out[0], cSize(len(out)), &counts[0], &n); rc != 0 {
		t.Fatalf("goindex_probe_batch(%d queries) = %d: %s", len(queries), rc, lastError(h))
	}
	off := 0
	for q, c := range counts {
		check("goindex_probe_batch", q, out[off:off+int(c)])
		off += int(c)
	}
}
