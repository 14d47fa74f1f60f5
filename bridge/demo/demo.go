package demo

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/goindex/goindex/bridge/consume"
	"github.com/goindex/goindex/bridge/natslink"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/route"
	"github.com/goindex/goindex/bridge/trace"
	"github.com/nats-io/nats.go"
)

// Stage statuses in a Summary.
const (
	StatusOK      = "ok"
	StatusSkipped = "skipped"
	StatusFailed  = "failed"
)

// progressEvery is how often the replay prints its progress.
const progressEvery = 2 * time.Second

// Summary is what a demo run did, stage by stage, with its main figures.
type Summary struct {
	Stages    []StageResult `json:"stages"`
	DCs       []DCResult    `json:"dcs"`
	Requests  int           `json:"requests"`  // replayed through the router
	Streamed  int           `json:"streamed"`  // of Requests, streamed (SSE)
	Fallbacks int           `json:"fallbacks"` // answers after a refused connect
	Showcased int           `json:"showcased"` // requests shown with their headers
	Prompts   int           `json:"prompts"`   // prompts checked against the replica
	// LibraryPrompts counts the prompts the library host probed and
	// scored (0 when the stage was skipped).
	LibraryPrompts int `json:"library_prompts"`
	// Overcounts counts the prompt × DC pairs the replica read deeper
	// than the DC's engines hold (fingerprint collisions); a pair below is
	// a failed replica stage.
	Overcounts int `json:"overcounts"`
	// Policies are the simulation's figures per policy, in table order.
	Policies []PolicyResult `json:"policies"`
	Report   string         `json:"report,omitempty"`   // the simulation's report.md
	WorkDir  string         `json:"work_dir,omitempty"` // kept temporary directory
	Seconds  float64        `json:"seconds"`
}

// StageResult is one stage's outcome.
type StageResult struct {
	Name    string  `json:"name"`
	Status  string  `json:"status"` // StatusOK, StatusSkipped or StatusFailed
	Detail  string  `json:"detail"`
	Seconds float64 `json:"seconds"`
}

// DCResult is one DC's part in the run.
type DCResult struct {
	ID            uint64  `json:"id"`
	Name          string  `json:"name"`
	GridRTTms     float64 `json:"grid_rtt_ms"`
	MeasuredRTTms float64 `json:"measured_rtt_ms"` // the consumer's last RTT to the DC's relay
	dcTally
	EventsPublished uint64 `json:"events_published"` // by the DC's mock engines
	EventsRelayed   uint64 `json:"events_relayed"`   // taken in by the DC's relay
}

// demo is one run's state. Stages run one after another on one goroutine;
// children report their death through cancel.
type demo struct {
	cfg    *resolved
	out    io.Writer
	dir    string
	sum    Summary
	cancel context.CancelCauseFunc

	wan      *wan
	hubNC    *nats.Conn
	fronts   []*frontend
	relays   []*child
	consumer *child
	router   *child
	base     string // the router's URL
	replica  string // the replica file
	view     *replicaView
	client   *http.Client
	replayed []prompt
}

// Run runs the demo: it starts a WAN of NATS servers, a relay (child
// process) and a stub frontend with mock engines per DC, the consumer and
// the router (children), replays the trace through the router, checks the
// replica against the engines, lets the host client score from the replica
// through the C library, shows a few requests with the router's diagnostic
// headers, runs the simulator on the whole grid and stops everything. It
// prints its progress to cfg.Out and returns the Summary, also when a stage
// fails (then with a *StageError); it removes every child process and
// temporary file before it returns.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	r, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	d := &demo{cfg: r, out: r.Out, client: &http.Client{}}
	ctx, d.cancel = context.WithCancelCause(ctx)
	defer d.cancel(nil)
	err = d.run(ctx)
	if stopErr := d.shutdown(err == nil); err == nil {
		err = stopErr
	}
	d.sum.Seconds = time.Since(began).Seconds()
	d.printSummary()
	return &d.sum, err
}

