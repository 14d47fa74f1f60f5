package sim

import (
	"fmt"

	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/goindex/kv"
)

// worker is one inference worker of a DC: a mock engine (an LRU prefix
// cache of KVBlocksPerWorker blocks that emits real kv.Events) behind a
// vLLM-like scheduler.
//
// Scheduling model:
//   - Admission is FCFS: the head of the waiting queue is admitted while
//     fewer than BatchLimit sequences run and the blocks reserved by the
//     running sequences plus its own (prompt and output) fit the KV
//     capacity; a lone request is always admitted. Nothing overtakes the
//     head.
//   - Prefill is FIFO, one request at a time, at PrefillTokensPerMs over
//     the prompt tokens the cache does not hold when the prefill starts
//     (at least one token: the last one is always computed). This is the
//     throughput of chunked prefill with a token budget filled in arrival
//     order; the chunks' interleaving with decode steps is not modelled.
//   - The first token is out when the prefill ends; every later token takes
//     DecodeMsPerToken, whatever the batch (decode is memory-bound), so a
//     request decodes for (output − 1)·DecodeMsPerToken and then releases
//     its reservation.
//   - The prompt's blocks enter the cache (Engine.Serve, which emits the
//     Removed and Stored events) when its prefill ends. The cache and the
//     reservations are accounted separately: the LRU holds up to the
//     capacity of prompt blocks, running or not, and admission bounds the
//     running sequences' blocks by the same capacity.
//
// The local router's load signals are its own bookkeeping of what it
// routed here (as Dynamo's router tracks active sequences): pendingTokens
// is the uncached prompt tokens not yet prefilled (the router's estimate
// until the prefill starts, then the real figure), routedBlocks the blocks
// of every routed request not yet finished.
type worker struct {
	member kv.Member
	engine *trace.Engine

	waiting  []int // routed, not admitted, FCFS
	prefillQ []int // admitted, prefill not started, FIFO
	cur      int   // request in prefill, or -1
	curStart float64

	running  int // admitted sequences (prefill queued, running, or decoding)
	decoding int
	reserved int // blocks reserved by the running sequences

	pendingTokens int64
	routedBlocks  int64

	busy      bool // prefilling or decoding
	busySince float64
	busyMs    float64
}

func newWorker(id int, capacity int) (*worker, error) {
	m := kv.Member{Worker: uint64(id)}
	e, err := trace.NewEngine(trace.EngineConfig{Member: m, CapacityBlocks: capacity})
	if err != nil {
		return nil, fmt.Errorf("%w: worker %d: %w", ErrConfig, id, err)
	}
	return &worker{member: m, engine: e, cur: -1}, nil
}

// settle closes the busy interval up to now under the previous state and
// opens one under the current state; call it after every change of cur or
// decoding.
func (w *worker) settle(now float64) {
	if w.busy {
		w.busyMs += now - w.busySince
	}
	w.busySince = now
	w.busy = w.cur >= 0 || w.decoding > 0
}

// queuedTokens is the prefill work left on the worker at now: pending
// tokens minus what the running prefill has already computed.
func (w *worker) queuedTokens(now, tokensPerMs float64, s *simulation) float64 {
	q := float64(w.pendingTokens)
	if w.cur >= 0 {
		q -= min(float64(s.reqs[w.cur].uncached), (now-w.curStart)*tokensPerMs)
	}
	return max(q, 0)
}

// enqueue puts routed request i in the waiting queue and admits what fits.
func (s *simulation) enqueue(d *dc, w *worker, i int, now float64) {
	st := &s.reqs[i]
	w.pendingTokens += int64(st.estUncached)
	w.routedBlocks += int64(st.blocks)
	w.waiting = append(w.waiting, i)
	s.admit(d, w, now)
}

// admit admits waiting requests FCFS while the batch limit and the KV
// capacity allow, then starts a prefill if the worker has none running.
func (s *simulation) admit(d *dc, w *worker, now float64) {
	for len(w.waiting) > 0 && w.running < s.cfg.BatchLimit {
		i := w.waiting[0]
		need := s.reqs[i].blocks
		if w.running > 0 && w.reserved+need > s.cfg.KVBlocksPerWorker {
			break
		}
		w.waiting = w.waiting[1:]
		w.running++
		w.reserved += need
		w.prefillQ = append(w.prefillQ, i)
	}
	s.startPrefill(d, w, now)
}

// startPrefill starts the next admitted request's prefill, if the worker is
// free: the cached prefix is read from the engine now, and the prefill
// takes the uncached tokens over the prefill rate.
func (s *simulation) startPrefill(d *dc, w *worker, now float64) {
	if w.cur >= 0 || len(w.prefillQ) == 0 {
		return
	}
	i := w.prefillQ[0]
	w.prefillQ = w.prefillQ[1:]
	r, st := &s.w.Requests[i], &s.reqs[i]
	st.hitBlocks = w.engine.Lookup(r.Locals)
	st.hitTokens = min(st.hitBlocks*s.w.BlockSize, r.InputTokens-1)
	st.uncached = r.InputTokens - st.hitTokens
	st.prefillStartMs = now
	w.pendingTokens += int64(st.uncached - st.estUncached)
	w.cur, w.curStart = i, now
	w.settle(now)
	s.q.push(now+float64(st.uncached)/s.cfg.PrefillTokensPerMs, evPrefillDone, int(w.member.Worker), d.idx)
}

// prefillDone ends the running prefill: the prompt enters the cache (the
// engine's events go to the DC's index and producer), the first token is
// out, and the request starts decoding.
func (s *simulation) prefillDone(d *dc, w *worker, now float64) error {
	i := w.cur
	r, st := &s.w.Requests[i], &s.reqs[i]
	var res trace.Result
	d.events, res = w.engine.Serve(d.events[:0], r.Locals)
	if res.CachedBlocks != st.hitBlocks {
		return fmt.Errorf("%w: dc %s worker %d request %d: %d blocks cached at prefill start, %d at its end",
			ErrEngine, d.name, w.member.Worker, i, st.hitBlocks, res.CachedBlocks)
	}
	st.firstTokenMs = now
	w.pendingTokens -= int64(st.uncached)
	w.cur = -1
	w.decoding++
	w.settle(now)
	s.q.push(now+float64(max(r.OutputTokens-1, 0))*s.cfg.DecodeMsPerToken, evDecodeDone, i, 0)
	if err := s.publishEvents(d, now); err != nil {
		return err
	}
	s.startPrefill(d, w, now)
	return nil
}

// decodeDone ends request i's decode: its reservation is released and the
// worker admits what now fits.
func (s *simulation) decodeDone(d *dc, w *worker, i int, now float64) {
	st := &s.reqs[i]
	w.decoding--
	w.running--
	w.reserved -= st.blocks
	w.routedBlocks -= int64(st.blocks)
	w.settle(now)
	d.released += int64(st.blocks)
	s.admit(d, w, now)
}
