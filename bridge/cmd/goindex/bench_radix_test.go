package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goindex/goindex/bridge/bench"
)

// benchSlice is a shipped trace slice, relative to this package.
var benchSlice = filepath.Join("..", "..", "..", "testdata", "mooncake", "synthetic_head400.jsonl")

func writeTrace(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	return p
}

// decodeOne decodes out, which must hold exactly one JSON object, into v
// and returns its top-level keys.
func decodeOne(t *testing.T, out []byte, v any) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(out))
	var shape map[string]any
	if err := dec.Decode(&shape); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	if err := dec.Decode(&shape); err != io.EOF {
		t.Fatalf("output %q holds more than one JSON object (%v)", out, err)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("decode %q into %T: %v", out, v, err)
	}
	return shape
}

func TestBenchRadix_JSONFromTheShippedSliceByDefault(t *testing.T) {
	args := []string{"--workers", "4", "--capacity-blocks", "200", "--queries", "150", "--json"}
	var stdout, stderr bytes.Buffer
	if err := runBenchRadix(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bench radix %q: %v (stderr %q)", args, err, stderr.String())
	}
	var rep bench.ReplayReport
	shape := decodeOne(t, stdout.Bytes(), &rep)
	for _, key := range []string{"benchmark", "trace", "setup", "apply", "match", "index", "cache", "overlap", "per_worker", "examples", "machine"} {
		if _, ok := shape[key]; !ok {
			t.Errorf("JSON output lacks %q: %v", key, shape)
		}
	}
	if !strings.HasSuffix(rep.Trace.Path, filepath.FromSlash(defaultBenchTrace)) {
		t.Errorf("default trace = %q, want …/%s", rep.Trace.Path, defaultBenchTrace)
	}
	if rep.Benchmark != "radix" || rep.Match.Queries != 150 || len(rep.Workers) != 4 || rep.Setup.CapacityBlocks != 200 {
		t.Errorf("benchmark %q, %d queries, %d worker rows, capacity %d; want radix, 150, 4, 200", rep.Benchmark, rep.Match.Queries, len(rep.Workers), rep.Setup.CapacityBlocks)
	}
	stdout.Reset()
	if err := runBenchRadix(context.Background(), []string{"--trace", benchSlice, "--workers", "2"}, &stdout, &stderr); err != nil {
		t.Fatalf("bench radix: %v", err)
	}
	if !strings.Contains(stdout.String(), "goindex bench radix:") || !strings.Contains(stdout.String(), "example queries") {
		t.Errorf("human report:\n%s\nwant the header and the examples", stdout.String())
	}
}

// failedReport is a report whose own check fails.
type failedReport struct{}

func (failedReport) Print(w io.Writer) { io.WriteString(w, "the report\n") }
func (failedReport) Check() error      { return fmt.Errorf("one mismatch: %w", bench.ErrCheck) }

func TestBenchOutput_PrintsTheReportThenFailsItsCheck(t *testing.T) {
	var out bytes.Buffer
	err := benchOutput(&out, false, failedReport{})
	if !errors.Is(err, bench.ErrCheck) || exitCode(err) != 1 || out.String() != "the report\n" {
		t.Errorf("benchOutput(failed check) = %v (exit %d), printed %q; want bench.ErrCheck, exit 1, the report", err, exitCode(err), out.String())
	}
	out.Reset()
	if err := benchOutput(&out, true, failedReport{}); !errors.Is(err, bench.ErrCheck) || out.String() != "{}\n" {
		t.Errorf("benchOutput(--json, failed check) = %v, printed %q; want bench.ErrCheck after the JSON", err, out.String())
	}
}

func TestBenchRadix_RejectsBadInput(t *testing.T) {
	good := benchSlice
	bad := writeTrace(t, `{"timestamp": 0, "hash_ids": [0, 1]}`+"\n"+`{"timestamp": 3, "hash_ids": [1, -2]}`+"\n")
	cases := []struct {
		args  []string
		usage bool   // a usage error (exit status 2)
		msg   string // in the error
	}{
		{[]string{"--workers", "0"}, true, "workers"},
		{[]string{"--workers", "100000"}, true, "workers"},
		{[]string{"--queries", "100000000"}, true, "queries"},
		{[]string{"--examples", "-2"}, true, "examples"},
		{[]string{"--block-size", "100"}, true, "block size 100"},
		{[]string{"--scheme", "upstream"}, true, "--scheme"},
		{[]string{"--capacity-blocks", "-3"}, true, "capacity"},
		{[]string{"--duplicate", "-1"}, true, "duplication factor"},
		{[]string{"--queries", "-1"}, true, "queries"},
		{[]string{"--bogus"}, true, "bogus"},
		{[]string{"--trace", filepath.Join(t.TempDir(), "missing.jsonl")}, false, "missing.jsonl"},
		{[]string{"--trace", bad}, false, "line 2"},
	}
	for _, c := range cases {
		args := c.args
		if args[0] != "--trace" {
			args = append([]string{"--trace", good}, args...)
		}
		err := runBenchRadix(context.Background(), args, io.Discard, io.Discard)
		if err == nil || errors.Is(err, errUsage) != c.usage || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("bench radix %q = %v, want an error mentioning %q (usage error: %v)", args, err, c.msg, c.usage)
		}
	}
}
