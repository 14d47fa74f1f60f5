package demo

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/goindex/goindex/bridge/sim"
	"github.com/goindex/goindex/bridge/trace"
)

// Defaults of Config.
const (
	// DefaultSites are the DCs: the router site itself, two European sites
	// 13–16 ms away, one transatlantic (94 ms) and one in Asia (158 ms).
	DefaultSites             = "fra,lon,waw,iad,sin"
	DefaultRouterSite        = "fra"
	DefaultConcurrency       = 16
	DefaultWorkersPerDC      = 2
	DefaultKVBlocksPerWorker = 1024
	// DefaultPrefillTokensPerMs makes the conversation slice's ~5M prompt
	// tokens about 10 s of work for 5 DCs × 2 workers.
	DefaultPrefillTokensPerMs = 50
	DefaultWait               = 30 * time.Second
)

// Fixed parameters of the demo's deployment.
const (
	blockSize   = trace.TokensPerID // one Mooncake hash id is one KV block
	namespace   = "dynamo"
	prefix      = "goindex"
	domain      = 1
	loadEvery   = 100 * time.Millisecond
	pingEvery   = 250 * time.Millisecond
	maxSites    = 16
	maxRequests = 1 << 20
)

// Config configures a demo run.
type Config struct {
	// Binary is the goindex executable the relays, the consumer, the router
	// and the simulator run as (child processes); required.
	Binary string
	// Trace is the Mooncake JSONL slice replayed; required.
	Trace string
	// Grid is the RTT matrix CSV the WAN links and the simulation use;
	// required.
	Grid string
	// Sites are the DCs (grid site names); optional; default: DefaultSites.
	Sites []string
	// RouterSite is where the hub, the consumer and the router run, and
	// the origin of every DC's RTT; optional; default: DefaultRouterSite.
	RouterSite string
	// Requests replays only the trace's first N requests; optional;
	// default: 0, all.
	Requests int
	// Concurrency is the clients sending requests through the router, each
	// the next one when its previous answer is complete; optional; default:
	// DefaultConcurrency.
	Concurrency int
	// WorkersPerDC, KVBlocksPerWorker and PrefillTokensPerMs size each
	// DC's mock engines; optional; defaults: DefaultWorkersPerDC,
	// DefaultKVBlocksPerWorker, DefaultPrefillTokensPerMs.
	WorkersPerDC       int
	KVBlocksPerWorker  int
	PrefillTokensPerMs float64
	// SimConcurrency is the simulation's closed-loop concurrency; optional;
	// default: goindex sim's.
	SimConcurrency int
	// Library is libgoindex.so's path, which the library stage loads in a
	// host process of its own; optional; default: none, and the stage is
	// skipped.
	Library string
	// HostClient is the host command (and its first arguments) that loads
	// Library and scores from the replica; the demo appends --lib,
	// --replica, --prompts and --out (see host.py for the files). Optional;
	// default: the embedded host.py under python3 from PATH (no python3:
	// the stage is skipped).
	HostClient []string
	// ReportDir receives the simulation's Markdown report and charts;
	// optional; default: none (the table only).
	ReportDir string
	// WorkDir is where the temporary directory (NATS stores, the replica
	// file, logs) is made; optional; default: /dev/shm when writable, else
	// the system's temporary directory.
	WorkDir string
	// Keep leaves the temporary directory in place; optional; default:
	// removed.
	Keep bool
	// Out receives the progress; optional; default: discarded.
	Out io.Writer
	// Wait bounds every wait for a component to become ready or for the
	// replica to converge; optional; default: DefaultWait.
	Wait time.Duration
}

// resolved is a Config with its defaults filled and its inputs read.
type resolved struct {
	Config
	grid  *sim.Grid
	reqs  []trace.Request
	sites []*site
}

