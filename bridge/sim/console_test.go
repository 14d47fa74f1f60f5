package sim

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestWriteTable_ARowPerPolicyAndTheSetting(t *testing.T) {
	w := shippedWorkload(t, 120, 40)
	rep := runAll(t, quiet(fourSites(t), LoadOnly, TTFT), w)
	var out bytes.Buffer
	WriteTable(&out, rep, RunInput{Trace: "t.jsonl", Requests: len(w.Requests), WallSeconds: 1.25}, "rep")
	text := out.String()
	for _, want := range []string{
		"goindex sim: t.jsonl, ", "closed loop, concurrency ", "policy", "TTFT p50 ms",
		" load-only  ", " ttft  ", "ideal (infinite shared cache", "report: rep/report.md\n", "wall time 1.2 s\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("WriteTable(load-only, ttft) lacks %q in:\n%s", want, text)
		}
	}
	out.Reset()
	WriteTable(&out, rep, RunInput{}, "")
	if strings.Contains(out.String(), "report:") {
		t.Errorf("WriteTable without a report dir names one:\n%s", out.String())
	}
}

func TestReportJSON_PoliciesByNameAndTheConfig(t *testing.T) {
	w := shippedWorkload(t, 120, 40)
	rep := runAll(t, quiet(fourSites(t), LoadOnly, TTFT), w)
	b, err := json.Marshal(ReportJSON(rep, RunInput{Trace: "t.jsonl", Requests: 7, WallSeconds: 2}))
	if err != nil {
		t.Fatalf("json.Marshal(ReportJSON): %v", err)
	}
	var got struct {
		Policies map[string]json.RawMessage
		Config   map[string]any
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("json.Unmarshal: %v", err)
	}
	if len(got.Policies) != 2 || got.Policies["load-only"] == nil || got.Policies["ttft"] == nil {
		t.Errorf("ReportJSON policies = %v, want load-only and ttft", got.Policies)
	}
	for key, want := range map[string]any{"trace": "t.jsonl", "requests": 7.0, "wall_s": 2.0, "one_site": true} {
		if got.Config[key] != want {
			t.Errorf("ReportJSON config[%q] = %v, want %v", key, got.Config[key], want)
		}
	}
}

func TestProgressPrinter_ALinePerFinishedPolicyAndThrottledUpdates(t *testing.T) {
	var out bytes.Buffer
	p := ProgressPrinter(&out, 2, time.Hour)
	p(Progress{Policy: LoadOnly, Completed: 5, Total: 10, SimMs: 1000})
	if out.Len() != 0 {
		t.Errorf("an update within the period printed %q", out.String())
	}
	p(Progress{Policy: LoadOnly, Completed: 10, Total: 10, SimMs: 2500, Done: true})
	if want := "sim: load-only        done: 10 requests in 2.5 simulated s (1 of 2 policies)\n"; out.String() != want {
		t.Errorf("done line = %q, want %q", out.String(), want)
	}
	out.Reset()
	ProgressPrinter(&out, 1, 0)(Progress{Policy: TTFT, Completed: 3, Total: 9, SimMs: 100})
	if want := "sim: ttft             3/9 requests, 0.1 simulated s\n"; out.String() != want {
		t.Errorf("update line = %q, want %q", out.String(), want)
	}
}
