package relay

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
)

// routerSample is a router's ActiveLoad view of worker w's rank 0, as
// routers send it: decode blocks and queued prefill tokens, no
// kv_used_blocks.
func routerSample(w, decode, prefill uint64) dynamo.ActiveLoad {
	return dynamo.ActiveLoad{WorkerID: w, HasActiveDecodeBlocks: true, ActiveDecodeBlocks: decode,
		HasActivePrefillToks: true, ActivePrefillTokens: prefill}
}

// loadAt is the tracker's report at now.
func loadAt(lt *loadTracker, now time.Time) relayproto.LoadReport {
	var r relayproto.LoadReport
	lt.fill(&r, now, 100)
	return r
}

// TestLoad_RouterViewsAreMergedNotOverwritten: with two frontends, each
// router's ActiveLoad view of a worker holds only its own requests
// (Dynamo's default, no replica sync), so the DC's queue is their sum;
// with replica sync every view is the whole and the merge is their
// maximum. Either way a router's new view replaces its own old one, and
// the order in which views arrive changes nothing (it used to: the last
// sample overwrote the others').
func TestLoad_RouterViewsAreMergedNotOverwritten(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		sync              bool
		decode, prefill   uint64
		decode2, prefill2 uint64 // after router A's second view
		name              string
	}{
		{false, 30, 400, 25, 350, "summed without replica sync"},
		{true, 20, 300, 20, 300, "maximum with replica sync"},
	} {
		for _, order := range [][]uint64{{0xA, 0xB}, {0xB, 0xA}} {
			lt := newLoadTracker(time.Second, c.sync)
			views := map[uint64]dynamo.ActiveLoad{0xA: routerSample(1, 10, 100), 0xB: routerSample(1, 20, 300)}
			for _, pub := range order {
				lt.active(views[pub], pub, now, false, nil)
			}
			if r := loadAt(lt, now); r.ActiveDecodeBlocks != c.decode || r.QueuedPrefillTokens != c.prefill {
				t.Errorf("%s, order %x: decode %d, prefill %d; want %d and %d", c.name, order, r.ActiveDecodeBlocks, r.QueuedPrefillTokens, c.decode, c.prefill)
			}
			lt.active(routerSample(1, 5, 50), 0xA, now, false, nil)
			if r := loadAt(lt, now); r.ActiveDecodeBlocks != c.decode2 || r.QueuedPrefillTokens != c.prefill2 {
				t.Errorf("%s, order %x, A's view renewed: decode %d, prefill %d; want %d and %d", c.name, order, r.ActiveDecodeBlocks, r.QueuedPrefillTokens, c.decode2, c.prefill2)
			}
		}
	}
}

// TestLoad_WorkersOwnDecodeWinsAndDepartedRoutersLeave: a worker's own
// active_decode_blocks (sent with kv_used_blocks) is its decode load
// whatever the routers' views say, which still give the queue; a router
// whose publisher is gone (KindGone) or whose view is older than
// routerViewLife windows counts no more, and the worker's KV occupancy
// stands in for decode blocks then.
func TestLoad_WorkersOwnDecodeWinsAndDepartedRoutersLeave(t *testing.T) {
	now := time.Unix(1000, 0)
	lt := newLoadTracker(time.Second, false)
	lt.active(dynamo.ActiveLoad{WorkerID: 1, HasKVUsedBlocks: true, KVUsedBlocks: 50}, 0x1, now, false, nil)
	lt.active(routerSample(1, 10, 100), 0xA, now, false, nil)
	lt.active(routerSample(1, 20, 300), 0xB, now, false, nil)
	if r := loadAt(lt, now); r.ActiveDecodeBlocks != 30 || r.QueuedPrefillTokens != 400 {
		t.Errorf("routers' views with the worker's occupancy: decode %d, prefill %d; want 30 and 400", r.ActiveDecodeBlocks, r.QueuedPrefillTokens)
	}
	lt.active(dynamo.ActiveLoad{WorkerID: 1, HasKVUsedBlocks: true, KVUsedBlocks: 50, HasActiveDecodeBlocks: true, ActiveDecodeBlocks: 7}, 0x1, now, false, nil)
	if r := loadAt(lt, now); r.ActiveDecodeBlocks != 7 || r.QueuedPrefillTokens != 400 {
		t.Errorf("the worker's own decode blocks: decode %d, prefill %d; want 7 and 400", r.ActiveDecodeBlocks, r.QueuedPrefillTokens)
	}
	lt.forgetViews(0xB)
	if r := loadAt(lt, now); r.QueuedPrefillTokens != 100 {
		t.Errorf("router B gone: prefill %d, want A's 100", r.QueuedPrefillTokens)
	}
	// Router A's view ages past routerViewLife windows; the worker's own
	// samples keep it live meanwhile.
	later := now.Add(routerViewLife*time.Second + time.Millisecond)
	lt.active(dynamo.ActiveLoad{WorkerID: 1, HasKVUsedBlocks: true, KVUsedBlocks: 50, HasActiveDecodeBlocks: true, ActiveDecodeBlocks: 7}, 0x1, later, false, nil)
	if r := loadAt(lt, later); r.QueuedPrefillTokens != 0 || r.ActiveDecodeBlocks != 7 || r.LiveWorkers != 1 {
		t.Errorf("router A's view expired: live %d, decode %d, prefill %d; want 1, 7, 0", r.LiveWorkers, r.ActiveDecodeBlocks, r.QueuedPrefillTokens)
	}
}