// resolve checks cfg, fills its defaults and reads the grid and the trace.
// Every error is ErrConfig.
func resolve(cfg Config) (*resolved, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
	}
	if cfg.Sites == nil {
		cfg.Sites = strings.Split(DefaultSites, ",")
	}
	if cfg.RouterSite == "" {
		cfg.RouterSite = DefaultRouterSite
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.WorkersPerDC == 0 {
		cfg.WorkersPerDC = DefaultWorkersPerDC
	}
	if cfg.KVBlocksPerWorker == 0 {
		cfg.KVBlocksPerWorker = DefaultKVBlocksPerWorker
	}
	if cfg.PrefillTokensPerMs == 0 {
		cfg.PrefillTokensPerMs = DefaultPrefillTokensPerMs
	}
	if cfg.Wait == 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	switch {
	case cfg.Binary == "":
		return nil, bad("no goindex binary")
	case cfg.Trace == "" || cfg.Grid == "":
		return nil, bad("a trace and a grid are required")
	case len(cfg.Sites) == 0 || len(cfg.Sites) > maxSites:
		return nil, bad("%d sites, want 1..%d", len(cfg.Sites), maxSites)
	case cfg.Requests < 0 || cfg.Requests > maxRequests:
		return nil, bad("requests %d not in [0, %d]", cfg.Requests, maxRequests)
	case cfg.Concurrency < 1 || cfg.Concurrency > 1024:
		return nil, bad("concurrency %d not in [1, 1024]", cfg.Concurrency)
	case cfg.WorkersPerDC < 1 || cfg.WorkersPerDC > 64:
		return nil, bad("workers per DC %d not in [1, 64]", cfg.WorkersPerDC)
	case cfg.KVBlocksPerWorker < 1 || cfg.KVBlocksPerWorker > 1<<24:
		return nil, bad("KV blocks per worker %d not in [1, 2^24]", cfg.KVBlocksPerWorker)
	case !(cfg.PrefillTokensPerMs > 0):
		return nil, bad("prefill rate %v must be positive", cfg.PrefillTokensPerMs)
	case cfg.Wait < 0:
		return nil, bad("negative wait")
	case cfg.SimConcurrency < 0 || cfg.SimConcurrency > 1<<16:
		return nil, bad("simulation concurrency %d not in [0, 65536]", cfg.SimConcurrency)
	}
	if _, err := os.Stat(cfg.Binary); err != nil {
		return nil, bad("goindex binary: %v", err)
	}
	if cfg.Library != "" {
		if _, err := os.Stat(cfg.Library); err != nil {
			return nil, bad("library: %v", err)
		}
	}
	r := &resolved{Config: cfg}
	f, err := os.Open(cfg.Grid)
	if err != nil {
		return nil, bad("grid: %v", err)
	}
	r.grid, err = sim.ReadGrid(f)
	f.Close()
	if err != nil {
		return nil, bad("grid %s: %v", cfg.Grid, err)
	}
	home, ok := r.grid.Index(cfg.RouterSite)
	if !ok {
		return nil, bad("router site %q is not in the grid", cfg.RouterSite)
	}
	for i, name := range cfg.Sites {
		j, ok := r.grid.Index(name)
		if !ok {
			return nil, bad("site %q is not in the grid (%s)", name, strings.Join(r.grid.Sites, ","))
		}
		if slices.Index(cfg.Sites, name) != i {
			return nil, bad("site %q given twice", name)
		}
		r.sites = append(r.sites, &site{name: name, id: siteID(i), component: "backend-" + name,
			rtt: time.Duration(r.grid.RTTms[home][j] * float64(time.Millisecond))})
	}
	if f, err = os.Open(cfg.Trace); err != nil {
		return nil, bad("trace: %v", err)
	}
	r.reqs, err = trace.ReadAll(f, trace.ReaderConfig{})
	f.Close()
	if err != nil {
		return nil, bad("trace %s: %v", cfg.Trace, err)
	}
	if cfg.Requests > 0 && cfg.Requests < len(r.reqs) {
		r.reqs = r.reqs[:cfg.Requests]
	}
	if len(r.reqs) == 0 {
		return nil, bad("trace %s has no requests", cfg.Trace)
	}
	// Directories last: the report directory is made only for a run that
	// can start.
	if cfg.WorkDir != "" {
		if err := writableDir(cfg.WorkDir, false); err != nil {
			return nil, bad("work directory: %v", err)
		}
	}
	if cfg.ReportDir != "" {
		if err := writableDir(cfg.ReportDir, true); err != nil {
			return nil, bad("report directory: %v", err)
		}
	}
	return r, nil
}

// writableDir checks that dir is a directory this process can create
// files in, making it (and its parents) first when create is set.
func writableDir(dir string, create bool) error {
	if create {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".goindex-demo-probe-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}
