package zmqfeed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
)

const engineBlockSize = 4

// tokens returns lo..hi as msgpack-able ints and as u32s.
func tokens(lo, hi int) ([]any, []uint32) {
	var a []any
	var u []uint32
	for t := lo; t <= hi; t++ {
		a = append(a, t)
		u = append(u, uint32(t))
	}
	return a, u
}

// engineStored is the kv.Event the relay must make of a BlockStored:
// local hashes of the tokens, salted by the LoRA name, with mm hashes.
func engineStored(t *testing.T, worker uint64, rank uint32, lora string, parent *uint64, hashes []uint64, toks []uint32, mm [][]uint64) kv.Event {
	t.Helper()
	h, err := dynamo.NewHasher(dynamo.HasherConfig{BlockSize: engineBlockSize, LoRA: lora})
	if err != nil {
		t.Fatalf("NewHasher: %v", err)
	}
	locals := h.AppendLocalMM(nil, toks, mm)
	ev := kv.Event{Member: kv.Member{Worker: worker, Rank: rank}, Kind: kv.Stored}
	if parent != nil {
		ev.HasParent, ev.Parent = true, *parent
	}
	for i, e := range hashes {
		ev.Blocks = append(ev.Blocks, kv.Block{External: e, Local: locals[i]})
	}
	return ev
}

func startEngine(t *testing.T, cfg EngineConfig) *Engine {
	t.Helper()
	cfg.BlockSize, cfg.Logger = engineBlockSize, testLogger()
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	return e
}

// warmUp has the engine publish empty batches until the relay took one.
func warmUp(t *testing.T, py *pyProc, r *relay.Relay) {
	t.Helper()
	py.do("warm", nil)
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Intake.EngineBatches == 0 {
			return errors.New("no engine batch taken yet")
		}
		return nil
	})
}

// replayedAfterFirstEvent waits for the first event and returns the
// replayed batches so far: the warm-up batches the feed missed before it
// connected come from the replay socket (a late join), all of them before
// the first event.
func replayedAfterFirstEvent(t *testing.T, r *relay.Relay) uint64 {
	t.Helper()
	return waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Intake.Events == 0 {
			return errors.New("first event not taken yet")
		}
		return nil
	}).Intake.Replayed
}

func send(py *pyProc, batch any, skip bool) {
	py.do("send", map[string]any{"batch": batch, "skip": skip})
}

// TestEngine_VLLMAndSGLangBatchesInEveryShapeAreTracked publishes, with
// Debian's python3-zmq, batches the way vLLM (msgspec arrays, fields
// appended over releases: medium, lora_name, extra_keys) and SGLang (maps)
// send them, for several dp ranks; the relay's filter equals a producer
// fed the events Dynamo's rules make of them.
func TestEngine_VLLMAndSGLangBatchesInEveryShapeAreTracked(t *testing.T) {
	py := startPy(t, "engine_pub.py", "--bind", "tcp://127.0.0.1:0", "--replay", "tcp://127.0.0.1:0")
	r := startRelay(t, startEngine(t, EngineConfig{Endpoint: py.Endpoints[0], Replay: py.Endpoints[1], WorkerID: 7}))
	warmUp(t, py, r)
	t1, u1 := tokens(1, 8)
	t2, u2 := tokens(9, 12)
	t3, _ := tokens(13, 16)
	t4, u4 := tokens(17, 24)
	mmID := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	mmHash, _ := dynamo.MMIdentifierHash(mmID)
	// vLLM ≤ 0.9: [tag, hashes, parent, tokens, block_size, lora_id].
	send(py, []any{1.5, []any{[]any{"BlockStored", []any{101, 102}, nil, t1, engineBlockSize, nil}}, 0}, false)
	// + medium, lora_name (rank 1).
	send(py, []any{1.6, []any{[]any{"BlockStored", []any{201}, nil, t2, engineBlockSize, 1, "GPU", "sql-lora"}}, 1}, false)
	// SGLang-style maps: a CPU-tier store (not the primary index) and a removal.
	send(py, map[string]any{"ts": 1.7, "data_parallel_rank": 0, "events": []any{
		map[string]any{"type": "BlockStored", "block_hashes": []any{103}, "parent_block_hash": 102, "token_ids": t3,
			"block_size": engineBlockSize, "lora_id": nil, "medium": "CPU"},
		map[string]any{"type": "BlockRemoved", "block_hashes": []any{101}, "medium": "GPU"},
	}}, false)
	// + extra_keys carrying an mm identifier on the first block (rank 2).
	send(py, []any{1.8, []any{[]any{"BlockStored", []any{301, 302}, nil, t4, engineBlockSize, nil, nil, nil,
		[]any{[]any{[]any{mmID, 0}}, nil}}}, 2}, false)
	st := waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Intake.Events != 4 {
			return fmt.Errorf("intake %+v: want 4 primary events", st.Intake)
		}
		return nil
	})
	if st.Intake.NonPrimary != 1 || st.Intake.Gaps != 0 || st.Rejected != 0 {
		t.Errorf("intake %+v, rejected %d: want 1 non-primary store, no gap, nothing rejected", st.Intake, st.Rejected)
	}
	checkWords(t, r, []kv.Event{
		engineStored(t, 7, 0, "", nil, []uint64{101, 102}, u1, nil),
		engineStored(t, 7, 1, "sql-lora", nil, []uint64{201}, u2, nil),
		removedKV(7, 0, 0, 101),
		engineStored(t, 7, 2, "", nil, []uint64{301, 302}, u4, [][]uint64{{mmHash}, nil}),
	})
}

