package sim

import (
	"fmt"
	"math"
	"slices"

	"github.com/goindex/goindex/goindex/kv"
)

// worker is one inference worker of a DC: a paged KV pool with prefix
// caching (kvpool.go) behind a model of vLLM's scheduler with chunked
// prefill. Config's serving-model fields document each parameter and its
// source; the model:
//
//   - Iterations. The engine runs one forward pass (iteration) after
//     another. Every decoding sequence gets one token per iteration; the
//     rest of the iteration's token budget B (TokenBudget, vLLM's
//     max_num_batched_tokens) goes to prefill, FIFO: the head of the
//     prefill queue takes it all (vLLM's max_num_partial_prefills = 1).
//     An iteration with n decoding sequences reading c context tokens and
//     p prefill tokens lasts max(TMem, TComp) (the roofline: decode is
//     memory-bound, prefill compute-bound, and one pass does both at the
//     cost of the slower, as Sarathi-Serve's hybrid batches do):
//     TMem = DecodeMsPerToken + DecodeMsPerKToken·c/1000 (weights plus KV
//     read), TComp = (p + n)/(PrefillTokensPerMs·speed). So prefill gets
//     B − n tokens per iteration (it slows as the decode batch grows) and
//     a decode step takes B/R while a prefill runs (decode slows under
//     prefill): the interference of chunked prefill.
//   - Fluid time. Between two state changes (an admission, a prefill's
//     end, a decode's next KV block or its last token, a preemption) the
//     rates are constant, so the worker advances continuously at them
//     rather than iteration by iteration: prefill drains at (B − n)/T
//     tokens/ms while queued, decode progresses at 1/T tokens/ms per
//     sequence (a virtual clock v counts the iterations), and the next
//     change is scheduled exactly.
//   - Admission. The head of the waiting queue is admitted FCFS while
//     fewer than BatchLimit sequences run and its blocks fit: its cached
//     prefix is pinned and the rest of its prompt allocated, evicting
//     cached blocks as needed; a lone request is always admitted. Nothing
//     overtakes the head. Its prefill computes the prompt tokens not
//     cached (at least the last one).
//   - Decode and preemption. A decoding sequence needs a new block every
//     BlockSize tokens. When none can be allocated, the most recently
//     admitted sequence is preempted (vLLM's FCFS victim) and requeued at
//     the front: its blocks are released (its computed prompt blocks stay
//     cached, so its recomputation may hit them) and, when readmitted, it
//     recomputes its prompt and the tokens it had generated (vLLM's
//     recompute preemption, the V1 default), then continues decoding.
//   - A request's first token leaves when its first prefill ends; its
//     prompt blocks are registered then (Stored events); its last token
//     when it has generated OutputTokens; then its blocks are released.
//
// The local router's load signals are its own bookkeeping of what it
// routed here, as Dynamo's router tracks active sequences: queued prefill
// tokens (its estimate for requests not yet admitted, the real work once
// admitted) and the blocks of every routed request not yet finished.
type worker struct {
	id     int // index in simulation.workers
	dc     *dc
	member kv.Member
	pool   *kvPool
	speed  float64 // multiplier of the prefill rate (Config.DCSpeed)

	waiting  []int // routed, not admitted; preempted requests go first
	prefillQ []int // admitted, prefill not done, FIFO; the head is computing
	order    []int // admitted sequences in admission order (preemption takes the last)
	decoding int
	marks    markHeap // each decoding sequence's next milestone

	at      float64 // time the state below was last advanced to
	v       float64 // decode iterations run so far (the decode clock)
	ctx     float64 // context tokens of the decoding sequences
	gen     int     // generation of the scheduled worker event
	prefill float64 // current prefill rate, tokens/ms
	decode  float64 // current decode rate, iterations/ms

	waitingTokens  float64 // the local router's estimate of the waiting requests' prefill work
	admittedTokens float64 // prefill work of the admitted requests, prefilled or not
	routedBlocks   int64

	busyMs, prefillMs float64
}

func newWorker(d *dc, id, k int, c *Config) *worker {
	m := kv.Member{Worker: uint64(k)}
	return &worker{id: id, dc: d, member: m, pool: newKVPool(m, c.KVBlocksPerWorker), speed: d.speed}
}

// clone returns a deep copy of w belonging to DC d: its queues, decode
// marks, rates, clocks, the local router's bookkeeping and its KV pool
// (kvPool.clone), sharing no memory with w. The requests' own state
// (simulation.reqs) is not the worker's: a clone runs against a copy of it.
func (w *worker) clone(d *dc) *worker {
	c := *w
	c.dc, c.pool = d, w.pool.clone()
	c.waiting, c.prefillQ, c.order = slices.Clone(w.waiting), slices.Clone(w.prefillQ), slices.Clone(w.order)
	c.marks = slices.Clone(w.marks)
	return &c
}