// run runs the stages until one fails.
func (d *demo) run(ctx context.Context) error {
	parent := d.cfg.WorkDir
	if parent == "" {
		parent = os.TempDir()
		if writableDir("/dev/shm", false) == nil {
			parent = "/dev/shm" // the replica is shared memory there, as in production
		}
	}
	dir, err := os.MkdirTemp(parent, "goindex-demo-*")
	if err != nil {
		return &StageError{Stage: "setup", Err: fmt.Errorf("temporary directory under %s: %w", parent, err)}
	}
	d.dir = dir
	d.replica = filepath.Join(dir, "goindex.replica")
	stages := []struct {
		name, title string
		fn          func(context.Context) (string, error)
	}{
		{"wan", "a NATS hub at the router site and a leaf server per DC, joined over links delayed by the grid's RTT", d.startWAN},
		{"dcs", "per DC: `goindex relay` (child process) and a stub frontend whose mock engines publish Dynamo KV events", d.startDCs},
		{"consumer", "`goindex consume`: one replica lane per DC in a shared-memory file", d.startConsumer},
		{"router", "`goindex route` in front of the DC frontends", d.startRouter},
		{"traffic", "the trace slice through the router: cache-, load- and RTT-aware placement", d.replay},
		{"replica", "the replica against the engines' exact caches", d.settleReplica},
		{"library", "libgoindex.so from a host program: attach the replica, probe and score real prompts", d.library},
		{"route", "a few requests through the router, with its diagnostic headers", d.showcase},
		{"sim", fmt.Sprintf("`goindex sim`: the same trace on all %d DCs of the grid under every policy", len(d.cfg.grid.Sites)), d.simulate},
	}
	for i, s := range stages {
		fmt.Fprintf(d.out, "\n== %d/%d %s: %s ==\n", i+1, len(stages)+1, s.name, s.title)
		t := time.Now()
		detail, err := s.fn(ctx)
		if err != nil && ctx.Err() != nil {
			err = context.Cause(ctx)
			if errors.Is(err, context.Canceled) {
				err = fmt.Errorf("interrupted: %w", err)
			}
		}
		res := StageResult{Name: s.name, Status: StatusOK, Detail: detail, Seconds: time.Since(t).Seconds()}
		switch {
		case errors.Is(err, ErrSkipped):
			res.Status, res.Detail = StatusSkipped, err.Error()
			fmt.Fprintf(d.out, "  SKIPPED: %v\n", err)
		case err != nil:
			res.Status, res.Detail = StatusFailed, err.Error()
			d.sum.Stages = append(d.sum.Stages, res)
			fmt.Fprintf(d.out, "  FAILED: %v\n", err)
			return &StageError{Stage: s.name, Err: err}
		}
		d.sum.Stages = append(d.sum.Stages, res)
	}
	return nil
}

// died is called when a child exits unexpectedly: it ends the run.
func (d *demo) died(err error) { d.cancel(err) }

func (d *demo) startWAN(ctx context.Context) (string, error) {
	w, err := startWAN(ctx, d.dir, d.cfg.sites, d.cfg.Wait)
	if err != nil {
		return "", err
	}
	d.wan = w
	if d.hubNC, err = natslink.Connect(w.hub.ClientURL(), "goindex demo", nil); err != nil {
		return "", err
	}
	fmt.Fprintf(d.out, "  hub %s at %s (the consumer and the router live here)\n", w.hub.ClientURL(), d.cfg.RouterSite)
	tw := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  dc\tid\tRTT to "+d.cfg.RouterSite+"\tleaf server\tJetStream domain\t")
	for _, s := range w.sites {
		fmt.Fprintf(tw, "  %s\t%d\t%v\t%s\t%s\t\n", s.name, s.id, s.rtt, s.leaf.ClientURL(), s.jsDomain)
	}
	tw.Flush()
	return fmt.Sprintf("hub and %d leaf servers", len(w.sites)), nil
}