// TestEngine_GapIsReplayed loses one batch on the PUB socket: the feed asks
// the replay socket for it and the relay ends up with every batch.
func TestEngine_GapIsReplayed(t *testing.T) {
	py := startPy(t, "engine_pub.py", "--bind", "tcp://127.0.0.1:0", "--replay", "tcp://127.0.0.1:0")
	r := startRelay(t, startEngine(t, EngineConfig{Endpoint: py.Endpoints[0], Replay: py.Endpoints[1], WorkerID: 3}))
	warmUp(t, py, r)
	ta, ua := tokens(1, 4)
	tb, ub := tokens(5, 8)
	tc, uc := tokens(9, 12)
	send(py, []any{1.0, []any{[]any{"BlockStored", []any{11}, nil, ta, engineBlockSize, nil}}, 0}, false)
	before := replayedAfterFirstEvent(t, r)
	send(py, []any{1.1, []any{[]any{"BlockStored", []any{12}, 11, tb, engineBlockSize, nil}}, 0}, true) // lost
	send(py, []any{1.2, []any{[]any{"BlockStored", []any{13}, 12, tc, engineBlockSize, nil}}, 0}, false)
	st := waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Intake.Events != 3 {
			return fmt.Errorf("intake %+v: want 3 events", st.Intake)
		}
		return nil
	})
	if st.Intake.Replayed-before != 1 || st.Intake.Resyncs != 0 || st.Intake.Gaps != 0 || st.Rejected != 0 {
		t.Errorf("intake %+v (%d replayed before), rejected %d: want 1 more replayed batch, no resync, no gap left, nothing rejected",
			st.Intake, before, st.Rejected)
	}
	a := engineStored(t, 3, 0, "", nil, []uint64{11}, ua, nil)
	b := engineStored(t, 3, 0, "", ptr(11), []uint64{12}, ub, nil)
	c := engineStored(t, 3, 0, "", ptr(12), []uint64{13}, uc, nil)
	checkWords(t, r, []kv.Event{a, b, c})
}

// TestEngine_UnreplayableGapAndRestartResync loses two batches of an engine
// that buffers one: the replay cannot cover them, so the relay clears the
// engine's blocks (one of the lost batches removed a block) and tracks
// what comes next. Then the engine restarts on the same endpoints (its
// sequence starts over): a resync again.
func TestEngine_UnreplayableGapAndRestartResync(t *testing.T) {
	py := startPy(t, "engine_pub.py", "--bind", "tcp://127.0.0.1:0", "--replay", "tcp://127.0.0.1:0", "--buffer", "1")
	r := startRelay(t, startEngine(t, EngineConfig{Endpoint: py.Endpoints[0], Replay: py.Endpoints[1], WorkerID: 4}))
	warmUp(t, py, r)
	ta, _ := tokens(1, 4)
	tb, _ := tokens(5, 8)
	tc, uc := tokens(9, 12)
	send(py, []any{1.0, []any{[]any{"BlockStored", []any{21}, nil, ta, engineBlockSize, nil}}, 0}, false)
	send(py, []any{1.1, []any{[]any{"BlockStored", []any{22}, nil, tb, engineBlockSize, nil}}, 0}, true)
	send(py, []any{1.2, []any{[]any{"BlockRemoved", []any{21}}}, 0}, true)
	send(py, []any{1.3, []any{[]any{"BlockStored", []any{23}, nil, tc, engineBlockSize, nil}}, 0}, false)
	st := waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Intake.Resyncs != 1 || st.Producer.TrackedBlocks != 1 {
			return fmt.Errorf("intake %+v, tracked %d: want a resync and only the last store's block", st.Intake, st.Producer.TrackedBlocks)
		}
		return nil
	})
	if st.Intake.Gaps != 2 {
		t.Errorf("gaps = %d, want the 2 lost batches", st.Intake.Gaps)
	}
	checkWords(t, r, []kv.Event{engineStored(t, 4, 0, "", nil, []uint64{23}, uc, nil)})

	py.kill()
	again := startPy(t, "engine_pub.py", "--bind", py.Endpoints[0], "--replay", py.Endpoints[1])
	td, ud := tokens(13, 16)
	send(again, []any{2.0, []any{[]any{"BlockStored", []any{24}, nil, td, engineBlockSize, nil}}, 0}, false)
	again.do("warm", nil)
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Intake.Resyncs != 2 || st.Producer.TrackedBlocks != 1 {
			return fmt.Errorf("intake %+v, tracked %d: want a second resync and only the restarted engine's block", st.Intake, st.Producer.TrackedBlocks)
		}
		return nil
	})
	checkWords(t, r, []kv.Event{engineStored(t, 4, 0, "", nil, []uint64{24}, ud, nil)})
}