// running is the number of admitted sequences.
func (w *worker) running() int { return len(w.order) }

// queuedTokens is the prefill work left on the worker: the waiting
// requests' estimates and what the admitted requests have not computed.
func (w *worker) queuedTokens(s *simulation) float64 {
	q := w.waitingTokens + w.admittedTokens
	if len(w.prefillQ) > 0 {
		st := &s.reqs[w.prefillQ[0]]
		q -= st.work - st.left
	}
	return max(q, 0)
}

// memMs is the memory-bound time of an iteration: the weights, and the KV
// of every decoding sequence.
func (w *worker) memMs(c *Config) float64 {
	return c.DecodeMsPerToken + c.DecodeMsPerKToken*w.ctx/1000
}

// rates sets the prefill and decode rates of the current state.
func (w *worker) rates(c *Config) {
	rate := c.PrefillTokensPerMs * w.speed
	var tIter float64
	if len(w.prefillQ) > 0 {
		tIter = max(w.memMs(c), float64(c.TokenBudget)/rate)
		w.prefill = max(float64(c.TokenBudget-w.decoding), 0) / tIter
	} else {
		tIter = max(w.memMs(c), float64(w.decoding)/rate)
		w.prefill = 0
	}
	w.decode = 0
	if w.decoding > 0 {
		w.decode = 1 / tIter
	}
}

// advance moves the worker's state from w.at to now at the current rates.
func (s *simulation) advance(w *worker, now float64) {
	dt := now - w.at
	if dt <= 0 {
		return
	}
	if len(w.prefillQ) > 0 {
		st := &s.reqs[w.prefillQ[0]]
		st.left = max(st.left-w.prefill*dt, 0)
		w.prefillMs += dt
	}
	if w.decoding > 0 {
		dv := w.decode * dt
		w.v += dv
		w.ctx += float64(w.decoding) * dv
	}
	if len(w.prefillQ) > 0 || w.decoding > 0 {
		w.busyMs += dt
	}
	w.at = now
}

// reschedule recomputes the rates after a state change and schedules the
// worker's next change.
func (s *simulation) reschedule(w *worker) {
	w.rates(s.cfg)
	s.schedule(w)
}

// schedule schedules the worker's next change at its current rates (a
// newer generation voids the earlier event).
func (s *simulation) schedule(w *worker) {
	w.gen++
	next := math.Inf(1)
	if len(w.prefillQ) > 0 && w.prefill > 0 {
		next = w.at + s.reqs[w.prefillQ[0]].left/w.prefill
	}
	if m, ok := s.nextMark(w); ok {
		next = min(next, w.at+max(m.v-w.v, 0)/w.decode)
	}
	if !math.IsInf(next, 1) {
		s.q.push(next, evWorker, w.id, w.gen)
	}
}

// nextMark returns the earliest live milestone of w's decoding sequences,
// dropping those a preemption voided.
func (s *simulation) nextMark(w *worker) (mark, bool) {
	for len(w.marks) > 0 {
		m := w.marks[0]
		if s.reqs[m.req].epoch == m.epoch {
			return m, true
		}
		w.marks.pop()
	}
	return mark{}, false
}

// step runs worker w's scheduled change at now: a prefill's end or
// decode milestones (all that fall due at once), then admissions.
func (s *simulation) step(w *worker, gen int, now float64) error {
	if gen != w.gen {
		return nil // superseded by a later state change
	}
	s.advance(w, now)
	const eps = 1e-9
	if len(w.prefillQ) > 0 && s.reqs[w.prefillQ[0]].left <= eps*max(1, s.reqs[w.prefillQ[0]].work) {
		if err := s.prefillDone(w, now); err != nil {
			return err
		}
	}
	for {
		m, ok := s.nextMark(w)
		if !ok || m.v > w.v+eps*max(1, w.v) {
			break
		}
		w.marks.pop()
		w.v = max(w.v, m.v)
		if err := s.milestone(w, m.req, now); err != nil {
			return err
		}
	}
	return s.admit(w, now)
}

// enqueue puts routed request i in w's waiting queue and admits what fits.
func (s *simulation) enqueue(w *worker, i int, now float64) error {
	st := &s.reqs[i]
	s.advance(w, now)
	w.waitingTokens += float64(st.estWork)
	w.routedBlocks += int64(st.blocks)
	w.waiting = append(w.waiting, i)
	return s.admit(w, now)
}

