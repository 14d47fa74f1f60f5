package parity

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/internal/testseed"
)

// routerEvent wraps a kv.Event as the RouterEvent a router would log.
func routerEvent(ev *kv.Event, tier dynamo.StorageTier) *dynamo.RouterEvent {
	re := &dynamo.RouterEvent{WorkerID: ev.Member.Worker, StorageTier: tier, Residency: dynamo.ResidencyWorker,
		Event: dynamo.CacheEvent{EventID: ev.EventID, Kind: ev.Kind, DpRank: ev.Member.Rank, Removed: ev.Removed}}
	re.Event.Stored = dynamo.StoreData{HasParent: ev.HasParent, Parent: ev.Parent, HasStart: ev.HasStart, StartPosition: ev.StartPosition}
	for _, b := range ev.Blocks {
		re.Event.Stored.Blocks = append(re.Event.Stored.Blocks, dynamo.StoredBlock{BlockHash: b.External, TokensHash: b.Local})
	}
	return re
}

// traceLog replays reqs through mock engines like ReplayTrace and writes
// the events as an event log, with a host-tier copy of every tenth event
// and blank lines mixed in; it returns the log and the prompts.
func traceLog(t *testing.T, reqs []trace.Request, workers int) ([]byte, [][]uint64) {
	t.Helper()
	mapper, err := trace.NewMapper(trace.MapperConfig{})
	if err != nil {
		t.Fatal(err)
	}
	part, _ := trace.NewPartition(workers, 42)
	engines := make([]*trace.Engine, workers)
	for w := range engines {
		engines[w], _ = trace.NewEngine(trace.EngineConfig{Member: kv.Member{Worker: uint64(w)}, CapacityBlocks: 4096})
	}
	var log []byte
	var prompts [][]uint64
	n := 0
	for i, r := range reqs {
		p := mapper.AppendLocals(nil, r.HashIDs)
		prompts = append(prompts, p)
		evs, _ := engines[part.Worker(uint64(i))].Serve(nil, p)
		for j := range evs {
			if log, err = dynamo.AppendJSON(log, routerEvent(&evs[j], dynamo.TierDevice)); err != nil {
				t.Fatalf("AppendJSON: %v", err)
			}
			log = append(log, '\n')
			if n++; n%10 == 0 {
				log, _ = dynamo.AppendJSON(log, routerEvent(&evs[j], dynamo.TierHostPinned))
				log = append(log, "\n\n"...)
			}
		}
	}
	return log, prompts
}

// TestReplayLog_MatchesTraceReplay checks that the event log of a trace
// replay, read back, drives the study exactly like the trace itself.
func TestReplayLog_MatchesTraceReplay(t *testing.T) {
	reqs := loadSlice(t, "conversation_head400.jsonl")
	if testing.Short() {
		reqs = reqs[:100]
	}
	log, prompts := traceLog(t, reqs, 8)
	cfg := Config{Lanes: 8, BlocksPerLane: 4096, Seed: testseed.For(t, paritySeed)}

	fromTrace := newStudy(t, cfg)
	if _, err := fromTrace.ReplayTrace(reqs, TraceConfig{Workers: 8, CapacityBlocks: 4096}); err != nil {
		t.Fatalf("ReplayTrace: %v", err)
	}
	fromLog := newStudy(t, cfg)
	lr := NewLogReader(bytes.NewReader(log))
	paths, err := fromLog.ReplayLog(lr, 64)
	if err != nil {
		t.Fatalf("ReplayLog: %v", err)
	}
	if lr.Skipped() == 0 || fromLog.Counts() != fromTrace.Counts() {
		t.Errorf("ReplayLog counts %+v (skipped %d), ReplayTrace %+v; want equal counts and skipped host-tier events",
			fromLog.Counts(), lr.Skipped(), fromTrace.Counts())
	}
	if len(paths) != 64 {
		t.Errorf("ReplayLog sampled %d paths, want 64", len(paths))
	}
	qs := Queries{Base: prompts, Count: 2 * len(prompts), Seed: 4}
	a, b := sweep(t, fromTrace, qs, 0.8)[0], sweep(t, fromLog, qs, 0.8)[0]
	if !reflect.DeepEqual(a, b) {
		t.Errorf("Measure after ReplayLog = %+v\nafter ReplayTrace = %+v; want equal", b, a)
	}
	// Every sampled path is a prefix the exact index reaches from the
	// root in full for some member, or one that later removals cut.
	r := sweep(t, fromLog, Queries{Base: paths}, 0.8)[0]
	if r.Failed() || r.Queries != 64 {
		t.Errorf("Measure over sampled paths: %d queries, %d underestimates, %d false negatives; want 64, 0, 0", r.Queries, r.Underestimates, r.FP.FalseNegatives)
	}
}