// TestEngine_GapPastTheReplayBoundResyncs loses two batches of a feed that
// may replay one: it asks only for the newest, resyncs (the older lost one
// counts as a gap) and applies the newest and what follows.
func TestEngine_GapPastTheReplayBoundResyncs(t *testing.T) {
	py := startPy(t, "engine_pub.py", "--bind", "tcp://127.0.0.1:0", "--replay", "tcp://127.0.0.1:0")
	r := startRelay(t, startEngine(t, EngineConfig{Endpoint: py.Endpoints[0], Replay: py.Endpoints[1], WorkerID: 5, MaxReplayBatches: 1}))
	warmUp(t, py, r)
	ta, _ := tokens(1, 4)
	tb, _ := tokens(5, 8)
	tc, uc := tokens(9, 12)
	td, ud := tokens(13, 16)
	send(py, []any{1.0, []any{[]any{"BlockStored", []any{11}, nil, ta, engineBlockSize, nil}}, 0}, false)
	before := replayedAfterFirstEvent(t, r)
	send(py, []any{1.1, []any{[]any{"BlockStored", []any{12}, 11, tb, engineBlockSize, nil}}, 0}, true)
	send(py, []any{1.2, []any{[]any{"BlockStored", []any{13}, nil, tc, engineBlockSize, nil}}, 0}, true)
	send(py, []any{1.3, []any{[]any{"BlockStored", []any{14}, 13, td, engineBlockSize, nil}}, 0}, false)
	st := waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Intake.Resyncs != 1 || st.Producer.TrackedBlocks != 2 {
			return fmt.Errorf("intake %+v, tracked %d: want a resync and the last two stores' blocks", st.Intake, st.Producer.TrackedBlocks)
		}
		return nil
	})
	if st.Intake.Gaps != 1 || st.Intake.Replayed-before != 1 || st.Rejected != 0 {
		t.Errorf("intake %+v (%d replayed before), rejected %d: want 1 gap left, 1 more replayed batch, nothing rejected",
			st.Intake, before, st.Rejected)
	}
	c := engineStored(t, 5, 0, "", nil, []uint64{13}, uc, nil)
	d := engineStored(t, 5, 0, "", ptr(13), []uint64{14}, ud, nil)
	checkWords(t, r, []kv.Event{c, d})
}

// TestEngineRun_ANewSocketAfterAFailedOneResyncs drives one run's state
// without sockets: messages on the first socket are taken in order; once
// the read loop failed and a second socket took its place, the next
// message is taken as after a reconnection (the stream names no
// incarnation): a resync, then the message.
func TestEngineRun_ANewSocketAfterAFailedOneResyncs(t *testing.T) {
	e, err := NewEngine(EngineConfig{Endpoint: "tcp://127.0.0.1:1", BlockSize: engineBlockSize, Logger: testLogger()})
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	var kinds []relay.MessageKind
	run := &engineRun{e: e, deliver: func(m relay.Message) bool { kinds = append(kinds, m.Kind); return true }}
	batch := func(seq uint64) [][]byte { return [][]byte{nil, binary.BigEndian.AppendUint64(nil, seq), {0x90}} }
	run.use(&socket{connects: 1})
	run.live(batch(1))
	run.live(batch(2))
	if want := []relay.MessageKind{relay.KindEngine, relay.KindEngine}; !slices.Equal(kinds, want) {
		t.Fatalf("first socket: delivered %v, want %v", kinds, want)
	}
	kinds = nil
	run.use(&socket{connects: 1})
	run.live(batch(3))
	run.live(batch(4))
	if want := []relay.MessageKind{relay.KindResync, relay.KindEngine, relay.KindEngine}; !slices.Equal(kinds, want) {
		t.Errorf("second socket: delivered %v, want %v (a resync first)", kinds, want)
	}
}