// blocksNeeded is the blocks request i holds once admitted with g tokens
// generated: its prompt's, or its context's if longer; at most the
// worker's capacity (a longer request runs alone, truncated).
func (s *simulation) blocksNeeded(i, g int) int {
	r := &s.w.Requests[i]
	n := max(len(r.Locals), (r.InputTokens+g+s.w.BlockSize-1)/s.w.BlockSize)
	return min(n, s.cfg.KVBlocksPerWorker)
}

// admit admits waiting requests FCFS while the batch limit and the KV
// memory allow, then reschedules the worker.
func (s *simulation) admit(w *worker, now float64) error {
	d := w.dc
	for len(w.waiting) > 0 && w.running() < s.cfg.BatchLimit {
		i := w.waiting[0]
		r, st := &s.w.Requests[i], &s.reqs[i]
		seqs := r.Seqs[:min(len(r.Seqs), s.cfg.KVBlocksPerWorker)]
		hit := w.pool.match(seqs)
		need := s.blocksNeeded(i, st.generated)
		if w.running() > 0 && w.pool.admitCost(seqs, hit, need) > w.pool.allocatable() {
			break
		}
		w.waiting = w.waiting[1:]
		w.waitingTokens -= float64(st.estWork)
		d.events = w.pool.admit(d.events[:0], seqs, hit, need)
		st.pinned, st.private = hit, need-hit
		context := r.InputTokens + st.generated
		hitTokens := min(hit*s.w.BlockSize, context-1)
		st.work = float64(context-hitTokens) * st.jitter
		st.left = st.work
		if !st.admitted {
			st.admitted = true
			st.hitBlocks, st.hitTokens, st.uncached = hit, hitTokens, r.InputTokens-hitTokens
		}
		w.admittedTokens += st.work
		w.order = append(w.order, i)
		w.prefillQ = append(w.prefillQ, i)
		if len(w.prefillQ) == 1 && !st.prefillStarted {
			st.prefillStarted, st.prefillStartMs = true, now
		}
		if err := s.publishEvents(d, now); err != nil {
			return err
		}
	}
	s.reschedule(w)
	return nil
}

// prefillDone ends the head's prefill: its prompt blocks are registered
// (Stored events to the DC's index and producer), its next token is out
// (the first one: TTFT), and it decodes or, with nothing left to generate,
// finishes.
func (s *simulation) prefillDone(w *worker, now float64) error {
	d := w.dc
	i := w.prefillQ[0]
	w.prefillQ = w.prefillQ[1:]
	r, st := &s.w.Requests[i], &s.reqs[i]
	w.admittedTokens -= st.work
	st.left = 0
	if len(w.prefillQ) > 0 {
		if next := &s.reqs[w.prefillQ[0]]; !next.prefillStarted {
			next.prefillStarted, next.prefillStartMs = true, now
		}
	}
	seqs := r.Seqs[:min(len(r.Seqs), s.cfg.KVBlocksPerWorker)]
	if got := w.pool.match(seqs[:st.pinned]); got != st.pinned {
		return fmt.Errorf("%w: dc %s worker %d request %d: %d of its %d pinned blocks are no longer cached",
			ErrEngine, d.name, w.member.Worker, i, st.pinned-got, st.pinned)
	}
	d.events = w.pool.register(d.events[:0], seqs, r.Locals, st.pinned, len(seqs))
	st.private -= len(seqs) - st.pinned
	st.pinned = len(seqs)
	if st.generated == 0 {
		st.firstTokenMs = now
		if s.policy.calibrates() && !s.cfg.NoCalibration && !s.shadow {
			s.q.push(now+st.rttMs/2, evFeedback, i, 1)
		}
	}
	st.generated++
	if err := s.publishEvents(d, now); err != nil {
		return err
	}
	if st.generated >= r.OutputTokens {
		return s.release(w, i, now)
	}
	w.decoding++
	w.ctx += float64(r.InputTokens + st.generated)
	st.v0, st.g0 = w.v, st.generated
	s.pushMark(w, i)
	return nil
}

// pushMark schedules decoding request i's next milestone on the decode
// clock: its last token, or the token that needs a new KV block.
func (s *simulation) pushMark(w *worker, i int) {
	r, st := &s.w.Requests[i], &s.reqs[i]
	next := r.OutputTokens
	if held := st.pinned + st.private; held < s.cfg.KVBlocksPerWorker {
		next = min(next, held*s.w.BlockSize-r.InputTokens+1)
	}
	next = max(next, st.g0)
	w.marks.push(mark{v: st.v0 + float64(next-st.g0), req: i, epoch: st.epoch})
}

