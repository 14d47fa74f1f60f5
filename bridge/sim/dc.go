package sim

import (
	"errors"
	"fmt"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/publish"
	"github.com/goindex/goindex/goindex/score"
)

// domain is the one routing domain every simulated pool belongs to.
const domain relayproto.DomainID = 1

// dc is one simulated data center: its workers, Dynamo's in-DC KV router
// (the credit rule over an exact radix index of the DC's workers, fed by
// their events as they happen), and the DC's relay: one CKF producer for
// the pool, a leased publisher whose frames travel the WAN link to the
// router site, and periodic load reports on the same link.
type dc struct {
	idx  int
	site int // grid index of its site
	name string

	workers []*worker
	index   *radix.Index  // exact and current: the local router's view
	local   *score.Scorer // the local router's credit rule

	prod     *ckf.Producer
	pub      *publish.Publisher
	identity relayproto.ProducerIdentity
	timerGen int                // the armed cadence timer's generation; a boundary disarms it
	images   []relayproto.Image // drain scratch
	events   []kv.Event         // Engine.Serve scratch
	window   []kv.Event         // events since the last boundary, delivered with its batch to the router's audit index
	links    [][]linkItem       // per router, the frames on the WAN link to it, oldest first
	active   int                // requests routed here and not finished
	speed    float64            // its workers' prefill rate over the configured one
	stats    dcStats
}

// dcStats are a DC's counters for the result.
type dcStats struct {
	requests     int
	promptTokens int64
	hitTokens    int64
	rttMs        float64 // matrix RTTs of the requests served, summed
	preemptions  int
	relay        RelayStats
}

func newDC(idx, site int, name string, workers int, c *Config, f *ckf.Format) (*dc, error) {
	local, err := score.New(score.Config{Policy: score.Credit, BlockSize: c.BlockSize})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	prod, err := ckf.New(ckf.Config{Format: f})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	d := &dc{idx: idx, site: site, name: name, index: radix.New(radix.Config{}), local: local, prod: prod, speed: orOne(c.DCSpeed[name])}
	d.identity = relayproto.ProducerIdentity{
		Pool:        relayproto.PoolID{Domain: domain, DC: relayproto.DCID(idx + 1)},
		Incarnation: 1, LayoutGeneration: 1, Format: relayproto.FormatOf(f),
	}
	d.workers = make([]*worker, workers)
	return d, nil
}

// arrive is the in-DC router: request i reaches DC d and goes to the
// worker with the lowest credit cost over the exact radix overlaps and
// each worker's routed load.
func (s *simulation) arrive(d *dc, i int, now float64) error {
	r, st := &s.w.Requests[i], &s.reqs[i]
	depth := s.workerDepth[:len(d.workers)]
	clear(depth)
	if s.shadow {
		// A shadow has no index: each pool's own match is what the index
		// says of it (checked below on every real arrival).
		for k, w := range d.workers {
			depth[k] = w.pool.match(r.Seqs)
		}
	} else {
		s.overlaps = d.index.Match(s.overlaps[:0], r.Locals)
		for _, o := range s.overlaps {
			depth[o.Member.Worker] = o.Blocks
		}
		for k, w := range d.workers {
			if got := w.pool.match(r.Seqs); got != depth[k] {
				return fmt.Errorf("%w: dc %s worker %d: the local index matches %d blocks of request %d, its pool %d", ErrEngine, d.name, k, depth[k], i, got)
			}
		}
	}
	cands := s.localCands[:0]
	for k, w := range d.workers {
		s.advance(w, now)
		cands = append(cands, score.Candidate{
			ID: uint64(k), CachedBlocks: depth[k], HasLoad: true,
			ActivePrefillTokens: uint64(w.queuedTokens(s)), ActiveDecodeBlocks: uint64(w.routedBlocks),
		})
	}
	s.localCands = cands
	res, err := d.local.Score(score.Request{ISLTokens: r.InputTokens}, cands, s.draw(i, drawLocal))
	if err != nil {
		return fmt.Errorf("%w: dc %s local router: %w", ErrEngine, d.name, err)
	}
	st.worker = res.Index
	st.estWork = r.InputTokens - min(depth[res.Index]*s.w.BlockSize, r.InputTokens-1)
	st.arriveMs = now
	d.active++
	d.stats.requests++
	return s.enqueue(d.workers[res.Index], i, now)
}

