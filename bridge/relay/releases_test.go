package relay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/nats-io/nats.go"
)

// releaseFixture reads one of dynamo's release fixtures (written by
// Debian's python3-msgpack, dynamo/testdata/releases/releases.py).
func releaseFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "dynamo", "testdata", name))
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return b
}

// poolStatus returns the relay's only pool's status.
func poolStatus(t testing.TB, r *Relay) PoolStatus {
	t.Helper()
	// The pool answers on its goroutine, which may be waiting out a
	// JetStream write (DefaultPublishTimeout, 5 s) around a NATS outage.
	ctx, cancel := context.WithTimeout(context.Background(), 3*DefaultPublishTimeout)
	defer cancel()
	st, err := r.Status(ctx)
	if err != nil || len(st) != 1 {
		t.Fatalf("Status = %v, %v", st, err)
	}
	return st[0]
}

// publishAndWait publishes b on subject and waits until the pool counted
// one more message (NATS orders messages per subscription only, so each
// fixture is taken before the next is sent).
func publishAndWait(t *testing.T, nc *nats.Conn, r *Relay, subject string, b []byte) {
	t.Helper()
	before := poolStatus(t, r).Intake.Messages
	if err := nc.Publish(subject, b); err != nil {
		t.Fatalf("publish %s: %v", subject, err)
	}
	relaytest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if got := poolStatus(t, r).Intake.Messages; got != before+1 {
			return fmt.Errorf("messages after publishing on %s = %d, want %d", subject, got, before+1)
		}
		return nil
	})
}

// TestRelay_TakesEveryReleaseShapeWithoutBeingTold publishes one message
// per Dynamo release shape on the subject that release uses, to a relay
// with default settings: each is detected and applied, and the tracked
// blocks are what the messages stored.
func TestRelay_TakesEveryReleaseShapeWithoutBeingTold(t *testing.T) {
	_, nc := natstest.Start(t)
	cfg := testConfig(nc)
	run := startRelay(t, cfg)
	component := dynamo.Scope{Namespace: "dynamo", Component: "backend"}
	endpoint := dynamo.Scope{Namespace: "dynamo", Component: "backend", Endpoint: "generate"}
	steps := []struct{ subject, file string }{
		{dynamo.LegacyEventSubject("dynamo", "backend"), "json_g2025_stored.json"},          // G2025: worker 7, 2 blocks
		{component.Subject(dynamo.EventTopic), "releases/v1.3-component-single.msgpack"},    // worker 3, 2 blocks
		{endpoint.Subject(dynamo.EventTopic), "releases/v1.4-endpoint-batch.msgpack"},       // worker 4 rank 1: 3 stored, 1 removed
		{endpoint.Subject(dynamo.EventTopic), "releases/v1.5-endpoint-residency.msgpack"},   // worker 5: 1 device, 1 host_pinned; clear 6
		{endpoint.Subject(dynamo.EventTopic), "releases/v1.7-endpoint-session.msgpack"},     // clear 7, then 2 blocks
		{endpoint.Subject(dynamo.EventTopic), "releases/v1.7-residency-mixed.msgpack"},      // 4 taken (+3 blocks), 2 lower-tier, 4 unsupported
		{endpoint.Subject(dynamo.MetricsTopic), "releases/v1.6-active-load.msgpack"},        // worker 4 rank 1: kv_used 321
		{component.Subject(dynamo.MetricsTopic) + "x", "releases/v1.6-active-load.msgpack"}, // not a subject of the pool
	}
	loads, err := nc.SubscribeSync(Names{Prefix: DefaultPrefix, Domain: 1, DC: 3}.LoadSubject())
	if err != nil {
		t.Fatalf("subscribe load: %v", err)
	}
	for _, s := range steps[:len(steps)-1] {
		publishAndWait(t, nc, run.r, s.subject, releaseFixture(t, s.file))
	}
	st := poolStatus(t, run.r)
	in := st.Intake
	if in.Events != 12 || in.NonPrimary != 3 || in.Unsupported != 4 || in.Malformed != 0 || in.Duplicates != 0 || in.Gaps != 0 ||
		in.LoadSamples != 1 || st.Rejected != 0 {
		t.Errorf("intake = %+v, rejected %d; want 12 events, 3 non-primary, 4 unsupported, 1 load sample, nothing malformed, duplicated, missing or rejected",
			in, st.Rejected)
	}
	// The mixed batch leaves worker 8 one block and worker 9 two (its cache
	// owner's clear does not touch them); worker 10's legacy clear, on the
	// disk tier, clears its device block.
	if got := st.Producer.TrackedBlocks; got != 10 {
		t.Errorf("tracked blocks = %d, want 10 (3: 2, 4/1: 2, 5: 1, 7: 2 after its clear, 8: 1, 9: 2, 10: 0 after its clear)", got)
	}
	relaytest.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if pl, _ := run.r.Load(1); pl.Report.StoredBlocks != 14 {
			return fmt.Errorf("load report stored blocks = %d, want 14 (every primary store: 2+2+3+1+2, then 1+2+1)", pl.Report.StoredBlocks)
		}
		return nil
	})
	relaytest.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		m, err := loads.NextMsg(time.Second)
		if err != nil {
			return err
		}
		var r relayproto.LoadReport
		if _, err := wire.DecodeLoadReport(&r, m.Data); err != nil {
			return err
		}
		if r.ActiveDecodeBlocks != 321 {
			return fmt.Errorf("load report active decode blocks = %d, want 321 (worker 4's kv_used_blocks)", r.ActiveDecodeBlocks)
		}
		return nil
	})
}

