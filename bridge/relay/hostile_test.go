package relay

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
)

// storedEnvelope is a valid one-block stored event of worker w, wrapped in
// an envelope of publisher pub at sequence seq.
func storedEnvelope(t testing.TB, w, pub, seq uint64, topic string) []byte {
	t.Helper()
	ev := dynamo.RouterEvent{WorkerID: w, Event: dynamo.CacheEvent{EventID: seq, Kind: kv.Stored,
		Stored: dynamo.StoreData{Blocks: []dynamo.StoredBlock{{BlockHash: pub<<16 | seq, TokensHash: pub ^ seq}}}}}
	payload, err := dynamo.AppendMsgpack(nil, &ev)
	if err != nil {
		t.Fatalf("AppendMsgpack: %v", err)
	}
	return dynamo.AppendEnvelope(nil, &dynamo.Envelope{Topic: topic, PublisherID: pub, Sequence: seq,
		PublishedAtMs: 1, Payload: payload})
}

// heapAfterGC returns the live heap after a full collection.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func TestHostile_PublisherFloodIsBoundedAndCounted(t *testing.T) {
	var st IntakeStats
	in := newIntake(&st, 10*time.Second)
	now := time.Unix(1000, 0)
	// A real publisher first: it must keep its place through the flood.
	if _, ok := in.envelope(storedEnvelope(t, 1, 7, 1, dynamo.EventTopic), now, nil); !ok {
		t.Fatal("first envelope of the real publisher refused")
	}
	before := heapAfterGC()
	const flood = 12 * maxPublishers
	for i := range uint64(flood) {
		in.envelope(storedEnvelope(t, 2, 1_000_000+i, 0, dynamo.EventTopic), now, nil)
	}
	grown := int64(heapAfterGC()) - int64(before)
	if len(in.pubs) > maxPublishers {
		t.Errorf("publisher table after %d fake publishers = %d entries, want ≤ %d", flood, len(in.pubs), maxPublishers)
	}
	if want := uint64(flood - (maxPublishers - 1)); st.Untracked != want {
		t.Errorf("Untracked = %d, want %d (every fake publisher past the table)", st.Untracked, want)
	}
	// 4096 entries of ~600 bytes (a 512-byte sequence window each), about
	// 2.5 MiB; a table growing with the flood would hold ~50k entries,
	// ~29 MiB.
	if grown > 4<<20 {
		t.Errorf("live heap grew %d bytes over a %d-publisher flood, want ≤ 4 MiB", grown, flood)
	}
	if _, ok := in.envelope(storedEnvelope(t, 1, 7, 2, dynamo.EventTopic), now, nil); !ok {
		t.Error("the real publisher's next envelope was refused after the flood")
	}
	if _, ok := in.envelope(storedEnvelope(t, 1, 7, 2, dynamo.EventTopic), now, nil); ok {
		t.Error("a replayed envelope of the real publisher was accepted after the flood")
	}
	// Once the fake publishers fall silent past the window, new real ones
	// get in again.
	later := now.Add(11 * time.Second)
	if _, ok := in.envelope(storedEnvelope(t, 3, 99, 0, dynamo.EventTopic), later, nil); !ok {
		t.Error("a new publisher after the flood went silent was refused")
	}
}