// TestLoad_RouterViewsPerRankAreBounded: a flood of made-up router ids
// keeps at most maxRouterViews views of a rank, the newest.
func TestLoad_RouterViewsPerRankAreBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	lt := newLoadTracker(time.Minute, false)
	for i := range uint64(10 * maxRouterViews) {
		lt.active(routerSample(1, 1, 1), 0x100+i, now.Add(time.Duration(i)*time.Millisecond), false, nil)
	}
	rk := lt.workers[1].ranks[0]
	if len(rk.views) != maxRouterViews {
		t.Fatalf("%d views kept, want %d", len(rk.views), maxRouterViews)
	}
	for _, v := range rk.views {
		if v.pub < 0x100+9*maxRouterViews {
			t.Errorf("view of router %#x kept, want only the %d newest", v.pub, maxRouterViews)
		}
	}
	if r := loadAt(lt, now.Add(time.Second)); r.QueuedPrefillTokens != maxRouterViews {
		t.Errorf("prefill %d, want %d (one token a kept view)", r.QueuedPrefillTokens, maxRouterViews)
	}
}

// routerLoadEnvelope is a kv_metrics envelope of router publisher pub
// with its view of worker w: a named msgpack map without kv_used_blocks.
func routerLoadEnvelope(w, pub, decode, prefill uint64) []byte {
	u64 := func(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(append(b, 0xcf), v) }
	p := []byte{0x83, 0xa9}
	p = u64(append(p, "worker_id"...), w)
	p = u64(append(append(p, 0xb4), "active_decode_blocks"...), decode)
	p = u64(append(append(p, 0xb5), "active_prefill_tokens"...), prefill)
	return dynamo.AppendEnvelope(nil, &dynamo.Envelope{Topic: dynamo.MetricsTopic, PublisherID: pub, PublishedAtMs: 1, Payload: p})
}

// TestRelay_TwoFrontendsLoadIsSummed runs the relay on two frontends'
// kv_metrics publishers (ZMQ sources) reporting their views of one worker:
// the load report's queue is the sum of the views; when one frontend's
// publisher goes, its view leaves the report.
func TestRelay_TwoFrontendsLoadIsSummed(t *testing.T) {
	f := newMsgFeed()
	cfg := liveConfig(t, f)
	run := startRelay(t, cfg)
	a := &Source{Scope: testScope, PublisherID: 0xA, ReportsGone: true, Name: "frontend a kv_metrics"}
	b := &Source{Scope: testScope, PublisherID: 0xB, ReportsGone: true, Name: "frontend b kv_metrics"}
	worker := &Source{Scope: testScope, PublisherID: 0x11, ReportsGone: true, Name: "worker 1 kv-events"}
	f.msgs <- planeMsg(t, worker, dynamo.EventTopic, storeEnvelope(t, 1, 0x11, 1, kv.Stored, 0x101))
	f.msgs <- planeMsg(t, a, dynamo.MetricsTopic, routerLoadEnvelope(1, 0xA, 4, 1000))
	f.msgs <- planeMsg(t, b, dynamo.MetricsTopic, routerLoadEnvelope(1, 0xB, 6, 3000))
	settle(t, run.r, f)
	pl := reportQuietFor(t, run.r, cfg, 1)
	if pl.Report.QueuedPrefillTokens != 4000 || pl.Report.ActiveDecodeBlocks != 10 {
		t.Errorf("two frontends' views: prefill %d, decode %d; want 4000 and 10", pl.Report.QueuedPrefillTokens, pl.Report.ActiveDecodeBlocks)
	}
	f.msgs <- Message{Kind: KindGone, Source: b}
	settle(t, run.r, f)
	pl = reportQuietFor(t, run.r, cfg, 1)
	if pl.Report.QueuedPrefillTokens != 1000 || pl.Report.ActiveDecodeBlocks != 4 {
		t.Errorf("frontend b gone: prefill %d, decode %d; want a's 1000 and 4", pl.Report.QueuedPrefillTokens, pl.Report.ActiveDecodeBlocks)
	}
}
