package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/goindex/goindex/bridge/demo"
)

const demoSynopsis = `Usage: goindex demo [--trace FILE] [--sites fra,lon,…] [--requests N] [--report DIR] [--library PATH] [--json]

Runs the whole goindex path on this machine, with nothing installed but
this binary (python3 for the library stage), on loopback only and free
ports, in well under a minute on 2 cores, printing its progress:

  1. NATS: a hub at the router site and one leaf server per DC (its own
     JetStream domain), each joined to the hub over a link delayed by the
     DC's RTT in the grid (half each way);
  2. per DC, ` + "`goindex relay`" + ` as a child process, and a stub frontend
     (OpenAI completions, streaming) whose mock engines (LRU prefix caches)
     serve prompts and publish Dynamo KV events (msgpack event-plane
     envelopes) and load samples to the DC's leaf;
  3. ` + "`goindex consume`" + ` (child) keeping one lane per DC in a shared-memory replica;
  4. ` + "`goindex route`" + ` (child) in front of the frontends;
  5. the trace slice replayed through the router by concurrent clients;
  6. the replica checked against every engine's cache (never below);
  7. libgoindex.so in a separate host process (python3 ctypes): attach the
     replica, probe and score every prompt under each policy, checked
     against the engines (skipped, saying why, without python3 or the
     library, or when the library lacks global mode);
  8. a few requests through the router with its diagnostic headers;
  9. ` + "`goindex sim`" + ` on the trace across the whole grid under every
     policy: the policy table, and a report with charts in --report;
 10. SIGINT to every child and a check of their final counts.
Any broken stage fails the demo (exit 1). Child processes and temporary
files are removed on exit, on an error and on Ctrl-C (SIGINT, SIGTERM).

Input:
  --trace FILE           Mooncake JSONL (default: ` + defaultSimTrace + `, found up from here)
  --grid FILE            RTT matrix CSV (default: ` + defaultSimGrid + `)
  --requests N           replay (and simulate) only the first N requests (0: all)
Deployment:
  --sites LIST           DCs, grid site names (default: ` + demo.DefaultSites + `)
  --router-site SITE     where the hub, consumer and router run (default: ` + demo.DefaultRouterSite + `)
  --workers-per-dc N     mock engines per DC (default: 2)
  --kv-blocks-per-worker B
                         KV blocks of 512 tokens per mock engine (default: 1024)
  --prefill-tokens-per-ms R
                         prefill speed of one mock engine (default: 50)
  --concurrency C        closed-loop clients replaying the trace (default: 16)
  --wait DURATION        bound on each wait for a component or the replica (default: 30s)
Library:
  --library PATH         libgoindex.so (default: beside this binary, if there)
  --no-library           skip the library stage
  --host-client CMD      host program instead of the embedded python3 one,
                         split on spaces; gets --lib, --replica, --prompts, --out
Simulation and output:
  --sim-concurrency C    the simulation's closed-loop clients (default: goindex sim's)
  --report DIR           the simulation's report.md and charts (default:
                         demo-report beside this binary, build/demo-report
                         for ./build.sh demo; "" for none)
  --work-dir DIR         parent of the temporary directory (default: /dev/shm,
                         else the system's)
  --keep                 keep the temporary directory (NATS stores, replica, logs)
  --json                 progress on stderr, the summary as one JSON object on stdout`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", demoSynopsis, stderr)
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	beside := filepath.Dir(bin)
	defaultLib := filepath.Join(beside, "libgoindex.so")
	if _, err := os.Stat(defaultLib); err != nil {
		defaultLib = ""
	}
	tracePath := fs.String("trace", "", "Mooncake JSONL trace (default: "+defaultSimTrace+" found up from the working directory)")
	gridPath := fs.String("grid", "", "RTT matrix CSV in ms (default: "+defaultSimGrid+" found up from the working directory)")
	requests := fs.Int("requests", 0, "replay and simulate only the first N requests (0: all)")
	sites := fs.String("sites", demo.DefaultSites, "comma-separated DCs (grid site names)")
	routerSite := fs.String("router-site", demo.DefaultRouterSite, "site of the hub, the consumer and the router")
	workers := fs.Int("workers-per-dc", demo.DefaultWorkersPerDC, "mock engines per DC")
	kvBlocks := fs.Int("kv-blocks-per-worker", demo.DefaultKVBlocksPerWorker, "KV blocks (512 tokens) per mock engine")
	prefill := fs.Float64("prefill-tokens-per-ms", demo.DefaultPrefillTokensPerMs, "prefill speed of one mock engine")
	concurrency := fs.Int("concurrency", demo.DefaultConcurrency, "closed-loop clients replaying the trace")
	wait := fs.Duration("wait", demo.DefaultWait, "bound on each wait for a component or for the replica")
	library := fs.String("library", defaultLib, "libgoindex.so for the library stage, loaded by a separate host process (empty: the stage is skipped)")
	noLibrary := fs.Bool("no-library", false, "skip the library stage")
	hostClient := fs.String("host-client", "", "host program loading the library, split on spaces (default: the embedded python3 host)")
	simConcurrency := fs.Int("sim-concurrency", 0, "the simulation's closed-loop concurrency (0: goindex sim's default)")
	report := fs.String("report", filepath.Join(beside, "demo-report"), "directory for the simulation's report and charts (empty: none)")
	workDir := fs.String("work-dir", "", "parent of the temporary directory (empty: /dev/shm, else the system's)")
	keep := fs.Bool("keep", false, "keep the temporary directory")
	asJSON := fs.Bool("json", false, "print the summary as one JSON object (progress goes to stderr)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	usageErr := func(format string, a ...any) error {
		return fmt.Errorf("demo: %s: %w", fmt.Sprintf(format, a...), errUsage)
	}
	if *tracePath == "" {
		if *tracePath, err = findUp(defaultSimTrace); err != nil {
			return usageErr("no --trace given and %s not found from the working directory up", defaultSimTrace)
		}
	}
	if *gridPath == "" {
		if *gridPath, err = findUp(defaultSimGrid); err != nil {
			return usageErr("no --grid given and %s not found from the working directory up", defaultSimGrid)
		}
	}
	if *noLibrary {
		*library = ""
	}
	cfg := demo.Config{Binary: bin, Trace: *tracePath, Grid: *gridPath, Sites: splitList(*sites), RouterSite: *routerSite,
		Requests: *requests, Concurrency: *concurrency, WorkersPerDC: *workers, KVBlocksPerWorker: *kvBlocks,
		PrefillTokensPerMs: *prefill, Library: *library, HostClient: strings.Fields(*hostClient), SimConcurrency: *simConcurrency,
		ReportDir: *report, WorkDir: *workDir, Keep: *keep, Out: stdout, Wait: *wait}
	if *asJSON {
		cfg.Out = stderr
	}
	if cfg.ReportDir != "" {
		if cfg.ReportDir, err = filepath.Abs(cfg.ReportDir); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	sum, err := demo.Run(ctx, cfg)
	if sum == nil {
		return fmt.Errorf("%w: %w", err, errUsage) // only a config error builds no summary
	}
	if *asJSON {
		if jerr := json.NewEncoder(stdout).Encode(sum); jerr != nil && err == nil {
			err = jerr
		}
	}
	return err
}

// splitList splits a comma-separated list, trimming spaces and dropping
// empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