func (d *demo) startDCs(ctx context.Context) (string, error) {
	c := d.cfg
	expected := max(4096, 2*c.WorkersPerDC*c.KVBlocksPerWorker)
	rate := strconv.FormatFloat(c.PrefillTokensPerMs, 'g', -1, 64)
	for i, s := range d.wan.sites {
		args := []string{"relay", "--nats", s.leaf.ClientURL(), "--js-domain", s.jsDomain, "--dc", strconv.FormatUint(uint64(s.id), 10),
			"--name", s.name, "--domain", strconv.Itoa(domain), "--prefix", prefix, "--namespace", namespace, "--component", s.component,
			"--expected-blocks", strconv.Itoa(expected), "--memory", "--load-every", loadEvery.String(), "--heartbeat-every", "250ms",
			"--prefill-tokens-per-ms", rate, "--queue-tokens-per-ms", strconv.FormatFloat(c.PrefillTokensPerMs*float64(c.WorkersPerDC), 'g', -1, 64),
			"--worker-capacity-blocks", strconv.Itoa(c.KVBlocksPerWorker), "--status-every", "0", "--json"}
		ch, err := startChild("relay "+s.name, c.Binary, args, d.died)
		if err != nil {
			return "", err
		}
		d.relays = append(d.relays, ch)
		names := relay.Names{Prefix: prefix, Domain: domain, DC: s.id}
		var rtt time.Duration
		err = poll(ctx, c.Wait, 20*time.Millisecond, func() error {
			t := time.Now()
			if _, err := d.hubNC.Request(names.PingSubject(), nil, time.Second); err != nil {
				return err
			}
			rtt = time.Since(t)
			return nil
		})
		if err != nil {
			return "", ch.failure("answered no ping through the hub: " + err.Error())
		}
		f, err := startFrontend(s, frontendConfig{workers: c.WorkersPerDC, capacity: c.KVBlocksPerWorker, blockSize: blockSize,
			rate: c.PrefillTokensPerMs, namespace: namespace, prefix: prefix, domain: domain, loadEvery: loadEvery,
			workerIDStart: uint64(i+1) * 1000})
		if err != nil {
			return "", err
		}
		d.fronts = append(d.fronts, f)
		fmt.Fprintf(d.out, "  relay %-4s pid %-7d goindex relay --dc %d --nats <%s leaf> --js-domain %s --component %s: ping through the hub %v\n",
			s.name, ch.cmd.Process.Pid, s.id, s.name, s.jsDomain, s.component, rtt.Round(100*time.Microsecond))
		fmt.Fprintf(d.out, "  front %-4s %s: %d mock engines × %d KV blocks of %d tokens, prefill %s tokens/ms, events on %s\n",
			s.name, f.url(), c.WorkersPerDC, c.KVBlocksPerWorker, blockSize, rate, f.subject)
	}
	return fmt.Sprintf("%d relays and frontends", len(d.relays)), nil
}

func (d *demo) startConsumer(ctx context.Context) (string, error) {
	ids := make([]string, len(d.wan.sites))
	for i, s := range d.wan.sites {
		ids[i] = strconv.FormatUint(uint64(s.id), 10)
	}
	args := []string{"consume", "--nats", d.wan.hub.ClientURL(), "--domain", strconv.Itoa(domain), "--prefix", prefix,
		"--dcs", strings.Join(ids, ","), "--shm", d.replica, "--ping-every", pingEvery.String(), "--status-every", "0", "--json"}
	ch, err := startChild("consumer", d.cfg.Binary, args, d.died)
	if err != nil {
		return "", err
	}
	d.consumer = ch
	fmt.Fprintf(d.out, "  goindex consume --dcs %s --shm %s (pid %d)\n", strings.Join(ids, ","), d.replica, ch.cmd.Process.Pid)
	all := uint64(1)<<len(d.wan.sites) - 1
	err = poll(ctx, d.cfg.Wait, 50*time.Millisecond, func() error {
		if d.view == nil {
			v, err := attachReplica(d.replica)
			if err != nil {
				return err
			}
			d.view = v
		}
		if got := d.view.r.Ready(); got != all {
			return fmt.Errorf("ready lanes %#x, want %#x", got, all)
		}
		for l := range d.wan.sites {
			li := d.view.r.Lane(l)
			if li.RTT == 0 || li.Load.ReceivedAt.IsZero() || li.Load.LiveWorkers != uint64(d.cfg.WorkersPerDC) {
				return fmt.Errorf("lane %d: RTT %v, load received %v with %d live workers", l, li.RTT, li.Load.ReceivedAt, li.Load.LiveWorkers)
			}
		}
		return nil
	})
	if err != nil {
		return "", ch.failure("replica not ready: " + err.Error())
	}
	for l, s := range d.wan.sites {
		li := d.view.r.Lane(l)
		fmt.Fprintf(d.out, "  lane %d %-4s snapshot installed; RTT %v measured (grid %v); load report: %d live workers, %d KV blocks capacity\n",
			l, s.name, li.RTT.Round(100*time.Microsecond), s.rtt, li.Load.LiveWorkers, li.Load.CapacityBlocks)
	}
	return fmt.Sprintf("%d lanes ready in %s", len(d.wan.sites), d.replica), nil
}