// generatedAt is how many tokens decoding request i has generated at the
// worker's decode clock.
func (s *simulation) generatedAt(w *worker, i int) int {
	st := &s.reqs[i]
	return st.g0 + int(math.Round(w.v-st.v0))
}

// milestone handles decoding request i reaching its scheduled milestone:
// its last token, or a KV block it needs, preempting later-admitted
// sequences (at worst itself) when memory is short.
func (s *simulation) milestone(w *worker, i int, now float64) error {
	r, st := &s.w.Requests[i], &s.reqs[i]
	g := s.generatedAt(w, i)
	if g >= r.OutputTokens {
		st.generated = r.OutputTokens
		w.decoding--
		w.ctx -= float64(r.InputTokens + g)
		return s.release(w, i, now)
	}
	for w.pool.allocatable() < 1 && w.running() > 1 {
		victim := w.order[len(w.order)-1]
		if err := s.preempt(w, victim, now); err != nil {
			return err
		}
		if victim == i {
			return nil
		}
	}
	d := w.dc
	d.events = w.pool.grow(d.events[:0], 1)
	st.private++
	st.generated, st.v0, st.g0 = g, w.v, g
	s.pushMark(w, i)
	return s.publishEvents(d, now)
}

// preempt evicts admitted request i from w: its blocks are released, its
// progress lost, and it waits at the front of the queue to be recomputed.
func (s *simulation) preempt(w *worker, i int, now float64) error {
	r, st := &s.w.Requests[i], &s.reqs[i]
	if k := indexOf(w.prefillQ, i); k >= 0 {
		w.admittedTokens -= st.work
		w.prefillQ = append(w.prefillQ[:k], w.prefillQ[k+1:]...)
		if k == 0 && len(w.prefillQ) > 0 {
			if next := &s.reqs[w.prefillQ[0]]; !next.prefillStarted {
				next.prefillStarted, next.prefillStartMs = true, now
			}
		}
	} else {
		g := s.generatedAt(w, i)
		st.generated = g
		w.decoding--
		w.ctx -= float64(r.InputTokens + g)
		st.epoch++ // voids its milestone
	}
	w.order = removeValue(w.order, i)
	w.pool.release(r.Seqs, st.pinned, st.private)
	st.pinned, st.private = 0, 0
	st.preemptions++
	w.dc.stats.preemptions++
	seqs := r.Seqs[:min(len(r.Seqs), s.cfg.KVBlocksPerWorker)]
	context := r.InputTokens + st.generated
	st.estWork = context - min(w.pool.match(seqs)*s.w.BlockSize, context-1)
	w.waitingTokens += float64(st.estWork)
	w.waiting = append([]int{i}, w.waiting...)
	return nil
}

// release ends request i on w: its blocks are freed, the local router's
// bookkeeping closed, and the client side of the simulation told.
func (s *simulation) release(w *worker, i int, now float64) error {
	r, st := &s.w.Requests[i], &s.reqs[i]
	w.order = removeValue(w.order, i)
	w.pool.release(r.Seqs, st.pinned, st.private)
	w.routedBlocks -= int64(st.blocks)
	st.pinned, st.private = 0, 0
	return s.finish(i, now)
}

func indexOf(xs []int, x int) int {
	for k, v := range xs {
		if v == x {
			return k
		}
	}
	return -1
}

// removeValue removes the first x from xs, keeping the order.
func removeValue(xs []int, x int) []int {
	if k := indexOf(xs, x); k >= 0 {
		return append(xs[:k], xs[k+1:]...)
	}
	return xs
}

// mark is a decoding sequence's next milestone on its worker's decode
// clock; epoch voids it when the sequence was preempted meanwhile.
type mark struct {
	v     float64
	req   int
	epoch int
}

// markHeap is a binary min-heap of marks by (v, req).
type markHeap []mark

func (h markHeap) less(a, b int) bool {
	if h[a].v != h[b].v {
		return h[a].v < h[b].v
	}
	return h[a].req < h[b].req
}

func (h *markHeap) push(m mark) {
	*h = append(*h, m)
	x := *h
	for i := len(x) - 1; i > 0; {
		p := (i - 1) / 2
		if !x.less(i, p) {
			break
		}
		x[i], x[p] = x[p], x[i]
		i = p
	}
}

func (h *markHeap) pop() {
	x := *h
	last := len(x) - 1
	x[0] = x[last]
	x = x[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && x.less(l, m) {
			m = l
		}
		if r < last && x.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		x[i], x[m] = x[m], x[i]
		i = m
	}
	*h = x
}
