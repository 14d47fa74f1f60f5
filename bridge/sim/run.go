package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/score"
)

// Report is the outcome of Run: the configuration with its defaults filled
// in, one Result per policy in the order the policies were given, and the
// workload's Ideal at the configured prefill rate. Warmup is the number of
// requests at the start of the trace left out of the per-request figures
// (Config.Warmup resolved).
type Report struct {
	Config  Config
	Results []*Result
	Ideal   Ideal
	Warmup  int
	// Clients describes where the requests came from (sites and shares);
	// SingleDCSite is the site of the single-DC baselines' DC, the one
	// with the least mean client RTT.
	Clients      string
	SingleDCSite string
}

// Run simulates w once per policy of cfg, each on identical input (the
// same requests, arrivals, jitter draws and tie-break streams), and
// returns their results. Policies run concurrently on up to GOMAXPROCS
// goroutines; each run is deterministic and independent of the others, so
// the same cfg and w give identical results whatever the parallelism. An
// error stops every run: ErrConfig or ErrWorkload for bad input, ErrEngine
// if the engine path failed, or the context's error.
func Run(ctx context.Context, cfg Config, w *Workload) (*Report, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if w == nil || len(w.Requests) == 0 {
		return nil, fmt.Errorf("%w: no requests", ErrWorkload)
	}
	if w.BlockSize != c.BlockSize {
		return nil, fmt.Errorf("%w: workload hashed for %d-token blocks, config has %d", ErrConfig, w.BlockSize, c.BlockSize)
	}
	warm, err := c.warmupFor(len(w.Requests))
	if err != nil {
		return nil, err
	}
	topo, err := newTopology(&c, len(w.Requests))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rep := &Report{Config: c, Results: make([]*Result, len(c.Policies)), Ideal: ideal(w, c.PrefillTokensPerMs, warm), Warmup: warm,
		Clients: topo.sharesText(c.Grid), SingleDCSite: c.Grid.Sites[topo.singleDC]}
	errs := make([]error, len(c.Policies))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for k, p := range c.Policies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				errs[k] = ctx.Err()
				return
			}
			rep.Results[k], errs[k] = runPolicy(ctx, &c, w, p, &topo, warm)
			if errs[k] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	// Report the root cause, not the cancellations it caused.
	var first error
	for k, err := range errs {
		if err == nil {
			continue
		}
		err = fmt.Errorf("%v: %w", c.Policies[k], err)
		if first == nil || errors.Is(first, context.Canceled) {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	return rep, nil
}

// reqState is one request's fate in one policy's run. Times are ms of
// simulated time.
type reqState struct {
	dc, worker     int
	believed       int // prefix depth the global router believed, blocks
	est            score.Parts
	raw            score.Parts // est's terms unweighted by calibration
	hasEst         bool        // est holds the TTFT model's estimate for the chosen DC
	rttMs          float64     // round trip paid, jitter included
	blocks         int         // KV blocks it holds when its decode ends (the local router's load)
	estWork        int         // the local router's estimate of its prefill work, tokens
	jitter         float64     // multiplier of its prefill work (Config.PrefillJitter)
	hitBlocks      int         // cached prefix at its first admission
	hitTokens      int
	uncached       int
	sentMs         float64 // client → router (the client is at the router site)
	arriveMs       float64 // at the DC
	prefillStartMs float64 // its first prefill reached the head of the queue
	firstTokenMs   float64 // first prefill end, at the DC
	doneMs         float64 // last token at the client
	done           bool

	// The worker model's state (worker.go).
	admitted, prefillStarted bool
	work, left               float64 // prefill work of the current admission, and what is left, tokens
	generated                int     // tokens generated so far
	pinned, private          int     // KV blocks held: registered prompt blocks pinned, private blocks
	v0                       float64 // decode clock when generated was g0
	g0                       int
	epoch                    int // voids milestones on preemption
	preemptions              int

	foreseenMs float64 // the clairvoyant's TTFT for it at the DC it chose
	regretMs   float64 // Config.Foresight: its true TTFT over the least of any DC's
}

// ttftMs is the time to first token at the client: the request's trip to
// the DC, queueing, the prefill of its uncached tokens, and the first
// token's trip back.
func (st *reqState) ttftMs() float64 { return st.firstTokenMs + st.rttMs/2 - st.sentMs }

// simulation is one policy's run: its own DCs, engines, producers, links,
// consumer and replica, driven by one event queue.
type simulation struct {
	cfg      *Config
	w        *Workload
	policy   Policy
	topo     *topology
	format   *ckf.Format // every pool's and lane's
	dcs      []*dc
	workers  []*worker // every DC's workers, indexed by worker.id
	routers  []*router // one per client site
	routerAt []int     // per grid site, its router's index, or -1
	nearest  []int     // per grid site, the index of the DC nearest it
	q        queue
	now      float64
	reqs     []reqState

	startMs   float64 // traffic starts once every lane is ready
	next      int     // closed loop: the next request a free client sends
	completed int
	done      bool

	pcg *rand.PCG
	rng *rand.Rand

	acc       Accuracy
	fallbacks int
	samples   LoadSeries

	overlaps    []kv.Overlap
	workerDepth []int
	localCands  []score.Candidate

	// shadow marks a clairvoyant's shadow (clairvoyant.go): DCs cloned
	// without index, producer or links, requests that end without a
	// client; shade is the run's shadow, reused for every decision.
	shadow bool
	shade  *simulation
	// truth and sight are Config.Foresight's: every DC's true TTFT for
	// the request being routed, and the model's errors so far.
	truth []truth
	sight []sightError
}

// Draw stages: each request's random draws come from its own stream, one
// per stage, so a policy's choices never shift another request's draws.
const (
	drawGlobal = iota
	drawLocal
	drawJitter
	drawService
)

// draw returns the random stream of request i at stage; the stream depends
// only on the seed, i and stage.
func (s *simulation) draw(i, stage int) *rand.Rand {
	s.pcg.Seed(s.cfg.Seed, uint64(i)*4+uint64(stage))
	return s.rng
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// newFormat returns the CKF format every pool and lane of a run shares,
// sized for a full DC of workers: workers × KVBlocksPerWorker blocks at
// ≤ 80% load (ckf.BucketCount), the DC-wide distinct blocks never
// exceeding the workers' capacity.
func newFormat(c *Config, workers int) (*ckf.Format, error) {
	buckets, err := ckf.BucketCount(uint64(workers) * uint64(c.KVBlocksPerWorker))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	f, err := ckf.NewFormat(ckf.DefaultSeed, buckets)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return f, nil
}

// layout returns the sites of policy p's DCs and the workers of each: one
// DC at every grid site with WorkersPerDC workers, except for single-dc,
// whose one DC at the single-DC site holds the whole grid's workers, so
// that every policy has the same capacity.
func (c *Config) layout(p Policy, t *topology) (sites []int, workers int) {
	if p == SingleDC {
		return []int{t.singleDC}, c.WorkersPerDC * len(c.Grid.Sites)
	}
	sites = make([]int, len(c.Grid.Sites))
	for k := range sites {
		sites[k] = k
	}
	return sites, c.WorkersPerDC
}

func newSimulation(c *Config, w *Workload, p Policy, t *topology) (*simulation, error) {
	g := c.Grid
	sites, workers := c.layout(p, t)
	f, err := newFormat(c, workers)
	if err != nil {
		return nil, err
	}
	s := &simulation{cfg: c, w: w, policy: p, topo: t, format: f, reqs: make([]reqState, len(w.Requests)),
		pcg: rand.NewPCG(0, 0), workerDepth: make([]int, workers), routerAt: make([]int, len(g.Sites)),
		nearest: make([]int, len(g.Sites))}
	s.rng = rand.New(s.pcg)
	var pools []relayproto.PoolID
	home := 0
	for k, site := range sites {
		d, err := newDC(k, site, g.Sites[site], workers, c, f)
		if err != nil {
			return nil, err
		}
		if p == SingleDC {
			// The grid's workers, with their speeds: the mean speed.
			d.speed = 0
			for _, name := range g.Sites {
				d.speed += orOne(c.DCSpeed[name]) / float64(len(g.Sites))
			}
		}
		for j := range d.workers {
			d.workers[j] = newWorker(d, len(s.workers), j, c)
			s.workers = append(s.workers, d.workers[j])
		}
		if site == t.singleDC {
			home = k
		}
		s.dcs = append(s.dcs, d)
		pools = append(pools, d.identity.Pool)
	}
	for site := range g.Sites {
		s.routerAt[site] = -1
		for k, d := range s.dcs {
			if g.RTTms[site][d.site] < g.RTTms[site][s.dcs[s.nearest[site]].site] {
				s.nearest[site] = k
			}
		}
	}
	for _, site := range t.sites {
		rt, err := newRouter(c, p, len(s.routers), site, uint64(home), f, pools)
		if err != nil {
			return nil, err
		}
		s.routerAt[site] = rt.idx
		s.routers = append(s.routers, rt)
	}
	for _, d := range s.dcs {
		d.links = make([][]linkItem, len(s.routers))
	}
	return s, nil
}

// rtt is the matrix round trip between grid site site and DC d.
func (s *simulation) rtt(site int, d *dc) float64 { return s.cfg.Grid.RTTms[site][d.site] }

func runPolicy(ctx context.Context, c *Config, w *Workload, p Policy, t *topology, warm int) (*Result, error) {
	began := time.Now()
	s, err := newSimulation(c, w, p, t)
	if err != nil {
		return nil, err
	}
	if err := s.start(); err != nil {
		return nil, err
	}
	if err := s.loop(ctx); err != nil {
		return nil, err
	}
	for _, d := range s.dcs {
		if err := s.verify(d); err != nil {
			return nil, err
		}
		s.acc.LanesConverged++
	}
	res := s.result(warm)
	res.WallSeconds = time.Since(began).Seconds()
	if c.Progress != nil {
		c.Progress(Progress{Policy: p, Completed: s.completed, Total: len(s.reqs), SimMs: s.now - s.startMs, Done: true})
	}
	return res, nil
}

// start connects every DC's relay to its lane at time 0, schedules the
// load reports and samples, and the clients' first sends once every
// snapshot, first load report and anything published at time 0 has
// crossed the WAN.
func (s *simulation) start() error {
	farthest := 0.0
	for _, d := range s.dcs {
		if err := s.connect(d); err != nil {
			return err
		}
		s.q.push(0, evLoadReport, d.idx, 0)
		for _, rt := range s.routers {
			farthest = max(farthest, s.rtt(rt.site, d)/2+ms(d.prod.FlushAfter()))
		}
	}
	s.startMs = math.Ceil(farthest) + 1
	s.q.push(s.startMs, evSample, 0, 0)
	n := len(s.reqs)
	if s.cfg.OpenLoop {
		for i, r := range s.w.Requests {
			s.q.push(s.startMs+r.ArrivalMs*s.cfg.TimeScale, evSend, i, 0)
		}
		s.next = n
		return nil
	}
	s.next = min(s.cfg.Concurrency, n)
	for i := range s.next {
		s.q.push(s.startMs, evSend, i, 0)
	}
	return nil
}

// ctxCheckEvents is how many events run between context checks.
const ctxCheckEvents = 4096

// loop runs events until none is left: every request has completed, every
// stream has drained and every frame has been delivered.
func (s *simulation) loop(ctx context.Context) error {
	for n := 0; s.q.len() > 0; n++ {
		if n%ctxCheckEvents == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		e := s.q.pop()
		s.now = e.at
		if err := s.fire(e); err != nil {
			return err
		}
	}
	if s.completed != len(s.reqs) {
		return fmt.Errorf("%w: the queue ran dry with %d of %d requests completed", ErrEngine, s.completed, len(s.reqs))
	}
	return nil
}

func (s *simulation) fire(e event) error {
	now := s.now
	switch e.kind {
	case evSend:
		return s.send(e.a, now)
	case evArrive:
		return s.arrive(s.dcs[e.b], e.a, now)
	case evWorker:
		return s.step(s.workers[e.a], e.b, now)
	case evDeliver:
		return s.deliver(s.dcs[e.a], s.routers[e.b])
	case evFlush:
		if d := s.dcs[e.a]; e.b == d.timerGen && d.prod.PendingEvents() > 0 {
			return s.boundary(d, now)
		}
	case evLoadReport:
		if s.done {
			return nil
		}
		s.q.push(now+ms(s.cfg.LoadReportInterval), evLoadReport, e.a, 0)
		return s.loadReport(s.dcs[e.a], now)
	case evFeedback:
		s.feedback(e.a, e.b == 1)
	case evSample:
		if !s.done {
			s.sample(now)
			s.q.push(now+ms(s.cfg.SampleInterval), evSample, 0, 0)
		}
	}
	return nil
}

// send is request i leaving its client: the router of the client's site
// picks its DC and the request crosses the WAN, paying the matrix RTT
// between the two sites plus its own jitter.
func (s *simulation) send(i int, now float64) error {
	st := &s.reqs[i]
	st.sentMs = now
	st.blocks = s.w.Requests[i].totalBlocks(s.w.BlockSize)
	st.jitter = 1
	if j := s.cfg.PrefillJitter; j > 0 {
		st.jitter = 1 + j*(2*s.draw(i, drawService).Float64()-1)
	}
	rt := s.routers[s.routerAt[s.topo.origin[i]]]
	l, believed, err := s.decide(rt, i, now)
	if err != nil {
		return err
	}
	st.dc, st.believed = l, believed
	st.rttMs = s.rtt(rt.site, s.dcs[l]) + s.draw(i, drawJitter).Float64()*ms(s.cfg.RTTJitter)
	s.dcs[l].stats.rttMs += s.rtt(rt.site, s.dcs[l])
	s.routed(rt, i, l, believed, now)
	s.q.push(now+st.rttMs/2, evArrive, i, l)
	return nil
}

// finish is request i's last token: the worker releases it, the client
// gets the token one way later and (closed loop) sends the next request of
// the trace. After the last request every relay drains.
func (s *simulation) finish(i int, now float64) error {
	st := &s.reqs[i]
	if st.done {
		return fmt.Errorf("%w: request %d completed twice", ErrEngine, i)
	}
	d := s.dcs[st.dc]
	d.active--
	st.done = true
	if s.shadow {
		return nil // no client: nothing follows from it
	}
	st.doneMs = now + st.rttMs/2
	if s.policy.calibrates() && !s.cfg.NoCalibration {
		s.q.push(st.doneMs, evFeedback, i, 0)
	}
	d.stats.promptTokens += int64(s.w.Requests[i].InputTokens)
	d.stats.hitTokens += int64(st.hitTokens)
	s.completed++
	if !s.cfg.OpenLoop && s.next < len(s.reqs) {
		s.q.push(st.doneMs, evSend, s.next, 0)
		s.next++
	}
	if p := s.cfg.Progress; p != nil && s.completed%s.cfg.ProgressEvery == 0 {
		p(Progress{Policy: s.policy, Completed: s.completed, Total: len(s.reqs), SimMs: now - s.startMs})
	}
	if s.completed < len(s.reqs) {
		return nil
	}
	s.done = true
	for _, d := range s.dcs {
		if err := s.drain(d); err != nil {
			return err
		}
	}
	return nil
}

// sample records every DC's requests in flight (routed, not finished).
func (s *simulation) sample(now float64) {
	s.samples.AtSeconds = append(s.samples.AtSeconds, (now-s.startMs)/1000)
	if s.samples.Active == nil {
		s.samples.Active = make([][]int, len(s.dcs))
	}
	for k, d := range s.dcs {
		s.samples.Active[k] = append(s.samples.Active[k], d.active)
	}
	if !s.policy.calibrates() || s.cfg.NoCalibration {
		return
	}
	if s.samples.PrefillWeight == nil {
		s.samples.PrefillWeight = make([][]float64, len(s.dcs))
	}
	for k := range s.dcs {
		// Each router's factor, weighted by the requests it learned from.
		sum, n := 0.0, 0
		for _, rt := range s.routers {
			obs := rt.cal[k].Observations()
			sum += float64(obs) * rt.cal[k].Weights().Prefill
			n += obs
		}
		s.samples.PrefillWeight[k] = append(s.samples.PrefillWeight[k], ratio(sum, float64(n)))
	}
}