var listeningRE = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

func (d *demo) startRouter(ctx context.Context) (string, error) {
	var dcs []string
	for i, s := range d.wan.sites {
		dcs = append(dcs, fmt.Sprintf("%d:%s=%s", s.id, s.name, d.fronts[i].url()))
	}
	args := []string{"route", "--listen", "127.0.0.1:0", "--replica", d.replica, "--replica-poll", "200ms",
		"--block-size", strconv.Itoa(blockSize), "--prefill-tokens-per-ms", strconv.FormatFloat(d.cfg.PrefillTokensPerMs, 'g', -1, 64),
		"--dc", strings.Join(dcs, ","), "--json"}
	ch, err := startChild("router", d.cfg.Binary, args, d.died)
	if err != nil {
		return "", err
	}
	d.router = ch
	m, err := ch.waitLog(ctx, listeningRE, d.cfg.Wait)
	if err != nil {
		return "", err
	}
	d.base = m[1]
	var rd route.Readiness
	err = poll(ctx, d.cfg.Wait, 50*time.Millisecond, func() error {
		resp, err := d.client.Get(d.base + "/readyz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		rd = route.Readiness{}
		if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
			return err
		}
		if !rd.Ready || len(rd.Eligible) != len(dcs) {
			return fmt.Errorf("/readyz: %+v", rd)
		}
		return nil
	})
	if err != nil {
		return "", ch.failure("not ready: " + err.Error())
	}
	fmt.Fprintf(d.out, "  goindex route --policy ttft --block-size %d --replica %s --dc ID:NAME=URL … (pid %d) on %s\n",
		blockSize, d.replica, ch.cmd.Process.Pid, d.base)
	fmt.Fprintf(d.out, "  /readyz: ready, replica generation %d, eligible %s\n", rd.Generation, strings.Join(rd.Eligible, ", "))
	return "ready with every DC eligible", nil
}

