package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/goindex/goindex/bridge/bench"
)

// benchmark is one `goindex bench` sub-benchmark.
type benchmark struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// benchmarks lists the sub-benchmarks in the order `goindex bench --help`
// prints them; adding one is one entry here plus its bench_<name>.go.
var benchmarks = []benchmark{
	{"radix", "replay a Mooncake trace into the exact radix index: apply rate, match latency, memory", runBenchRadix},
	{"ckf", "CKF replica vs exact radix vs per-lane filters: probe latency, producer ingest, memory", runBenchCKF},
	{"relay", "the Relay over NATS on loopback: cold resync, bytes per block, steady frames/s, event→replica and delta apply latency", runBenchRelay},
	{"chaos", "goindex's processes killed, partitioned, slowed and flooded: requests failed, time to recover", runBenchChaos},
}

func benchSynopsis() string {
	var b strings.Builder
	b.WriteString("Usage: goindex bench <benchmark> [flags]\n\n" +
		"Micro and macro benchmarks with machine-readable output: every benchmark\n" +
		"prints a human-readable report, or exactly one JSON object with --json.\n" +
		"Timings are single-threaded wall-clock figures of this machine; compare\n" +
		"them as ratios measured in one run.\n\nBenchmarks:\n")
	for _, bm := range benchmarks {
		fmt.Fprintf(&b, "  %-8s %s\n", bm.name, bm.summary)
	}
	b.WriteString("\nRun `goindex bench <benchmark> --help` for its flags.")
	return b.String()
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", "", stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, benchSynopsis()) }
	// Plain parsing stops at the benchmark's name; its flags are its own.
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return fmt.Errorf("bench: name a benchmark: %w", errUsage)
	}
	name := fs.Arg(0)
	for _, bm := range benchmarks {
		if bm.name == name {
			return bm.run(ctx, fs.Args()[1:], stdout, stderr)
		}
	}
	fs.Usage()
	return fmt.Errorf("bench: unknown benchmark %q: %w", name, errUsage)
}

// benchError maps a benchmark library's configuration error to a usage
// error of the named subcommand; other errors keep their kind
// (bench.ErrCheck among them).
func benchError(name string, err error) error {
	if errors.Is(err, bench.ErrConfig) {
		return fmt.Errorf("bench %s: %v: %w", name, err, errUsage)
	}
	return fmt.Errorf("bench %s: %w", name, err)
}

// benchOutput prints a finished benchmark's report, as one JSON object
// with --json, and returns its own check.
func benchOutput(stdout io.Writer, asJSON bool, rep interface {
	Print(io.Writer)
	Check() error
}) error {
	if asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		rep.Print(stdout)
	}
	return rep.Check()
}

// withCPUProfile runs fn, writing a CPU profile of it (go tool pprof) to
// path when path is not empty.
func withCPUProfile(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	err = fn()
	pprof.StopCPUProfile()
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("--cpuprofile: %w", cerr)
	}
	return err
}