func TestHostile_WorkerFloodIsBoundedAndLoadSumsSaturate(t *testing.T) {
	lt := newLoadTracker(10*time.Second, false)
	now := time.Unix(1000, 0)
	before := heapAfterGC()
	const flood = 12 * maxWorkers
	for i := range uint64(flood) {
		lt.sample(WorkerLoad{WorkerID: i + 1, QueuedPrefillTokens: math.MaxUint64 / 3, ActiveDecodeBlocks: math.MaxUint64,
			CapacityBlocks: math.MaxUint64}, now)
	}
	grown := int64(heapAfterGC()) - int64(before)
	if len(lt.workers) != maxWorkers || lt.refused != flood-maxWorkers {
		t.Errorf("after %d fake workers: %d tracked, %d refused; want %d and %d", flood, len(lt.workers), lt.refused, maxWorkers, flood-maxWorkers)
	}
	if grown > 4<<20 {
		t.Errorf("live heap grew %d bytes over a %d-worker flood, want ≤ 4 MiB", grown, flood)
	}
	var r relayproto.LoadReport
	lt.fill(&r, now, 0)
	if r.QueuedPrefillTokens != math.MaxUint64 || r.ActiveDecodeBlocks != math.MaxUint64 || r.CapacityBlocks != math.MaxUint64 {
		t.Errorf("fill over huge forged samples = queued %d, active %d, capacity %d; want each saturated at 2^64-1, not wrapped",
			r.QueuedPrefillTokens, r.ActiveDecodeBlocks, r.CapacityBlocks)
	}
}

func TestHostile_BadEnvelopesAreCountedAndYieldNoEvent(t *testing.T) {
	var st IntakeStats
	in := newIntake(&st, 10*time.Second)
	now := time.Unix(1000, 0)
	good := storedEnvelope(t, 1, 5, 0, dynamo.EventTopic)
	huge := make([]byte, dynamo.MaxMessageBytes+1)
	copy(huge, good)
	for _, c := range []struct {
		what string
		msg  []byte
	}{
		{"another topic", storedEnvelope(t, 1, 6, 0, "kv-metrics")},
		{"garbage", []byte{0xc1, 0xff, 0x00, 0x13}},
		{"truncated", good[:len(good)/2]},
		{"empty", nil},
		{"over MaxMessageBytes", huge},
	} {
		if evs, ok := in.envelope(c.msg, now, nil); ok || len(evs) != 0 {
			t.Errorf("envelope(%s) accepted: %+v", c.what, evs)
		}
	}
	if st.WrongTopic != 1 || st.TooLarge != 1 || st.Malformed != 3 || st.Events != 0 || len(in.pubs) != 0 {
		t.Errorf("stats after bad envelopes = %+v with %d publishers, want 1 wrong topic, 1 too large, 3 malformed, no event, no publisher", st, len(in.pubs))
	}
}

// TestHostile_RelayTakesOnlyItsOwnPoolsEvents publishes valid events on
// the subjects of another component, another namespace (both envelope and
// legacy forms) and the pool's own subject: the relay sees only its own.
func TestHostile_RelayTakesOnlyItsOwnPoolsEvents(t *testing.T) {
	_, nc := natstest.Start(t)
	cfg := testConfig(nc)
	run := startRelay(t, cfg)
	pool := cfg.Pools[0]
	legacy := func(w uint64) []byte {
		ev := dynamo.RouterEvent{WorkerID: w, Event: dynamo.CacheEvent{Kind: kv.Stored,
			Stored: dynamo.StoreData{Blocks: []dynamo.StoredBlock{{BlockHash: 77, TokensHash: 78}}}}}
		b, err := dynamo.AppendJSON(nil, &ev)
		if err != nil {
			t.Fatalf("AppendJSON: %v", err)
		}
		return b
	}
	for i, subject := range []string{
		dynamo.EventSubject(pool.Namespace, "other"), dynamo.EventSubject("tenant-b", pool.Component),
		dynamo.LegacyEventSubject(pool.Namespace, "other"), dynamo.LegacyEventSubject("tenant-b", pool.Component),
		"namespace." + pool.Namespace + ".component." + pool.Component + ".kv-events.extra",
	} {
		msg := storedEnvelope(t, 1, uint64(100+i), 0, dynamo.EventTopic)
		if i >= 2 && i < 4 {
			msg = legacy(1)
		}
		if err := nc.Publish(subject, msg); err != nil {
			t.Fatalf("publish %s: %v", subject, err)
		}
	}
	if err := nc.Publish(dynamo.EventSubject(pool.Namespace, pool.Component), storedEnvelope(t, 1, 1, 0, dynamo.EventTopic)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var st []PoolStatus
	relaytest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var err error
		if st, err = run.r.Status(ctx); err != nil {
			return err
		}
		if st[0].Intake.Events < 1 {
			return fmt.Errorf("own event not yet applied: %+v", st[0].Intake)
		}
		return nil
	})
	if in := st[0].Intake; in.Messages != 1 || in.Events != 1 {
		t.Errorf("relay intake = %+v, want exactly the one message of its own pool", in)
	}
}