func (d *demo) replay(ctx context.Context) (string, error) {
	reqs := d.cfg.reqs
	tokens := 0
	for _, r := range reqs {
		tokens += len(r.HashIDs) * blockSize
	}
	fmt.Fprintf(d.out, "  %s: %d requests (%d prompt tokens as %d-token blocks), %d clients in a closed loop, every %dth streamed\n",
		filepath.Base(d.cfg.Trace), len(reqs), tokens, blockSize, d.cfg.Concurrency, streamEvery)
	began := time.Now()
	progress := func(r *replayResult) {
		done, per := r.snapshot()
		fmt.Fprintf(d.out, "  %5.1f s: %d/%d answered; %s\n", time.Since(began).Seconds(), done, len(reqs), d.perDCLine(per))
	}
	res, err := replay(ctx, d.client, d.base, reqs, d.cfg.Concurrency, progressEvery, progress)
	if err != nil {
		return "", err
	}
	progress(res)
	d.sum.Requests, d.sum.Streamed, d.sum.Fallbacks = res.done, res.streamed, res.fallbacks
	var router, engine, prompt int64
	tw := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  dc\tRTT\trequests\tprompt tokens\trouter-expected cached\tengine cached\tKV events\t")
	for i, s := range d.wan.sites {
		t := res.perDC[s.name]
		if t == nil {
			t = &dcTally{}
		}
		router, engine, prompt = router+t.RouterCached, engine+t.EngineCached, prompt+t.PromptTokens
		fmt.Fprintf(tw, "  %s\t%v\t%d\t%d\t%d\t%d\t%d\t\n", s.name, s.rtt, t.Requests, t.PromptTokens, t.RouterCached, t.EngineCached, d.fronts[i].published.Load())
		d.sum.DCs = append(d.sum.DCs, DCResult{ID: uint64(s.id), Name: s.name, GridRTTms: float64(s.rtt) / float64(time.Millisecond),
			dcTally: *t})
	}
	tw.Flush()
	fmt.Fprintf(d.out, "  the router expected %.1f%% of the prompt tokens cached where it sent them; the engines had %.1f%% (%d answers streamed, %d fallbacks)\n",
		pct(router, prompt), pct(engine, prompt), res.streamed, res.fallbacks)
	seen := map[string]bool{}
	for i, r := range reqs {
		key := fmt.Sprint(r.HashIDs)
		if !seen[key] {
			seen[key] = true
			d.replayed = append(d.replayed, newPrompt(fmt.Sprintf("trace request %d", i), r.HashIDs))
		}
	}
	return fmt.Sprintf("%d requests in %.1f s", res.done, time.Since(began).Seconds()), nil
}

func pct(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// perDCLine formats per-DC request counts in site order.
func (d *demo) perDCLine(per map[string]int) string {
	parts := make([]string, len(d.wan.sites))
	for i, s := range d.wan.sites {
		parts[i] = fmt.Sprintf("%s %d", s.name, per[s.name])
	}
	return strings.Join(parts, ", ")
}

func (d *demo) settleReplica(ctx context.Context) (string, error) {
	t := time.Now()
	l, err := settle(ctx, d.view, d.fronts, d.replayed, d.cfg.Wait)
	if err != nil {
		return "", err
	}
	pairs := len(d.replayed) * len(d.fronts)
	d.sum.Prompts, d.sum.Overcounts = len(d.replayed), l.overcounts()
	fmt.Fprintf(d.out, "  settled after %.1f s: every lane applied its relay's last delta; for %d prompts × %d DCs the replica's\n",
		time.Since(t).Seconds(), len(d.replayed), len(d.fronts))
	fmt.Fprintf(d.out, "  depth is never below what the DC's engines hold (no false negatives); %d of %d pairs read deeper (fingerprint collisions)\n",
		d.sum.Overcounts, pairs)
	return fmt.Sprintf("%d prompt × DC pairs, none below exact, %d above", pairs, d.sum.Overcounts), nil
}

// freshPrompt returns a prompt of n hash ids no request of the trace uses.
func (d *demo) freshPrompt(n int) prompt {
	next := trace.MaxID(d.cfg.reqs) + 1_000_000
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = next + uint64(i)
	}
	return newPrompt(fmt.Sprintf("a fresh prompt (%d blocks no engine has seen)", n), ids)
}

// stream runs cmd with its stderr, and its stdout unless cmd.Stdout is
// set, printed line by line under prefix, and returns the last line printed
// and its exit.
func (d *demo) stream(cmd *exec.Cmd, prefix string) (string, error) {
	pr, pw := io.Pipe()
	if cmd.Stdout == nil {
		cmd.Stdout = pw
	}
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		pw.Close()
		return "", err
	}
	var last string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			last = sc.Text()
			fmt.Fprintf(d.out, "%s%s\n", prefix, last)
		}
		io.Copy(io.Discard, pr)
	}()
	err := cmd.Wait()
	pw.Close()
	<-done
	return last, err
}

