package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goindex/goindex/bridge/sim"
)

// simSlice writes the first n lines of the shipped conversation slice to a
// temporary trace.
func simSlice(t *testing.T, n int) string {
	t.Helper()
	b, err := os.ReadFile("../../../testdata/mooncake/conversation_head400.jsonl")
	if err != nil {
		t.Fatalf("read shipped slice: %v", err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	return writeTrace(t, strings.Join(lines[:n], ""))
}

func runSimArgs(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := runSim(context.Background(), args, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

func TestSim_HelpDocumentsFlagsWithUnits(t *testing.T) {
	_, stderr, err := runSimArgs(t, "--help")
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("sim --help = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{
		"Trace and workload:", "Data centers and WAN:", "Workers (every DC alike):", "Policies and output:",
		"--trace", "--dcs", "--router-site", "--workers-per-dc", "--kv-blocks-per-worker", "--prefill-tokens-per-ms",
		"--decode-ms-per-token", "--concurrency", "--open-loop", "--time-scale", "--requests", "--policies", "--seed",
		"--load-report-interval", "--json", "--report", "tokens per ms", "ms", "blocks of --block-size tokens",
		"default 1024", "default 15", "default 30", "default 256", "default 2", "default 100ms", "--no-queue-drain",
		"single-dc", "exact-oracle", "exact-now", "--warmup", "--seeds", "--foresight", "clairvoyant", "clairvoyant-mean-output",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("sim --help lacks %q", want)
		}
	}
	if _, _, err := runSimArgs(t, "--help"); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("second --help = %v", err)
	}
	var out bytes.Buffer
	if err := dispatch(context.Background(), []string{"help"}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "sim ") {
		t.Errorf("goindex help = %v, %q; want it to list sim", err, out.String())
	}
}

func TestSim_JSONIsOneObjectWithEveryPolicy(t *testing.T) {
	path := simSlice(t, 60)
	stdout, _, err := runSimArgs(t, "--trace", path, "--concurrency", "16", "--quiet", "--json")
	if err != nil {
		t.Fatalf("sim --json: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	var out struct {
		Policies map[string]map[string]any `json:"policies"`
		Config   map[string]any            `json:"config"`
	}
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("decode %q: %v", stdout, err)
	}
	if dec.More() {
		t.Errorf("sim --json printed more than one JSON value: %q", stdout)
	}
	for _, p := range sim.AllPolicies {
		r, ok := out.Policies[p.String()]
		if !ok {
			t.Errorf("sim --json has no policy %q (has %v)", p, out.Policies)
			continue
		}
		for _, k := range []string{"throughput_rps", "ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms", "e2e_p95_ms", "hit_rate", "wan_hops", "mean_rtt_ms", "load_imbalance"} {
			if _, ok := r[k].(float64); !ok {
				t.Errorf("policies.%s.%s = %v, want a number", p, k, r[k])
			}
		}
		// Every policy runs on the grid's 26 workers (single-dc in one DC),
		// but single-dc-slice, on one DC's two.
		capacity, _ := r["capacity"].(map[string]any)
		dcs, workers := 13.0, 26.0
		switch p {
		case sim.SingleDC:
			dcs = 1
		case sim.SingleDCSlice:
			dcs, workers = 1, 2
		}
		if capacity["dcs"] != dcs || capacity["workers"] != workers || capacity["kv_blocks"] != workers*sim.DefaultKVBlocksPerWorker {
			t.Errorf("policies.%s.capacity = %v, want %v DCs, %v workers and their KV", p, capacity, dcs, workers)
		}
		lanes := 13.0
		if p == sim.SingleDC {
			lanes = 1
		}
		ckf, _ := r["ckf"].(map[string]any)
		if ckf["undercounts"] != 0.0 || ckf["lanes_converged"] != lanes {
			t.Errorf("policies.%s.ckf = %v, want 0 undercounts and %v converged lanes", p, ckf, lanes)
		}
		if got := r["completed"]; got != 60.0 {
			t.Errorf("policies.%s.completed = %v, want 60", p, got)
		}
		// The default warm-up is the closed loop's 16 clients; the whole
		// run's headline figures stay in all_requests.
		all, _ := r["all_requests"].(map[string]any)
		if r["warmup_requests"] != 16.0 || all["requests"] != 60.0 || all["ttft_p95_ms"] == nil {
			t.Errorf("policies.%s: warmup_requests %v, all_requests %v; want 16 and 60 requests with their figures", p, r["warmup_requests"], all)
		}
	}
	for _, k := range []string{"trace", "sites", "router_site", "one_site", "clients", "single_dc_site", "token_budget", "decode_ms_per_ktoken", "workers_per_dc", "kv_blocks_per_worker", "prefill_tokens_per_ms", "decode_ms_per_token", "concurrency", "seed", "policies"} {
		if _, ok := out.Config[k]; !ok {
			t.Errorf("config lacks %q: %v", k, out.Config)
		}
	}
}

func TestSim_TableReportAndSubset(t *testing.T) {
	path := simSlice(t, 40)
	dir := filepath.Join(t.TempDir(), "rep")
	stdout, stderr, err := runSimArgs(t, "--trace", path, "--dcs", "fra,lon,nrt", "--policies", "ttft,single-dc",
		"--concurrency", "8", "--report", dir)
	if err != nil {
		t.Fatalf("sim: %v (stderr %q)", err, stderr)
	}
	for _, want := range []string{"3 DCs", "ttft", "single-dc", "report.md"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("sim output lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "done") {
		t.Errorf("sim progress %q lacks the per-policy done lines", stderr)
	}
	for _, name := range []string{sim.ReportFile, sim.TTFTChartFile, sim.ThroughputFile, sim.LoadChartFile("ttft"), sim.LoadChartFile("single-dc")} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || (strings.HasSuffix(name, ".png") && !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n"))) {
			t.Errorf("report file %s: %d bytes, err %v", name, len(b), err)
		}
	}
}

func TestSim_BadFlagsAreUsageErrors(t *testing.T) {
	path := simSlice(t, 5)
	for _, args := range [][]string{
		{"--trace", path, "--policies", "fastest"},
		{"--trace", path, "--dcs", "fra,atlantis"},
		{"--trace", path, "--router-site", "nrt", "--dcs", "fra,lon"},
		{"--trace", path, "--workers-per-dc", "-2"},
		{"--trace", path, "--block-size", "100"},
		{"--trace", path, "--requests", "-1"},
		{"--trace", path, "--time-scale", "-1"},
		{"--trace", path, "--warmup", "-2"},
		{"--trace", path, "--warmup", "5"},
		{"--trace", path, "--clients", "everywhere"},
		{"--trace", path, "--client-shares", "fra"},
		{"--trace", path, "--client-shares", "fra=-1"},
		{"--trace", path, "--client-shares", "atlantis=1"},
		{"--trace", path, "--client-shares", "fra=0,lon=0"},
		{"--trace", path, "--clients", "router-site", "--client-shares", "fra=1"},
		{"--trace", path, "--token-budget", "100"},
		{"--trace", path, "--prefill-jitter", "2"},
		{"--trace", path, "stray"},
	} {
		if _, _, err := runSimArgs(t, append(args, "--quiet")...); !errors.Is(err, errUsage) {
			t.Errorf("sim %q = %v, want a usage error", args, err)
		}
	}
	if _, _, err := runSimArgs(t, "--trace", filepath.Join(t.TempDir(), "missing.jsonl"), "--quiet"); err == nil || errors.Is(err, errUsage) {
		t.Errorf("sim with a missing trace = %v, want a plain error", err)
	}
}

// TestSim_SweepPrintsTheTableAndWritesTheHeatmap runs a two-cell sweep on
// three DCs: the table has a row per cell and the summary, and --report
// writes sweep.md and the heat map; bad sweep lists are usage errors.
func TestSim_SweepPrintsTheTableAndWritesTheHeatmap(t *testing.T) {
	path := simSlice(t, 40)
	dir := filepath.Join(t.TempDir(), "sweep")
	stdout, stderr, err := runSimArgs(t, "--trace", path, "--dcs", "fra,lon,iad", "--sweep", "--sweep-concurrency", "8,16",
		"--sweep-workers", "1", "--sweep-kv", "1", "--sweep-speeds", "", "--report", dir)
	if err != nil {
		t.Fatalf("sim --sweep: %v (stderr %q)", err, stderr)
	}
	for _, want := range []string{"| c8 | 1 | 1 (1024) |", "| c16 | 1 | 1 (1024) |", "Summary over 2 cells", "Targets (set before measuring)", sim.SweepHeatmapFile} {
		if !strings.Contains(stdout, want) {
			t.Errorf("sweep output lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "sweep: 2/2") {
		t.Errorf("sweep progress %q lacks the per-cell lines", stderr)
	}
	for _, name := range []string{sim.SweepReportFile, sim.SweepHeatmapFile} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || len(b) == 0 {
			t.Errorf("sweep report file %s: %d bytes, err %v", name, len(b), err)
		}
	}
	for _, args := range [][]string{
		{"--sweep-concurrency", "8,zero"},
		{"--sweep-workers", "-1"},
		{"--sweep-kv", "0"},
		{"--sweep-speeds", "fast"},
		{"--sweep-baselines", "ttft"},
		{"--seeds", "0"},
		{"--seeds", "2", "--sweep-baselines", "gorgo"},
	} {
		if _, _, err := runSimArgs(t, append([]string{"--trace", path, "--sweep", "--quiet"}, args...)...); !errors.Is(err, errUsage) {
			t.Errorf("sim --sweep %q = %v, want a usage error", args, err)
		}
	}
}