// TestHostile_WorkerFloodThroughAPresentSourceIsBounded floods the load
// tracker with made-up worker ids from one source whose departure is
// reported and which stays present (a publisher forging ids): it holds at
// most maxHeldPerSource of them, the table stays at maxWorkers, the heap
// within a few MiB, and once the window passes the unheld rest is
// forgotten and a real worker gets in. A worker claimed by more sources
// than maxSourcesPerWorker keeps that many, and every release leaves no
// entry behind.
func TestHostile_WorkerFloodThroughAPresentSourceIsBounded(t *testing.T) {
	lt := newLoadTracker(10*time.Second, false)
	now := time.Unix(1000, 0)
	forger := &Source{ReportsGone: true, Name: "forger"}
	before := heapAfterGC()
	const flood = 12 * maxWorkers
	for i := range uint64(flood) {
		lt.active(dynamo.ActiveLoad{WorkerID: 1_000_000 + i, HasKVUsedBlocks: true, KVUsedBlocks: 1}, 0, now, false, forger)
	}
	grown := int64(heapAfterGC()) - int64(before)
	if len(lt.workers) != maxWorkers || lt.refused != flood-maxWorkers || lt.holds[forger] != maxHeldPerSource {
		t.Errorf("after %d forged workers from one present source: %d tracked, %d refused, %d held; want %d, %d, %d",
			flood, len(lt.workers), lt.refused, lt.holds[forger], maxWorkers, flood-maxWorkers, maxHeldPerSource)
	}
	if grown > 4<<20 {
		t.Errorf("live heap grew %d bytes over a %d-worker flood, want ≤ 4 MiB", grown, flood)
	}
	later := now.Add(11 * time.Second)
	real := &Source{ReportsGone: true, Name: "real"}
	lt.sawEvent(&kv.Event{Member: kv.Member{Worker: 1}, Kind: kv.Removed}, later, real)
	if w := lt.workers[1]; w == nil || !w.held() {
		t.Fatalf("a real worker after the flood went silent was not tracked and held")
	}
	var r relayproto.LoadReport
	lt.fill(&r, later.Add(time.Hour), 0)
	if r.LiveWorkers != maxHeldPerSource+1 {
		t.Errorf("fill an hour after the flood = %d live workers, want the forger's %d held ones and the real one", r.LiveWorkers, maxHeldPerSource+1)
	}
	// Many present sources claiming one worker.
	var claimants []*Source
	for range 4 * maxSourcesPerWorker {
		src := &Source{ReportsGone: true, Name: "claimant"}
		claimants = append(claimants, src)
		lt.sawEvent(&kv.Event{Member: kv.Member{Worker: 1}, Kind: kv.Removed}, later, src)
	}
	if n := len(lt.workers[1].by); n != maxSourcesPerWorker {
		t.Errorf("worker claimed by %d sources holds %d, want %d", len(claimants), n, maxSourcesPerWorker)
	}
	for _, src := range append(claimants, real, forger) {
		lt.release(src)
	}
	if len(lt.holds) != 0 {
		t.Errorf("after every source's release, %d sources still counted as holding", len(lt.holds))
	}
	r = relayproto.LoadReport{}
	if lt.fill(&r, later.Add(2*time.Hour), 0); r.LiveWorkers != 0 || len(lt.workers) != 0 {
		t.Errorf("after every release and the window: %d live, %d tracked; want 0 and 0", r.LiveWorkers, len(lt.workers))
	}
}