func (d *demo) showcase(ctx context.Context) (string, error) {
	// The prompt held deepest by the DC farthest from the router site that
	// holds any, sent twice (plain, then streamed), and a fresh prompt.
	l := take(d.view, d.fronts, d.replayed)
	lanes := make([]int, len(d.wan.sites))
	for i := range lanes {
		lanes[i] = i
	}
	slices.SortStableFunc(lanes, func(a, b int) int { return cmp.Compare(d.wan.sites[b].rtt, d.wan.sites[a].rtt) })
	far := -1
	for _, lane := range lanes {
		for i := range d.replayed {
			if l.exact[i][lane] > 0 && (far < 0 || l.exact[i][lane] > l.exact[far][lane]) {
				far = i
			}
		}
		if far >= 0 {
			break
		}
	}
	type shot struct {
		p      prompt
		stream bool
		why    string
	}
	var shots []shot
	if far >= 0 {
		shots = append(shots, shot{d.replayed[far], false, "a prompt whose prefix the replay left cached"})
	}
	shots = append(shots, shot{d.freshPrompt(20), false, "a prompt no DC has seen"})
	if far >= 0 {
		shots = append(shots, shot{d.replayed[far], true, "the first prompt again, streamed: now cached where it was served"})
	}
	for _, s := range shots {
		before, err := settle(ctx, d.view, d.fronts, []prompt{s.p}, d.cfg.Wait)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(d.out, "  POST /v1/completions: %s, %s; %d blocks = %d tokens, stream %v\n", s.p.label, s.why, len(s.p.ids), len(s.p.ids)*blockSize, s.stream)
		fmt.Fprintf(d.out, "    replica depth per DC: %s\n", d.depthLine(before.replica[0]))
		a, err := completion(ctx, d.client, d.base, s.p.ids, s.stream, 6)
		if err != nil {
			return "", err
		}
		d.sum.Showcased++
		h := a.header
		fmt.Fprintf(d.out, "    %s: %s  %s: %s  %s: %s\n", route.HeaderDC, a.dc, route.HeaderPolicy, h.Get(route.HeaderPolicy),
			route.HeaderCachedTokens, h.Get(route.HeaderCachedTokens))
		fmt.Fprintf(d.out, "    %s: %s = %s: %s + %s: %s + %s: %s\n", route.HeaderCostMs, h.Get(route.HeaderCostMs), route.HeaderRTTMs,
			h.Get(route.HeaderRTTMs), route.HeaderQueueMs, h.Get(route.HeaderQueueMs), route.HeaderPrefillMs, h.Get(route.HeaderPrefillMs))
		if fb := h.Get(route.HeaderFallback); fb != "" {
			fmt.Fprintf(d.out, "    %s: %s\n", route.HeaderFallback, fb)
		}
		fmt.Fprintf(d.out, "    served by %s worker %s; its engine had %d tokens cached; text %q\n", a.servedBy, h.Get(HeaderWorker), a.engineCache, a.text)
		if s.stream {
			ms := make([]string, len(a.events))
			for i, e := range a.events {
				ms[i] = strconv.FormatInt(e.Milliseconds(), 10)
			}
			fmt.Fprintf(d.out, "    %d SSE events arrived at %s ms\n", len(a.events), strings.Join(ms, ", "))
		}
		lane := slices.IndexFunc(d.wan.sites, func(x *site) bool { return x.name == a.dc })
		want := min(before.replica[0][lane], len(s.p.ids)) * blockSize
		if a.routerCache != want || a.engineCache != before.exact[0][lane]*blockSize {
			return "", checkf("%s: the router expected %d cached tokens at %s and its engine had %d; the replica held %d blocks and the engines %d",
				s.p.label, a.routerCache, a.dc, a.engineCache, before.replica[0][lane], before.exact[0][lane])
		}
	}
	return fmt.Sprintf("%d requests; cached tokens match the replica and the engines", len(shots)), nil
}

// depthLine formats one prompt's per-lane depths.
func (d *demo) depthLine(depths []int) string {
	parts := make([]string, len(depths))
	for i, v := range depths {
		parts[i] = fmt.Sprintf("%s %d", d.wan.sites[i].name, v)
	}
	return strings.Join(parts, ", ")
}