// TestRelay_EventScopeSelectsTheSubjects runs a relay on endpoint scope
// only: a v1.3 message on the component subject is not heard, a v1.4 one
// on the endpoint subject is.
func TestRelay_EventScopeSelectsTheSubjects(t *testing.T) {
	_, nc := natstest.Start(t)
	cfg := testConfig(nc)
	cfg.Pools[0].Scopes = ScopeEndpoint
	cfg.Pools[0].Endpoint = "gen.v2" // escaped in the subject
	run := startRelay(t, cfg)
	if err := nc.Publish(dynamo.EventSubject("dynamo", "backend"), releaseFixture(t, "releases/v1.3-component-single.msgpack")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	endpoint := dynamo.Scope{Namespace: "dynamo", Component: "backend", Endpoint: "gen.v2"}
	publishAndWait(t, nc, run.r, endpoint.Subject(dynamo.EventTopic), releaseFixture(t, "releases/v1.4-endpoint-batch.msgpack"))
	st := poolStatus(t, run.r)
	if st.Intake.Messages != 1 || st.Intake.Events != 2 || st.Producer.TrackedBlocks != 2 {
		t.Errorf("endpoint-only relay: intake %+v, tracked %d; want only the v1.4 message (2 events, 2 blocks)", st.Intake, st.Producer.TrackedBlocks)
	}
}

func TestLoad_ActiveLoadMergesFieldsAndKeepsNamespaceScopeToKnownWorkers(t *testing.T) {
	lt := newLoadTracker(10*time.Second, false)
	now := time.Unix(1000, 0)
	// Namespace scope (older releases) carries other components' workers:
	// worker 9 was never seen here and is ignored.
	lt.active(dynamo.ActiveLoad{WorkerID: 9, HasKVUsedBlocks: true, KVUsedBlocks: 1000}, 0, now, true, nil)
	lt.sawEvent(&kv.Event{Member: kv.Member{Worker: 1}, Kind: kv.Removed}, now, nil)
	lt.active(dynamo.ActiveLoad{WorkerID: 1, DpRank: 0, HasKVUsedBlocks: true, KVUsedBlocks: 40}, 0, now, true, nil)
	// A router's sample of the same rank adds decode and prefill load; a
	// later worker sample without them keeps them.
	lt.active(dynamo.ActiveLoad{WorkerID: 1, DpRank: 0, HasActiveDecodeBlocks: true, ActiveDecodeBlocks: 30,
		HasActivePrefillToks: true, ActivePrefillTokens: 500}, 0, now, false, nil)
	lt.active(dynamo.ActiveLoad{WorkerID: 1, DpRank: 0, HasKVUsedBlocks: true, KVUsedBlocks: 45}, 0, now, false, nil)
	// Rank 1 has only its occupancy.
	lt.active(dynamo.ActiveLoad{WorkerID: 1, DpRank: 1, HasKVUsedBlocks: true, KVUsedBlocks: 7}, 0, now, false, nil)
	// Endpoint scope admits a new worker.
	lt.active(dynamo.ActiveLoad{WorkerID: 2, HasKVUsedBlocks: true, KVUsedBlocks: 3}, 0, now, false, nil)
	var r relayproto.LoadReport
	lt.fill(&r, now, 100)
	if r.LiveWorkers != 2 || r.ActiveDecodeBlocks != 30+7+3 || r.QueuedPrefillTokens != 500 || r.CapacityBlocks != 200 {
		t.Errorf("fill = live %d, active %d, queued %d, capacity %d; want 2, 40, 500, 200", r.LiveWorkers, r.ActiveDecodeBlocks, r.QueuedPrefillTokens, r.CapacityBlocks)
	}
	for rank := range uint32(maxRanksPerWorker + 10) {
		lt.active(dynamo.ActiveLoad{WorkerID: 3, DpRank: rank, HasKVUsedBlocks: true, KVUsedBlocks: 1}, 0, now, false, nil)
	}
	if n := len(lt.workers[3].ranks); n != maxRanksPerWorker || lt.refused != 10 {
		t.Errorf("forged ranks: %d kept, %d refused; want %d and 10", n, lt.refused, maxRanksPerWorker)
	}
}
