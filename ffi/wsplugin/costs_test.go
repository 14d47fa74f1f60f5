package wsplugin

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/goindex/goindex/dynamo/selector"
)

// goindexWorker is the Go name of goindex_worker for the tests.
type goindexWorker = _Ctype_struct_goindex_worker

const candLoad, candCapacity = 1, 2

func workerCosts(st cU64, ws []goindexWorker, isl uint64) ([]float64, cU32, string, status) {
	costs := make([]float64, len(ws))
	var degraded cU32
	eb, buf := errBuf(256)
	var wp *goindexWorker
	var cp *_Ctype_double
	if len(ws) > 0 {
		wp, cp = &ws[0], (*_Ctype_double)(unsafe.Pointer(&costs[0]))
	}
	rc := pluginWorkerCosts(st, 16, cU64(isl), wp, cSize(len(ws)), cp, &degraded, eb)
	return costs, degraded, errText(eb, buf), rc
}

// The per-worker costs are the selector's (the cost model the C plugin
// chooses by), NaN for a worker without load; a missing replica degrades
// to the config's rates with the reason in the note; bad arguments are
// errors, never a crash.
func TestWorkerCosts_AreTheSelectorsAndFailOpen(t *testing.T) {
	st := pluginStateT(t, `{"prefill_tokens_per_ms": 10}`)
	ws := []goindexWorker{
		{cached_tokens: 0, flags: candLoad},
		{cached_tokens: 1280, active_prefill_tokens: 2000, flags: candLoad},
		{cached_tokens: 640, active_decode_blocks: 4000, capacity_blocks: 100, flags: candLoad | candCapacity},
		{cached_tokens: 640},
	}
	costs, degraded, note, rc := workerCosts(st, ws, 1600)
	if rc != 0 || degraded != 0 || note != "" {
		t.Fatalf("goindex_worker_costs = %d, degraded %d, note %q", rc, degraded, note)
	}
	// 160 ms uncached; 200 + 32 ms; 96 ms + 3960 blocks over capacity at 1 block/ms.
	for i, want := range []float64{160, 232, 96 + 3960} {
		if math.Abs(costs[i]-want) > 1e-9 {
			t.Errorf("cost of worker %d = %v, want %v", i, costs[i], want)
		}
	}
	if !math.IsNaN(costs[3]) {
		t.Errorf("cost of the worker without load = %v, want NaN", costs[3])
	}
	sel, _ := selector.New(selector.Config{PrefillTokensPerMs: 10}, nil)
	want := make([]float64, 3)
	if _, err := sel.Costs(selector.Request{BlockSize: 16, ISLTokens: 1600}, []selector.Candidate{
		{HasCachedTokens: true, HasLoad: true}, {HasCachedTokens: true, CachedTokens: 1280, HasLoad: true, ActivePrefillTokens: 2000},
		{HasCachedTokens: true, CachedTokens: 640, HasLoad: true, ActiveDecodeBlocks: 4000, HasCapacity: true, TotalKVBlocks: 100},
	}, want); err != nil || want[0] != costs[0] || want[1] != costs[1] || want[2] != costs[2] {
		t.Errorf("selector.Costs = %v, %v; goindex_worker_costs %v", want, err, costs[:3])
	}

	missing := pluginStateT(t, replicaConfig(filepath.Join(t.TempDir(), "absent"), 3))
	costs, degraded, note, rc = workerCosts(missing, ws[:1], 1600)
	if rc != 0 || degraded != 1 || !strings.Contains(note, "no such file") || costs[0] != 1600.0/40 {
		t.Errorf("costs with a missing replica = %v, rc %d, degraded %d, note %q; want the config's 40 tokens/ms, degraded", costs, rc, degraded, note)
	}
	fresh := filepath.Join(t.TempDir(), "r")
	writePluginReplica(t, fresh, true, time.Now())
	if costs, degraded, _, rc = workerCosts(pluginStateT(t, replicaConfig(fresh, 3)), ws[:1], 1600); rc != 0 || degraded != 0 || costs[0] != 160 {
		t.Errorf("costs with the replica's 10 tokens/ms = %v, rc %d, degraded %d; want 160 ms", costs, rc, degraded)
	}

	var d cU32
	c := []float64{0}
	for name, call := range map[string]func() status{
		"unknown state": func() status {
			return pluginWorkerCosts(1<<40, 16, 1, &ws[0], 1, (*_Ctype_double)(unsafe.Pointer(&c[0])), &d, nil)
		},
		"NULL degraded": func() status {
			return pluginWorkerCosts(st, 16, 1, &ws[0], 1, (*_Ctype_double)(unsafe.Pointer(&c[0])), nil, nil)
		},
		"block size 0": func() status {
			return pluginWorkerCosts(st, 0, 1, &ws[0], 1, (*_Ctype_double)(unsafe.Pointer(&c[0])), &d, nil)
		},
		"NULL workers": func() status {
			return pluginWorkerCosts(st, 16, 1, nil, 1, (*_Ctype_double)(unsafe.Pointer(&c[0])), &d, nil)
		},
		"too many": func() status {
			return pluginWorkerCosts(st, 16, 1, &ws[0], 1<<16+1, (*_Ctype_double)(unsafe.Pointer(&c[0])), &d, nil)
		},
		"reserved set": func() status {
			bad := []goindexWorker{{reserved: 1}}
			return pluginWorkerCosts(st, 16, 1, &bad[0], 1, (*_Ctype_double)(unsafe.Pointer(&c[0])), &d, nil)
		},
	} {
		if rc := call(); rc >= 0 {
			t.Errorf("goindex_worker_costs(%s) = %d, want an error code", name, rc)
		}
	}
	if _, _, _, rc := workerCosts(st, nil, 1); rc != 0 {
		t.Errorf("goindex_worker_costs(no workers) = %d, want OK", rc)
	}
}