// shutdown stops the router, the consumer and the relays (SIGINT, in that
// order), the frontends and the WAN, and removes the temporary directory.
// With check, it reads every child's final report and fails on counts
// that do not add up: each relay took in exactly the events its DC's
// engines published, with no gap, duplicate or malformed message.
func (d *demo) shutdown(check bool) error {
	var errs []error
	if check {
		fmt.Fprintf(d.out, "\n== 10/10 shutdown: SIGINT to every child, their final reports ==\n")
	}
	t := time.Now()
	if d.router != nil {
		errs = append(errs, d.stopRouter(check))
	}
	if d.consumer != nil {
		errs = append(errs, d.stopConsumer(check))
	}
	if d.view != nil {
		d.view.close()
	}
	for i, ch := range d.relays {
		errs = append(errs, d.stopRelay(ch, i, check))
	}
	for _, f := range d.fronts {
		f.close()
	}
	if d.hubNC != nil {
		d.hubNC.Close()
	}
	if d.wan != nil {
		d.wan.close()
	}
	if d.dir != "" {
		if d.cfg.Keep {
			d.keepLogs()
			d.sum.WorkDir = d.dir
		} else {
			os.RemoveAll(d.dir)
		}
	}
	if check {
		res := StageResult{Name: "shutdown", Status: StatusOK, Detail: "every child stopped cleanly; counts add up", Seconds: time.Since(t).Seconds()}
		if err := errors.Join(errs...); err != nil {
			res.Status, res.Detail = StatusFailed, err.Error()
			fmt.Fprintf(d.out, "  FAILED: %v\n", err)
		}
		d.sum.Stages = append(d.sum.Stages, res)
	}
	if err := errors.Join(errs...); err != nil && check {
		return &StageError{Stage: "shutdown", Err: err}
	}
	return nil
}

// keepLogs writes every child's captured stderr and stdout into the work
// directory.
func (d *demo) keepLogs() {
	all := append(slices.Clone(d.relays), d.consumer, d.router)
	for _, ch := range all {
		if ch != nil {
			name := strings.ReplaceAll(ch.name, " ", "-")
			_ = os.WriteFile(filepath.Join(d.dir, name+".log"), []byte(ch.stderr.String()+ch.stdout.String()), 0o644)
		}
	}
}

// stopChild stops a child; with check, a non-clean exit is an error.
func stopChild(ch *child, check bool) error {
	if err := ch.stop(); err != nil && check {
		return ch.failure("did not exit cleanly after SIGINT")
	}
	return nil
}

func (d *demo) stopRouter(check bool) error {
	if err := stopChild(d.router, check); err != nil || !check {
		return err
	}
	var rep struct {
		Stats route.Stats `json:"stats"`
	}
	if err := json.Unmarshal([]byte(d.router.stdout.String()), &rep); err != nil {
		return checkf("router's final report %q: %v", d.router.stdout.String(), err)
	}
	st := rep.Stats
	want := uint64(d.sum.Requests + d.sum.Showcased)
	fmt.Fprintf(d.out, "  router: %d completion requests, routed %s; %d fallbacks, %d unroutable, %d upstream errors\n",
		st.Requests, d.routedLine(st.Routed), st.Fallbacks, st.Unroutable, st.UpstreamErrors)
	if st.Requests != want || st.Unroutable != 0 || st.UpstreamErrors != 0 || st.Rejected != 0 {
		return checkf("router counted %d requests (%d rejected, %d unroutable, %d upstream errors), want %d answered", st.Requests,
			st.Rejected, st.Unroutable, st.UpstreamErrors, want)
	}
	return nil
}

func (d *demo) routedLine(routed map[string]uint64) string {
	per := map[string]int{}
	for k, v := range routed {
		per[k] = int(v)
	}
	return d.perDCLine(per)
}

