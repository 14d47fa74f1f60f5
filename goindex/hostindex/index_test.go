package hostindex

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/follow"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/score"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/goindex/goindex/tests/c/fixture"
)

func open(t *testing.T, src string) *Index {
	t.Helper()
	cfg, err := ParseConfig([]byte(src))
	if err != nil {
		t.Fatalf("ParseConfig(%s): %v", src, err)
	}
	ix, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", src, err)
	}
	t.Cleanup(ix.Close)
	return ix
}

// feedDC makes DC id (relay incarnation inc) holding the blocks of locals
// and feeds its snapshot into ix, a global index fed frames.
func feedDC(t *testing.T, ix *Index, format *ckf.Format, id, inc uint64, locals []uint64) *fixture.DC {
	t.Helper()
	d, err := fixture.NewDC(0, id, inc, format, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(locals) > 0 {
		if err := d.Extend(kv.Member{}, locals); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := d.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, fr := range snap {
		if err := ix.ApplyFrame(fr); err != nil {
			t.Fatalf("snapshot of DC %d: %v", id, err)
		}
	}
	return d
}

// Event calls after Close are ErrClosed (the ABI's GOINDEX_EHANDLE), and
// Close twice is harmless.
func TestIndex_CallsAfterCloseAreErrClosed(t *testing.T) {
	for _, src := range []string{`{}`, `{"mode":"ckf","lanes":2,"expected_blocks_per_lane":64}`, `{"mode":"global","dcs":[1],"buckets":64}`} {
		ix := open(t, src)
		ix.Close()
		ix.Close()
		ev := &kv.Event{Kind: kv.Stored, Blocks: []kv.Block{{External: 1, Local: 1}}}
		for name, err := range map[string]error{
			"Apply": ix.Apply(ev), "RemoveWorker": ix.RemoveWorker(1), "RemoveMember": ix.RemoveMember(kv.Member{}),
			"ApplyFrame": ix.ApplyFrame([]byte{1}), "SetRTT": ix.SetRTT(1, time.Millisecond), "AttachReplica": ix.AttachReplica("/x"),
		} {
			if ix.NeedMode(name == "ApplyFrame" || name == "SetRTT" || name == "AttachReplica") != nil {
				continue // the mode's refusal comes first
			}
			if !errors.Is(err, ErrClosed) {
				t.Errorf("%s: %s after Close = %v, want ErrClosed", src, name, err)
			}
		}
	}
}

// A fed lane's load report and RTT age out after max_staleness_ms: score
// then finds the lane ineligible, never reads the signals as zero. Explicit
// candidates name lanes as (DC id, lane) and get their depths.
func TestGlobal_ScoreUsesFreshSignalsOnlyAndNamesLanes(t *testing.T) {
	format, err := ckf.NewFormat(ckf.DefaultSeed, 64)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(`{"mode": "global", "dcs": [8, 9], "buckets": 64, "max_staleness_ms": 20}`))
	if err != nil {
		t.Fatal(err)
	}
	// The index's clock is the test's: signals age only when it says so.
	clock := time.Now()
	cfg.Clock = func() time.Time { return clock }
	ix, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var dcs []*fixture.DC
	for _, id := range []uint64{8, 9} {
		dcs = append(dcs, feedDC(t, ix, format, id, 1, fixture.DocA[:8*id-56])) // DC 8: 8 blocks, DC 9: 16
	}
	fresh := func() {
		for _, d := range dcs {
			lr, err := d.LoadReport(uint64(time.Now().UnixNano()), 0, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := ix.ApplyFrame(lr); err != nil {
				t.Fatalf("load report: %v", err)
			}
			if err := ix.SetRTT(d.ID(), time.Millisecond); err != nil {
				t.Fatalf("SetRTT: %v", err)
			}
		}
	}
	lanes := func() (Scored, error) {
		return ix.Score(&ScoreQuery{Policy: score.TTFT, Locals: fixture.DocA, Members: true, Seed: 1})
	}
	fresh()
	if c := ix.Counters(); c.Blocks != 8+16 || c.LanesReady != 2 || c.FramesApplied != 4 {
		t.Errorf("Counters after snapshots and load reports: blocks %d, lanes ready %d, frames applied %d; want 24 (the DCs' reported active blocks), 2, 4",
			c.Blocks, c.LanesReady, c.FramesApplied)
	}
	if res, err := lanes(); err != nil || res.Index != 1 || res.ID != 9 || res.CachedBlocks != 16 {
		t.Errorf("Score with fresh signals = lane %d DC %d cached %d, %v; want lane 1, DC 9, 16 blocks", res.Index, res.ID, res.CachedBlocks, err)
	}
	clock = clock.Add(20 * time.Millisecond) // exactly max_staleness_ms: still fresh
	if _, err := lanes(); err != nil {
		t.Errorf("Score with signals max_staleness_ms old = %v, want a choice", err)
	}
	clock = clock.Add(time.Millisecond) // past it
	if _, err := lanes(); !errors.Is(err, score.ErrNoCandidate) {
		t.Errorf("Score with stale signals = %v, want score.ErrNoCandidate", err)
	}
	fresh()
	if _, err := lanes(); err != nil {
		t.Errorf("Score after refreshing = %v", err)
	}

	cands := []score.Candidate{
		{ID: 8, Rank: 0, HasLoad: true, HasRTT: true, RTTms: 1},
		{ID: 9, Rank: 1, HasLoad: true, HasRTT: true, RTTms: 1},
		{ID: 9, Rank: 0, HasLoad: true, HasRTT: true}, // DC 9 is not lane 0: no cached blocks
	}
	res, err := ix.Score(&ScoreQuery{Policy: score.TTFT, Locals: fixture.DocA, Cands: cands, Seed: 1})
	if err != nil || res.Index != 1 || res.CachedBlocks != 16 {
		t.Errorf("Score over explicit candidates chose %d with %d blocks, %v; want candidate 1 with 16", res.Index, res.CachedBlocks, err)
	}
}

// A fed lane's stored-blocks counter prices ttft's eviction charge: of two
// DCs alike but for RTT, the nearer one wins until its counter shows its
// cache turning over in well under the reuse window, then the other one;
// a relay restart (a new incarnation) makes the rate unknown again.
func TestGlobal_ScorePricesTheEvictionChargeFromStoredBlocks(t *testing.T) {
	format, err := ckf.NewFormat(ckf.DefaultSeed, 64)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(`{"mode": "global", "dcs": [8, 9], "buckets": 64}`))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	const capacity = 1000
	dcs := map[uint64]*fixture.DC{}
	install := func(id, incarnation uint64) { dcs[id] = feedDC(t, ix, format, id, incarnation, nil) }
	report := func(id uint64, at time.Time, stored uint64) {
		fr, err := dcs[id].CountedLoadReport(uint64(at.UnixNano()), 0, 0, capacity, stored)
		if err != nil {
			t.Fatal(err)
		}
		if err := ix.ApplyFrame(fr); err != nil {
			t.Fatalf("load report of DC %d: %v", id, err)
		}
	}
	choose := func() uint64 {
		t.Helper()
		res, err := ix.Score(&ScoreQuery{Policy: score.TTFT, Locals: fixture.DocA, Members: true, Seed: 1})
		if err != nil {
			t.Fatalf("Score: %v", err)
		}
		return res.ID
	}
	start := time.Now()
	for id, rtt := range map[uint64]time.Duration{8: time.Millisecond, 9: 2 * time.Millisecond} {
		install(id, 1)
		if err := ix.SetRTT(id, rtt); err != nil {
			t.Fatal(err)
		}
		report(id, start, 1)
	}
	if got := choose(); got != 8 {
		t.Fatalf("one counted report each: chose DC %d, want the nearer DC 8 (no rate yet)", got)
	}
	// DC 8 stores 100 capacities in a second, DC 9 nothing.
	report(8, start.Add(time.Second), 1+100*capacity)
	report(9, start.Add(time.Second), 1)
	if got := choose(); got != 9 {
		t.Errorf("DC 8 turning over every 10 ms: chose DC %d, want DC 9 (the eviction charge)", got)
	}
	// DC 8's relay restarts: its rate is unknown again.
	install(8, 2)
	report(8, start.Add(2*time.Second), 5)
	report(9, start.Add(2*time.Second), 1)
	if got := choose(); got != 8 {
		t.Errorf("DC 8's relay restarted: chose DC %d, want DC 8 (rate unknown, no charge)", got)
	}
}

// A global index's score fails open (ScoreQuery.Open): with its replica's
// consumer stopped it chooses on the lanes' last known RTT and load
// (cached blocks ignored) and says consumer-stale; with the file truncated
// it takes the default_dc lane of the last file and says replica-damaged;
// without Open the same scores are score.ErrNoCandidate.
func TestGlobal_ScoreFailsOpenOnAStaleOrDamagedReplica(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replica")
	w, err := shm.Create(path, shm.Layout{Seed: ckf.DefaultSeed, Buckets: 64, Domain: 1, ConsumerInstance: 1, DCs: []uint64{8, 9}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	format, _ := ckf.NewFormat(ckf.DefaultSeed, 64)
	start := time.Now()
	for l, dc := range []uint64{8, 9} {
		d, err := fixture.NewDC(1, dc, 1, format, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Extend(kv.Member{}, fixture.DocA[:8*(l+1)]); err != nil {
			t.Fatal(err)
		}
		if err := w.Table().Install(l, d.Words()); err != nil {
			t.Fatal(err)
		}
		// DC 8 is 5 ms away, DC 9 (holding more of A) 300 ms.
		w.SetRTT(l, time.Duration(5+295*l)*time.Millisecond, start)
		w.SetLoad(l, &shm.Load{ReceivedAt: start})
	}
	w.Touch(start)
	cfg, err := ParseConfig([]byte(`{"mode": "global", "max_staleness_ms": 1000, "replica_check_ms": 0, "default_dc": 9}`))
	if err != nil {
		t.Fatal(err)
	}
	clock := start
	cfg.Clock = func() time.Time { return clock }
	ix, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.AttachReplica(path); err != nil {
		t.Fatal(err)
	}
	lanes := func(open bool) (Scored, error) {
		return ix.Score(&ScoreQuery{Policy: score.TTFT, Locals: fixture.DocA, Members: true, Seed: 1, Open: open})
	}
	if res, err := lanes(true); err != nil || res.Degraded != follow.NotDegraded || res.CachedBlocks == 0 {
		t.Errorf("fresh: Score = %+v, %v; want a choice on fresh signals, not degraded", res, err)
	}
	clock = start.Add(2 * time.Second) // the consumer stopped: heartbeat and signals 2 s old
	if _, err := lanes(false); !errors.Is(err, score.ErrNoCandidate) {
		t.Errorf("stale, not open: Score = %v, want score.ErrNoCandidate", err)
	}
	res, err := lanes(true)
	if err != nil || res.Degraded != follow.ConsumerStale || res.ID != 8 || res.Index != 0 || res.CachedBlocks != 0 || res.Eligible != 2 {
		t.Errorf("stale: Score = %+v, %v; want DC 8 (the nearer on the last known RTTs), no cached blocks, consumer-stale", res, err)
	}
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	ix.Match(nil, fixture.DocA) // a probe finds the file damaged
	res, err = lanes(true)
	if err != nil || res.Degraded != follow.ReplicaDamaged || res.ID != 9 || res.Index != 1 || res.Eligible != 0 {
		t.Errorf("truncated: Score = %+v, %v; want the default DC 9 (lane 1) of the last file, replica-damaged", res, err)
	}
	if c := ix.Counters(); c.DegradedScores != 2 || c.ReplicaState != uint32(follow.Damaged) {
		t.Errorf("Counters = %+v, want 2 degraded scores and the replica damaged", c)
	}
	bare := open(t, `{"mode": "global"}`)
	if _, err := bare.Score(&ScoreQuery{Policy: score.TTFT, Members: true, Open: true}); !errors.Is(err, score.ErrNoCandidate) {
		t.Errorf("a global index that knows no lane: Score = %v, want score.ErrNoCandidate", err)
	}
}