// publishEvents applies the events of d.events, in order, to the DC's exact
// index and its CKF producer, and follows the producer's cadence: a
// boundary when N events are pending, a flush timer when a window opens.
func (s *simulation) publishEvents(d *dc, now float64) error {
	if s.shadow {
		return nil // a shadow's DC publishes nothing
	}
	for k := range d.events {
		ev := &d.events[k]
		if err := d.index.Apply(ev); err != nil {
			return fmt.Errorf("%w: dc %s index: %v event of %v: %w", ErrEngine, d.name, ev.Kind, ev.Member, err)
		}
		step, err := d.prod.Apply(ev)
		// A capacity omission is the CKF's documented, counted loss (a
		// stable false negative), not a failure of the path.
		if err != nil && !errors.Is(err, ckf.ErrCapacityExhausted) {
			return fmt.Errorf("%w: dc %s producer: %v event of %v: %w", ErrEngine, d.name, ev.Kind, ev.Member, err)
		}
		d.window = append(d.window, *ev)
		switch step {
		case ckf.StepPublish:
			if err := s.boundary(d, now); err != nil {
				return err
			}
		case ckf.StepArmTimer:
			d.timerGen++
			s.q.push(now+ms(d.prod.FlushAfter()), evFlush, d.idx, d.timerGen)
		}
	}
	return nil
}

// boundary is a publication boundary of DC d: the producer's net-changed
// buckets go out as one delta (if any changed), followed on the link by
// the window's events for the router's audit index, and the flush timer
// is disarmed.
func (s *simulation) boundary(d *dc, now float64) error {
	d.timerGen++
	d.images = d.prod.Drain(d.images[:0])
	if _, err := d.pub.Publish(d.images); err != nil {
		return fmt.Errorf("%w: dc %s publish: %w", ErrEngine, d.name, err)
	}
	s.sendOnLink(d, now, nil, d.window)
	d.window = nil
	return nil
}

// loadReport samples DC d's load and sends it to the router as a
// relayproto LoadReport frame, as the production relay does
// (bridge/relay's pool.reportLoad): queued prefill work, the blocks of
// every routed request not finished (Dynamo's active decode blocks),
// capacity, and the throughput model's figures copied from the
// configuration, not measured: one worker's compute rate and the DC's
// (workers × that). The relay measures no rate, so decode interference,
// a DC faster or slower than configured (Config.DCSpeed) and the KV's
// release rate are the router's to estimate.
func (s *simulation) loadReport(d *dc, now float64) error {
	var queued float64
	var routed, cached uint64
	for _, w := range d.workers {
		s.advance(w, now)
		queued += w.queuedTokens(s)
		routed += uint64(w.routedBlocks)
		cached += uint64(w.pool.cached())
	}
	interval := ms(s.cfg.LoadReportInterval)
	n := len(d.workers)
	r := relayproto.LoadReport{
		Identity:            d.identity,
		Sequence:            d.pub.Status().LastSequence,
		TimestampUnixNano:   uint64(now * 1e6),
		IntervalMs:          uint32(interval),
		ActiveBlocks:        cached,
		QueuedPrefillTokens: uint64(queued),
		ActiveDecodeBlocks:  routed,
		LiveWorkers:         uint32(n),
		CapacityBlocks:      uint64(n * s.cfg.KVBlocksPerWorker),
		PrefillTokensPerMs:  s.cfg.PrefillTokensPerMs,
		QueueTokensPerMs:    float64(n) * s.cfg.PrefillTokensPerMs,
	}
	return s.sendFrame(d, now, &r)
}

// orOne is v, or 1 when v is 0 (unset).
func orOne(v float64) float64 {
	if v == 0 {
		return 1
	}
	return v
}