// TestLogReader_SkipsWhatThePrimaryIndexDoesNotTake reads a log whose
// unsupported and lower-tier events sit between good ones: they are
// skipped and counted, as the router skips them, and the log reads on.
func TestLogReader_SkipsWhatThePrimaryIndexDoesNotTake(t *testing.T) {
	good := `{"worker_id":1,"event":{"event_id":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":5,"tokens_hash":5}]}},"dp_rank":0}}`
	log := strings.Join([]string{
		good,
		strings.Replace(good, `"worker_id":1`, `"worker_id":1,"storage_tier":"tape"`, 1),
		strings.Replace(good, `"worker_id":1`, `"worker_id":1,"residency_domain":null`, 1),
		strings.Replace(good, `"worker_id":1`, `"worker_id":1,"storage_tier":"disk"`, 1),
		strings.Replace(good, `"worker_id":1`, `"worker_id":2`, 1),
	}, "\n")
	r := NewLogReader(strings.NewReader(log))
	var workers []uint64
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		workers = append(workers, ev.Member.Worker)
	}
	if !reflect.DeepEqual(workers, []uint64{1, 2}) || r.Skipped() != 3 {
		t.Errorf("read workers %v, skipped %d; want [1 2] and 3 skipped", workers, r.Skipped())
	}
}

func TestLogReader_BadLinesAreNamed(t *testing.T) {
	good := `{"worker_id":1,"event":{"event_id":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":5,"tokens_hash":5}]}},"dp_rank":0}}`
	cases := []struct {
		name string
		log  string
		line int
		is   error
	}{
		{"malformed", good + "\n\n{\"worker_id\":", 3, dynamo.ErrMalformed},
		{"too long", good + "\n" + strings.Repeat(" ", MaxLogLineBytes+1) + "x\n", 2, ErrLineTooLong},
	}
	for _, c := range cases {
		r := NewLogReader(strings.NewReader(c.log))
		if _, err := r.Next(); err != nil {
			t.Fatalf("%s: first Next = %v, want the good line", c.name, err)
		}
		_, err := r.Next()
		var le *LineError
		if !errors.As(err, &le) || le.Line != c.line || !errors.Is(err, c.is) {
			t.Errorf("%s: Next = %v, want a *LineError at line %d wrapping %v", c.name, err, c.line, c.is)
		}
		if _, again := r.Next(); again != err {
			t.Errorf("%s: Next after an error = %v, want the same error %v", c.name, again, err)
		}
	}
	r := NewLogReader(strings.NewReader(good + "\n"))
	if _, err := r.Next(); err != nil {
		t.Fatalf("Next = %v", err)
	}
	if _, err := r.Next(); err != io.EOF || r.Line() != 1 {
		t.Errorf("Next at the end = %v (line %d), want io.EOF at line 1", err, r.Line())
	}
}

func TestReplayLog_RejectsBadSampleCount(t *testing.T) {
	s := newStudy(t, Config{})
	if _, err := s.ReplayLog(NewLogReader(strings.NewReader("")), 0); !errors.Is(err, ErrConfig) {
		t.Errorf("ReplayLog(samples 0) = %v, want ErrConfig", err)
	}
}
