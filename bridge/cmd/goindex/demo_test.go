package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/demo"
	"github.com/goindex/goindex/bridge/sim"
)

// TestMain makes this test binary the goindex binary when it is run with
// a subcommand (go test always passes -test.* flags first), so that the
// demo under test can run it as its relays, consumer, router and simulator
// (demo.Config.Binary is os.Executable).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// reducedDemoArgs is a demo of seconds: three DCs (the router site, one
// 13 ms and one 94 ms away), the first 40 requests of the conversation
// slice, fast mock engines.
func reducedDemoArgs(t *testing.T) []string {
	t.Helper()
	args := []string{"--sites", "fra,lon,iad", "--requests", "40", "--concurrency", "8",
		"--prefill-tokens-per-ms", "400", "--sim-concurrency", "32", "--work-dir", t.TempDir(), "--wait", "60s"}
	if lib := testLibrary(); lib != "" {
		args = append(args, "--library", lib)
	} else {
		args = append(args, "--no-library")
	}
	return args
}

// testLibrary returns $GOINDEX_BUILD/libgoindex.so when it exists
// (./build.sh test sets GOINDEX_BUILD), else "".
func testLibrary() string {
	if b := os.Getenv("GOINDEX_BUILD"); b != "" {
		if p := filepath.Join(b, "libgoindex.so"); fileExists(p) {
			return p
		}
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// childPIDs returns the live processes whose parent is this one (Linux;
// nil elsewhere).
func childPIDs(t *testing.T) []int {
	t.Helper()
	if runtime.GOOS != "linux" {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	var out []int
	me := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces, so cut at the last ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[0] != "Z" && f[1] == strconv.Itoa(me) {
			out = append(out, pid)
		}
	}
	return out
}

func TestDemo_ReducedRunEndToEnd(t *testing.T) {
	before := childPIDs(t)
	report := filepath.Join(t.TempDir(), "report")
	args := append(reducedDemoArgs(t), "--report", report, "--json")
	work := args[slicesIndex(args, "--work-dir")+1]
	var stdout, stderr bytes.Buffer
	err := runDemo(context.Background(), args, &stdout, &stderr)
	if err != nil {
		t.Fatalf("goindex demo %s: %v\nprogress:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var sum demo.Summary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("demo --json output %q: %v", stdout.String(), err)
	}
	want := []string{"wan", "dcs", "consumer", "router", "traffic", "replica", "library", "route", "sim", "shutdown"}
	if len(sum.Stages) != len(want) {
		t.Fatalf("stages %+v, want %v", sum.Stages, want)
	}
	for i, s := range sum.Stages {
		ok := s.Status == demo.StatusOK
		if s.Name == "library" && testLibrary() == "" {
			ok = s.Status == demo.StatusSkipped
		}
		if s.Name == "library" && s.Status == demo.StatusSkipped && strings.Contains(s.Detail, "EUNAVAILABLE") {
			ok = true // a library without global mode yet: skipped, saying so
		}
		if s.Name != want[i] || !ok {
			t.Errorf("stage %d = %s %s (%s), want %s ok", i, s.Name, s.Status, s.Detail, want[i])
		}
	}
	if sum.Requests != 40 || sum.Streamed != 10 {
		t.Errorf("requests %d (streamed %d), want 40 (10)", sum.Requests, sum.Streamed)
	}
	routed, published := 0, uint64(0)
	for _, dc := range sum.DCs {
		routed += dc.Requests
		published += dc.EventsPublished
		if dc.EventsRelayed != dc.EventsPublished {
			t.Errorf("dc %s: relay took in %d events, engines published %d", dc.Name, dc.EventsRelayed, dc.EventsPublished)
		}
		if dc.EngineCached > dc.PromptTokens {
			t.Errorf("dc %s: %d cached of %d prompt tokens", dc.Name, dc.EngineCached, dc.PromptTokens)
		}
	}
	if len(sum.DCs) != 3 || routed != 40 || published == 0 {
		t.Errorf("%d DCs routed %d requests, %d events published; want 3, 40, some", len(sum.DCs), routed, published)
	}
	// The replica stage passed, so no prompt read below the engines on any
	// DC; every distinct prompt of the replay was checked.
	if sum.Prompts < 30 || sum.Overcounts > sum.Prompts {
		t.Errorf("replica check: %d prompts, %d overcounts; want ≥ 30 distinct prompts, few overcounts", sum.Prompts, sum.Overcounts)
	}
	// Every prompt, then shown again the deepest one of each DC that holds
	// any (the replay need not have reached every DC) and a fresh one.
	if lp := sum.LibraryPrompts; testLibrary() != "" && sum.Stages[6].Status == demo.StatusOK && (lp < sum.Prompts+1 || lp > sum.Prompts+4) {
		t.Errorf("library probed %d prompts, want %d + 1..4", lp, sum.Prompts)
	}
	if sum.Showcased != 3 {
		t.Errorf("showcased %d requests, want 3", sum.Showcased)
	}
	if len(sum.Policies) != len(sim.AllPolicies) {
		t.Errorf("policies %+v, want %d", sum.Policies, len(sim.AllPolicies))
	}
	for _, p := range sum.Policies {
		if p.Completed != 40 || !(p.ThroughputRPS > 0) || !(p.TTFTP95ms >= p.TTFTP50ms) {
			t.Errorf("policy %s: %+v, want 40 completed, positive throughput, p95 ≥ p50", p.Policy, p)
		}
		// The table's baseline has the simulated grid's capacity (all 13
		// sites) in one DC.
		if p.Policy == "single-dc" && (p.Capacity.DCs != 1 || p.Capacity.Workers != 13*sim.DefaultWorkersPerDC) {
			t.Errorf("single-dc capacity %+v, want the 13 DCs' %d workers in 1 DC", p.Capacity, 13*sim.DefaultWorkersPerDC)
		}
	}
	for _, f := range []string{"report.md", "ttft_cdf.png", "throughput.png"} {
		if !fileExists(filepath.Join(report, f)) {
			t.Errorf("report %s has no %s", report, f)
		}
	}
	if sum.Report != filepath.Join(report, "report.md") {
		t.Errorf("summary report %q, want %s/report.md", sum.Report, report)
	}
	if left, _ := filepath.Glob(filepath.Join(work, "goindex-demo-*")); len(left) != 0 {
		t.Errorf("temporary directories left behind: %v", left)
	}
	if after := childPIDs(t); len(after) > len(before) {
		t.Errorf("child processes left behind: %v (before the run: %v)", after, before)
	}
	for _, line := range []string{"== 5/10 traffic", "answered;", "== summary", "vs single-dc"} {
		if !strings.Contains(stderr.String(), line) {
			t.Errorf("progress lacks %q:\n%s", line, stderr.String())
		}
	}
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

var pidRE = regexp.MustCompile(`\(pid (\d+)\)|pid (\d+) `)

// TestDemo_SIGINTStopsEveryChild interrupts a demo (a child process, as a
// terminal's Ctrl-C would) while it replays the trace, and checks that it
// exits with an error and that its relays, consumer and router are gone.
func TestDemo_SIGINTStopsEveryChild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("checks processes through /proc")
	}
	args := append([]string{"demo"}, reducedDemoArgs(t)...)
	args = append(args, "--report", "", "--requests", "400", "--prefill-tokens-per-ms", "20")
	cmd := exec.Command(os.Args[0], args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	var progress strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		progress.WriteString(line + "\n")
		if m := pidRE.FindStringSubmatch(line); m != nil {
			p, _ := strconv.Atoi(m[1] + m[2])
			pids = append(pids, p)
		}
		if strings.Contains(line, "answered;") {
			break
		}
	}
	if len(pids) != 5 { // 3 relays, the consumer, the router
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("saw child pids %v before the replay, want 5; output:\n%s%s", pids, progress.String(), stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go func() { // drain the rest
		for sc.Scan() {
			progress.WriteString(sc.Text() + "\n")
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("demo did not exit within 2 minutes of SIGINT")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("interrupted demo exited with %v, want status 1", err)
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("interrupted demo's error %q does not say it was interrupted", stderr.String())
	}
	for _, p := range pids {
		// Each child was the demo's to reap; one still in /proc (not even
		// a zombie, which would have a parent that waits) outlived it.
		if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "cmdline")); err == nil && bytes.Contains(b, []byte(os.Args[0])) {
			t.Errorf("child pid %d (%q) still runs after the demo exited", p, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
}

// TestDemo_RefusesUnusableInputs checks that bad inputs are refused before
// anything starts, with the reason named.
func TestDemo_RefusesUnusableInputs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--sites", "fra,xyz"}, `site "xyz" is not in the grid`},
		{[]string{"--sites", "fra,fra"}, `site "fra" given twice`},
		{[]string{"--report", filepath.Join(file, "sub")}, "report directory"},
		{[]string{"--report", file}, "report directory"},
		{[]string{"--work-dir", filepath.Join(t.TempDir(), "missing")}, "work directory"},
		{[]string{"--work-dir", file}, "is not a directory"},
		{[]string{"--library", filepath.Join(t.TempDir(), "libnone.so")}, "library"},
		{[]string{"--concurrency", "2000"}, "concurrency 2000"},
		{[]string{"--trace", filepath.Join(t.TempDir(), "none.jsonl")}, "trace"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		args := append([]string{"--report", ""}, c.args...)
		err := runDemo(context.Background(), args, &stdout, &stderr)
		if !errors.Is(err, errUsage) || !errors.Is(err, demo.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("goindex demo %s = %v, want a usage error naming %q", strings.Join(c.args, " "), err, c.want)
		}
		if strings.Contains(stdout.String(), "==") {
			t.Errorf("goindex demo %s started stages before refusing:\n%s", strings.Join(c.args, " "), stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if err := runDemo(context.Background(), []string{"--help"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) ||
		!strings.Contains(stderr.String(), "--report DIR") || !strings.Contains(stderr.String(), "SIGINT") {
		t.Errorf("goindex demo --help = %v, usage:\n%s", err, stderr.String())
	}
}

// TestDemo_LibraryHostSkipsOrFails runs a one-DC demo with stand-in hosts:
// one that exits hostSkipExit (a library without global mode) skips the
// stage and the demo passes; one that fails fails the demo, naming the
// stage.
func TestDemo_LibraryHostSkipsOrFails(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "libgoindex.so") // never loaded: the hosts are stand-ins
	skip := filepath.Join(dir, "skip.sh")
	fail := filepath.Join(dir, "fail.sh")
	for p, body := range map[string]string{lib: "",
		skip: "echo 'goindex_attach_replica: feature not built into this library (GOINDEX_EUNAVAILABLE)'; exit 3\n",
		fail: "echo 'goindex_probe: lane 9 of 1' >&2; exit 1\n"} {
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	base := []string{"--sites", "fra", "--requests", "8", "--concurrency", "4", "--prefill-tokens-per-ms", "1000",
		"--sim-concurrency", "8", "--work-dir", t.TempDir(), "--report", "", "--library", lib, "--json"}
	var stdout, stderr bytes.Buffer
	err := runDemo(context.Background(), append(base, "--host-client", "sh "+skip), &stdout, &stderr)
	var sum demo.Summary
	if jerr := json.Unmarshal(stdout.Bytes(), &sum); err != nil || jerr != nil || len(sum.Stages) != 10 {
		t.Fatalf("demo with a skipping host = %v (summary %v, %s); progress:\n%s", err, jerr, stdout.String(), stderr.String())
	}
	if st := sum.Stages[6]; st.Name != "library" || st.Status != demo.StatusSkipped || !strings.Contains(st.Detail, "GOINDEX_EUNAVAILABLE") {
		t.Errorf("library stage with a skipping host = %+v, want skipped, saying why", st)
	}
	stdout.Reset()
	stderr.Reset()
	err = runDemo(context.Background(), append(base, "--host-client", "sh "+fail), &stdout, &stderr)
	var se *demo.StageError
	if !errors.As(err, &se) || se.Stage != "library" || !errors.Is(err, demo.ErrCheck) {
		t.Errorf("demo with a failing host = %v, want a library StageError wrapping ErrCheck", err)
	}
	if !strings.Contains(stderr.String(), "lane 9 of 1") {
		t.Errorf("the failing host's message is not in the progress:\n%s", stderr.String())
	}
}