func (d *demo) stopConsumer(check bool) error {
	// The consumer's final report comes after its lanes closed; the
	// sequence each lane installed is read from the replica before.
	var installed []uint64
	if d.view != nil && d.wan != nil {
		for l := range d.wan.sites {
			installed = append(installed, d.view.r.Lane(l).Installed)
		}
	}
	if err := stopChild(d.consumer, check); err != nil || !check {
		return err
	}
	var rep struct {
		Lanes []consume.LaneStatus `json:"lanes"`
	}
	if err := json.Unmarshal([]byte(d.consumer.stdout.String()), &rep); err != nil {
		return checkf("consumer's final report %q: %v", d.consumer.stdout.String(), err)
	}
	for _, st := range rep.Lanes {
		seq := st.Installed
		if st.Lane >= 0 && st.Lane < len(installed) {
			seq = installed[st.Lane]
		}
		fmt.Fprintf(d.out, "  consumer lane %d dc %d: installed sequence %d, %d snapshots, %d deltas, %d faults, %d resyncs, RTT %v\n",
			st.Lane, st.DC, seq, st.Snapshots, st.Deltas, st.Faults, st.Resyncs, st.RTT.Round(100*time.Microsecond))
		if st.Lane < len(d.sum.DCs) {
			d.sum.DCs[st.Lane].MeasuredRTTms = float64(st.RTT) / float64(time.Millisecond)
		}
	}
	if len(rep.Lanes) != len(d.wan.sites) {
		return checkf("consumer reported %d lanes, want %d", len(rep.Lanes), len(d.wan.sites))
	}
	for _, st := range rep.Lanes {
		if st.Faults != 0 {
			return checkf("consumer lane %d (dc %d) faulted %d times (last: %s)", st.Lane, st.DC, st.Faults, st.LastFault)
		}
	}
	return nil
}

func (d *demo) stopRelay(ch *child, i int, check bool) error {
	if err := stopChild(ch, check); err != nil || !check {
		return err
	}
	var rep struct {
		Pools []relay.PoolStatus `json:"pools"`
	}
	if err := json.Unmarshal([]byte(ch.stdout.String()), &rep); err != nil || len(rep.Pools) != 1 {
		return checkf("%s's final report %q: %v", ch.name, ch.stdout.String(), err)
	}
	p := rep.Pools[0]
	published := d.fronts[i].published.Load()
	fmt.Fprintf(d.out, "  relay %-4s %d KV events in (%d published by its engines), %d gaps, %d duplicates; %d blocks tracked, filter load %.3f, %d deltas, %d snapshots\n",
		d.wan.sites[i].name, p.Intake.Events, published, p.Intake.Gaps, p.Intake.Duplicates, p.Producer.TrackedBlocks, p.Producer.LoadFactor,
		p.Publisher.LastSequence, p.Snapshots)
	if i < len(d.sum.DCs) {
		d.sum.DCs[i].EventsPublished, d.sum.DCs[i].EventsRelayed = published, p.Intake.Events
	}
	if p.Intake.Events != published || p.Intake.Gaps != 0 || p.Intake.Duplicates != 0 || p.Intake.Malformed != 0 || p.Rejected != 0 {
		return checkf("%s took in %d events (%d gaps, %d duplicates, %d malformed, %d rejected), its engines published %d",
			ch.name, p.Intake.Events, p.Intake.Gaps, p.Intake.Duplicates, p.Intake.Malformed, p.Rejected, published)
	}
	return nil
}

// printSummary prints the stage table and the main figures.
func (d *demo) printSummary() {
	fmt.Fprintf(d.out, "\n== summary (%.1f s) ==\n", d.sum.Seconds)
	tw := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', 0)
	for _, s := range d.sum.Stages {
		detail := s.Detail
		if i := strings.IndexByte(detail, '\n'); i >= 0 {
			detail = detail[:i] + " …"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%.1f s\t%s\n", s.Name, s.Status, s.Seconds, detail)
	}
	tw.Flush()
	if len(d.sum.Policies) > 0 {
		fmt.Fprintf(d.out, "\n  the trace slice simulated on the %d-DC grid (router at %s), per routing policy:\n", len(d.cfg.grid.Sites), d.cfg.RouterSite)
		d.printPolicies()
	}
	if d.sum.Report != "" {
		fmt.Fprintf(d.out, "  simulation report with charts: %s\n", d.sum.Report)
	}
	if d.sum.WorkDir != "" {
		fmt.Fprintf(d.out, "  kept the work directory (logs, stores, replica): %s\n", d.sum.WorkDir)
	}
}
