package gohost

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Status codes and limits of include/goindex.h.
const (
	ok, eInval, eHandle, eConfig, eTooBig, eBuffer, eParent = 0, -1, -2, -3, -4, -5, -6
	eSequence, eNotFound, eCapacity, eNoCandidate           = -7, -8, -9, -13
	eMode                                                   = -10
	maxBlocks, maxTokens, maxName, maxBatch                 = 1 << 20, 1 << 26, 4096, 1 << 16
	maxConfig, maxFrame, maxCandidates                      = 1 << 20, 64 << 20, 1 << 16
	candLoad, candRTT                                       = 1, 4
	policyTTFT, policyPrefixThenLoad, policyLoadOnly        = 1, 2, 3
)

const childEnv = "GOINDEX_GOHOST_CHILD"

// TestABI runs the checks in a child process (this test binary again), so
// that the library's Go runtime never lives in the process of `go test`.
func TestABI(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		child(t)
		return
	}
	build := os.Getenv("GOINDEX_BUILD")
	require.NotEmpty(t, build, "GOINDEX_BUILD must name the directory holding libgoindex.so (tests/gohost/run.sh sets it)")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestABI$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child output:\n%s", out)
	require.NoError(t, err, "child host process failed")
	require.Contains(t, string(out), "--- PASS: TestABI", "child did not report its pass")
}

// The opaque external hashes of tests/c/chain.h.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xBF58476D1CE4E5B9
	z ^= z >> 27
	z *= 0x94D049BB133111EB
	z ^= z >> 31
	return z
}

func chain(locals []uint64) []uint64 {
	ext, prev := make([]uint64, len(locals)), uint64(0xD1B54A32D192ED03)
	for i, l := range locals {
		prev = mix64(prev ^ mix64(l))
		ext[i] = prev
	}
	return ext
}

func p64(s []uint64) *uint64 { return unsafe.SliceData(s) }

func pstr(s string) *byte { return unsafe.StringData(s) }

// host is one child run: the library and the handles it opened.
type host struct {
	t      *testing.T
	lib    *Lib
	opened []uint64
}

func (h *host) name(rc int32) string {
	p := h.lib.Strerror(rc)
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

func (h *host) lastError(hd uint64) string {
	buf := make([]byte, 512)
	if rc := h.lib.LastError(hd, &buf[0], uintptr(len(buf)), nil); rc != ok {
		return fmt.Sprintf("(goindex_last_error = %d)", rc)
	}
	return string(buf[:bytes.IndexByte(buf, 0)])
}

func (h *host) rc(got int32, want int32, step string) bool {
	return assert.Equal(h.t, want, got, "%s = %d (%s), want %d (%s)", step, got, h.name(got), want, h.name(want))
}

func (h *host) open(cfg string) uint64 {
	var hd uint64
	rc := h.lib.Open(pstr(cfg), uintptr(len(cfg)), &hd)
	require.Equal(h.t, int32(ok), rc, "goindex_open(%s): %s", cfg, h.lastError(0))
	for _, o := range h.opened {
		assert.Less(h.t, o, hd, "goindex_open returned %d, not above the earlier %d", hd, o)
	}
	h.opened = append(h.opened, hd)
	return hd
}

func (h *host) close(hd uint64) { h.rc(h.lib.Close(hd), ok, fmt.Sprintf("goindex_close(%d)", hd)) }

// store inserts blocks below the chain of prefix on (w, r), local hashes
// being the values themselves (dynamo-compat §3.5's convention).
func (h *host) store(hd, w uint64, r uint32, prefix, blocks []uint64) int32 {
	ext := chain(append(append([]uint64(nil), prefix...), blocks...))
	var parent *uint64
	if len(prefix) > 0 {
		parent = &ext[len(prefix)-1]
	}
	return h.lib.Insert(hd, w, r, 0, parent, p64(ext[len(prefix):]), p64(blocks), uintptr(len(blocks)))
}

func (h *host) probe(hd uint64, q []uint64) string {
	out := make([]Overlap, 64)
	var n uintptr
	h.rc(h.lib.Probe(hd, p64(q), uintptr(len(q)), &out[0], 64, &n), ok, fmt.Sprintf("goindex_probe(%v)", q))
	parts := make([]string, n)
	for i, o := range out[:n] {
		parts[i] = fmt.Sprintf("%d/%d=%d", o.ID, o.Rank, o.Blocks)
	}
	return strings.Join(parts, " ")
}

func (h *host) expect(hd uint64, q []uint64, want string, step string) {
	assert.Equal(h.t, want, h.probe(hd, q), "%s: goindex_probe(%v)", step, q)
}

func child(t *testing.T) {
	before, err := SIGURGHandler()
	require.NoError(t, err, "reading the host's SIGURG handler")
	path := filepath.Join(os.Getenv("GOINDEX_BUILD"), "libgoindex.so")
	lib, replaced, err := Load(path)
	require.NoError(t, err, "loading %s", path)
	after, err := SIGURGHandler()
	require.NoError(t, err, "reading SIGURG after the load")
	require.Equal(t, before, after, "the host's SIGURG handler must be back after Load")
	t.Logf("the library's runtime had replaced the host's SIGURG handler: %v (restored)", replaced)
	h := &host{t: t, lib: lib}
	require.Equal(t, uint32(1), lib.ABIVersion(), "goindex_abi_version")

	h.scenarios()
	h.ckf()
	h.hashing()
	h.score()
	h.badArguments()

	// The host runtime still preempts: a goroutine spinning with no call in
	// its loop can only be stopped for the GC by a SIGURG the host handles.
	var stop atomic.Bool
	started := make(chan struct{})
	go func() {
		close(started)
		for !stop.Load() {
		}
	}()
	<-started
	runtime.GC()
	stop.Store(true)

	for _, hd := range h.opened {
		var c Counters
		c.StructSize = uint32(unsafe.Sizeof(c))
		h.rc(lib.Stats(hd, &c), eHandle, fmt.Sprintf("the end: goindex_stats(%d) after the suite", hd))
	}
}

func r(a, b uint64) []uint64 {
	var s []uint64
	for v := a; v <= b; v++ {
		s = append(s, v)
	}
	return s
}

func (h *host) scenarios() {
	step := "scenario: store, query, duplicate, below a parent, remove"
	hd := h.open("{}")
	h.rc(h.store(hd, 0, 0, nil, r(1, 3)), ok, step)
	h.expect(hd, r(1, 3), "0/0=3", step)
	h.expect(hd, []uint64{1, 2, 999}, "0/0=2", step)
	h.rc(h.store(hd, 0, 0, nil, r(1, 3)), ok, step)
	h.rc(h.store(hd, 0, 0, r(1, 3), r(4, 5)), ok, step)
	h.expect(hd, r(1, 5), "0/0=5", step)
	ext := chain(r(1, 5))
	h.rc(h.lib.Remove(hd, 0, 0, 0, &ext[3], 2), ok, step)
	h.expect(hd, r(1, 5), "0/0=3", step)
	var c Counters
	c.StructSize = uint32(unsafe.Sizeof(c))
	h.rc(h.lib.Stats(hd, &c), ok, step)
	assert.Equal(h.t, [3]uint64{1, 3, 1}, [3]uint64{uint64(c.Mode), c.Blocks, c.Members}, "%s: stats mode, blocks, members", step)
	h.close(hd)

	step = "scenario: mid-chain removal and re-store"
	hd = h.open("{}")
	h.rc(h.store(hd, 0, 0, nil, r(1, 5)), ok, step)
	ext = chain(r(1, 5))
	h.rc(h.lib.Remove(hd, 0, 0, 0, &ext[2], 1), ok, step)
	h.expect(hd, r(1, 5), "0/0=2", step)
	h.rc(h.store(hd, 0, 0, r(1, 2), []uint64{3}), ok, step)
	h.expect(hd, r(1, 5), "0/0=3", step)
	h.rc(h.store(hd, 0, 0, r(1, 3), r(4, 5)), ok, step)
	h.expect(hd, r(1, 5), "0/0=5", step)
	h.close(hd)

	step = "scenario: workers diverge; unheld parent rejected"
	hd = h.open("{}")
	h.rc(h.store(hd, 1, 0, nil, r(1, 3)), ok, step)
	h.rc(h.store(hd, 2, 0, nil, r(1, 3)), ok, step)
	h.rc(h.store(hd, 1, 0, r(1, 3), r(4, 6)), ok, step)
	h.expect(hd, r(1, 6), "1/0=6 2/0=3", step)
	h.rc(h.store(hd, 2, 0, r(1, 6), []uint64{9, 10}), eParent, step)
	h.expect(hd, append(r(1, 6), 9, 10), "1/0=6 2/0=3", step)
	h.close(hd)

	step = "scenario: ranks, remove_rank, cleared, remove_worker"
	hd = h.open("{}")
	for rank := uint32(0); rank < 3; rank++ {
		h.rc(h.store(hd, 7, 2-rank, nil, r(1, 3)), ok, step)
	}
	h.rc(h.store(hd, 8, 0, nil, r(1, 3)), ok, step)
	h.expect(hd, r(1, 3), "7/0=3 7/1=3 7/2=3 8/0=3", step)
	h.rc(h.lib.RemoveRank(hd, 7, 0), ok, step)
	h.rc(h.lib.Clear(hd, 7, 1, 0), ok, step)
	h.expect(hd, r(1, 3), "7/2=3 8/0=3", step)
	h.rc(h.lib.RemoveWorker(hd, 7), ok, step)
	h.rc(h.lib.RemoveWorker(hd, 999), ok, step)
	h.expect(hd, r(1, 3), "8/0=3", step)
	h.close(hd)
}

func (h *host) ckf() {
	step := "scenario: ckf lanes, parents, clear, full lanes"
	hd := h.open(`{"mode":"ckf","lanes":2,"expected_blocks_per_lane":1024}`)
	h.rc(h.store(hd, 1, 0, nil, r(1, 3)), ok, step)
	h.rc(h.store(hd, 2, 0, nil, r(1, 2)), ok, step)
	h.rc(h.store(hd, 1, 0, r(1, 3), r(4, 6)), ok, step)
	h.rc(h.store(hd, 2, 0, r(1, 6), []uint64{9}), eParent, step)
	h.expect(hd, r(1, 6), "1/0=6 2/0=2", step)
	h.rc(h.store(hd, 3, 0, nil, r(1, 2)), eCapacity, step+" (no free lane)")
	h.rc(h.lib.Clear(hd, 1, 0, 0), ok, step)
	h.rc(h.store(hd, 3, 0, nil, r(1, 2)), ok, step)
	h.expect(hd, r(1, 6), "2/0=2 3/0=2", step)
	var c Counters
	c.StructSize = uint32(unsafe.Sizeof(c))
	h.rc(h.lib.Stats(hd, &c), ok, step)
	assert.Equal(h.t, [3]uint64{2, 4, 2}, [3]uint64{uint64(c.Mode), c.Blocks, c.Members}, "%s: stats mode, blocks, members", step)
	h.close(hd)
}

func (h *host) hashing() {
	step := "hash vectors V4 and V19, insert_tokens"
	hd := h.open(`{"block_size": 4}`)
	toks := []uint32{0, 1, 2, 3, 4, 5, 6, 7}
	out := make([]uint64, 2)
	var n uintptr
	h.rc(h.lib.HashTokens(hd, &toks[0], 8, nil, 0, nil, 0, &out[0], 2, &n), ok, step)
	assert.Equal(h.t, []uint64{9143094415614847814, 12124091508212882195}, out[:n], "%s: hash_tokens(0..7)", step)
	lora, ns := "adapter-a", "tenant-a"
	h.rc(h.lib.HashTokens(hd, &toks[0], 4, pstr(lora), 9, pstr(ns), 8, &out[0], 2, &n), ok, step)
	assert.Equal(h.t, []uint64{8269515957840517240}, out[:n], "%s: hash_tokens(0..3, lora+namespace)", step)
	ext := chain(out[:1])
	h.rc(h.lib.InsertTokens(hd, 3, 0, 0, nil, &ext[0], 1, &toks[0], 4, pstr(lora), 9, pstr(ns), 8), ok, step)
	h.expect(hd, out[:1], "3/0=1", step)
	h.close(hd)
}

func (h *host) score() {
	step := "score: prefix-then-load, load-only, ttft"
	hd := h.open("{}")
	h.rc(h.store(hd, 1, 0, nil, r(1, 4)), ok, step)
	h.rc(h.store(hd, 2, 0, nil, r(1, 1)), ok, step)
	cands := []Candidate{
		{ID: 1, Flags: candLoad | candRTT, ActivePrefillTokens: 1600, ActiveDecodeBlocks: 10, RTTms: 50},
		{ID: 2, Flags: candLoad | candRTT, RTTms: 1},
	}
	q := r(1, 4)
	for _, c := range []struct {
		policy uint32
		id     uint64
		cached uint64
	}{{policyPrefixThenLoad, 1, 4}, {policyLoadOnly, 2, 1}, {policyTTFT, 2, 1}} {
		req := ScoreRequest{StructSize: uint32(unsafe.Sizeof(ScoreRequest{})), Policy: c.policy, LocalHashes: &q[0], NHashes: 4,
			Candidates: &cands[0], NCandidates: 2, RandomSeed: 1}
		res := ScoreResult{StructSize: uint32(unsafe.Sizeof(ScoreResult{}))}
		h.rc(h.lib.Score(hd, &req, &res), ok, step)
		assert.Equal(h.t, [3]uint64{c.id, c.cached, 2}, [3]uint64{res.ID, res.CachedBlocks, uint64(res.Eligible)},
			"%s: policy %d chose (id, cached, eligible)", step, c.policy)
	}
	h.close(hd)
}

func (h *host) badArguments() {
	L := h.lib
	var hd0 uint64
	step := "bad arguments: goindex_open"
	big := "{}"
	h.rc(L.Open(pstr(big), 2, nil), eInval, step+" (NULL handle_out)")
	h.rc(L.Open(nil, 3, &hd0), eInval, step+" (NULL config)")
	h.rc(L.Open(pstr(big), maxConfig+1, &hd0), eTooBig, step+" (oversize)")
	for _, cfg := range []string{`{`, `{"mdoe":1}`, `{"lanes":0}`, `{"block_size":0}`, `{"clear_scope":"x"}`, `{"policy":"x"}`, `{"max_kicks":9999}`, `{} []`} {
		h.rc(L.Open(pstr(cfg), uintptr(len(cfg)), &hd0), eConfig, step+" "+cfg)
	}
	assert.Contains(h.t, h.lastError(0), "goindex_open: hostindex: bad config", "%s: last_error(0)", step)
	global := `{"mode":"global","dcs":[2,2]}`
	h.rc(L.Open(pstr(global), uintptr(len(global)), &hd0), eConfig, step+" "+global)
	assert.Contains(h.t, h.lastError(0), "dcs lists DC 2 twice", "%s: last_error(0)", step)

	hd := h.open(`{"block_size": 2}`)
	h.rc(h.store(hd, 0, 0, nil, []uint64{1}), ok, "bad arguments: setup")
	h.rc(h.store(hd, 1, 0, nil, []uint64{1}), ok, "bad arguments: setup")
	one := []uint64{1}
	two := []uint64{1, 1}
	unheld := uint64(5)
	toks := []uint32{1, 2, 3, 4}
	out := make([]uint64, 1)
	ov := make([]Overlap, 1)
	lens := []uintptr{1, 1}
	huge := make([]uintptr, 17)
	for i := range huge {
		huge[i] = maxBlocks
	}
	counts := make([]uintptr, 2)
	var n uintptr
	cand := Candidate{Flags: candLoad}
	req := func(edit func(*ScoreRequest)) *ScoreRequest {
		r := &ScoreRequest{StructSize: uint32(unsafe.Sizeof(ScoreRequest{})), Policy: policyLoadOnly, LocalHashes: &one[0], NHashes: 1,
			Candidates: &cand, NCandidates: 1}
		if edit != nil {
			edit(r)
		}
		return r
	}
	res := &ScoreResult{StructSize: uint32(unsafe.Sizeof(ScoreResult{}))}
	badCand, nanCand := Candidate{Flags: 8}, Candidate{Flags: candLoad | candRTT, RTTms: math.NaN()}
	frame, path := "xyz", "/dev/shm/x"
	cases := []struct {
		step string
		got  int32
		want int32
	}{
		{"insert NULL external", L.Insert(hd, 0, 0, 0, nil, nil, &one[0], 1), eInval},
		{"insert NULL local", L.Insert(hd, 0, 0, 0, nil, &one[0], nil, 1), eInval},
		{"insert oversize", L.Insert(hd, 0, 0, 0, nil, &one[0], &one[0], maxBlocks+1), eTooBig},
		{"insert unheld parent", L.Insert(hd, 5, 0, 0, &unheld, &one[0], &one[0], 1), eParent},
		{"insert parent among blocks", func() int32 {
			ext := chain(one)
			return L.Insert(hd, 0, 0, 0, &ext[0], &ext[0], &one[0], 1)
		}(), eSequence},
		{"insert_tokens NULL external", L.InsertTokens(hd, 0, 0, 0, nil, nil, 1, &toks[0], 2, nil, 0, nil, 0), eInval},
		{"insert_tokens NULL tokens", L.InsertTokens(hd, 0, 0, 0, nil, &one[0], 1, nil, 2, nil, 0, nil, 0), eInval},
		{"insert_tokens short tokens", L.InsertTokens(hd, 0, 0, 0, nil, &one[0], 1, &toks[0], 1, nil, 0, nil, 0), eInval},
		{"insert_tokens oversize tokens", L.InsertTokens(hd, 0, 0, 0, nil, &one[0], 1, &toks[0], maxTokens+1, nil, 0, nil, 0), eTooBig},
		{"insert_tokens NULL lora", L.InsertTokens(hd, 0, 0, 0, nil, &one[0], 1, &toks[0], 2, nil, 1, nil, 0), eInval},
		{"insert_tokens long lora", L.InsertTokens(hd, 0, 0, 0, nil, &one[0], 1, &toks[0], 2, pstr(path), maxName+1, nil, 0), eTooBig},
		{"insert_tokens NULL namespace", L.InsertTokens(hd, 0, 0, 0, nil, &one[0], 1, &toks[0], 2, nil, 0, nil, 1), eInval},
		{"insert_tokens long namespace", L.InsertTokens(hd, 0, 0, 0, nil, &one[0], 1, &toks[0], 2, nil, 0, pstr(path), maxName+1), eTooBig},
		{"remove NULL", L.Remove(hd, 0, 0, 0, nil, 1), eInval},
		{"remove oversize", L.Remove(hd, 0, 0, 0, &one[0], maxBlocks+1), eTooBig},
		{"remove unknown", L.Remove(hd, 0, 0, 0, &one[0], 1), eNotFound},
		{"hash_tokens NULL tokens", L.HashTokens(hd, nil, 4, nil, 0, nil, 0, &out[0], 1, &n), eInval},
		{"hash_tokens oversize", L.HashTokens(hd, &toks[0], maxTokens+1, nil, 0, nil, 0, &out[0], 1, &n), eTooBig},
		{"hash_tokens NULL lora", L.HashTokens(hd, &toks[0], 4, nil, 3, nil, 0, &out[0], 1, &n), eInval},
		{"hash_tokens long namespace", L.HashTokens(hd, &toks[0], 4, nil, 0, pstr(path), maxName+1, &out[0], 1, &n), eTooBig},
		{"hash_tokens NULL out", L.HashTokens(hd, &toks[0], 4, nil, 0, nil, 0, nil, 1, &n), eInval},
		{"hash_tokens NULL written", L.HashTokens(hd, &toks[0], 4, nil, 0, nil, 0, &out[0], 1, nil), eInval},
		{"hash_tokens small (needs 2)", L.HashTokens(hd, &toks[0], 4, nil, 0, nil, 0, &out[0], 1, &n), eBuffer},
		{"probe NULL hashes", L.Probe(hd, nil, 1, &ov[0], 1, &n), eInval},
		{"probe oversize", L.Probe(hd, &one[0], maxBlocks+1, &ov[0], 1, &n), eTooBig},
		{"probe NULL out", L.Probe(hd, &one[0], 1, nil, 1, &n), eInval},
		{"probe NULL written", L.Probe(hd, &one[0], 1, &ov[0], 1, nil), eInval},
		{"probe small (needs 2)", L.Probe(hd, &one[0], 1, &ov[0], 1, &n), eBuffer},
		{"probe_batch NULL hashes", L.ProbeBatch(hd, nil, &lens[0], 2, &ov[0], 1, &counts[0], &n), eInval},
		{"probe_batch NULL lengths", L.ProbeBatch(hd, &two[0], nil, 2, &ov[0], 1, &counts[0], &n), eInval},
		{"probe_batch NULL counts", L.ProbeBatch(hd, &two[0], &lens[0], 2, &ov[0], 1, nil, &n), eInval},
		{"probe_batch NULL out", L.ProbeBatch(hd, &two[0], &lens[0], 2, nil, 1, &counts[0], &n), eInval},
		{"probe_batch NULL written", L.ProbeBatch(hd, &two[0], &lens[0], 2, &ov[0], 1, &counts[0], nil), eInval},
		{"probe_batch too many", L.ProbeBatch(hd, &two[0], &lens[0], maxBatch+1, &ov[0], 1, &counts[0], &n), eTooBig},
		{"probe_batch total", L.ProbeBatch(hd, &two[0], &huge[0], 17, &ov[0], 1, &counts[0], &n), eTooBig},
		{"probe_batch small (needs 4)", L.ProbeBatch(hd, &two[0], &lens[0], 2, &ov[0], 1, &counts[0], &n), eBuffer},
		{"score NULL request", L.Score(hd, nil, res), eInval},
		{"score NULL result", L.Score(hd, req(nil), nil), eInval},
		{"score short result", L.Score(hd, req(nil), &ScoreResult{StructSize: 4}), eInval},
		{"score short request", L.Score(hd, req(func(r *ScoreRequest) { r.StructSize = 4 }), res), eInval},
		{"score policy 7", L.Score(hd, req(func(r *ScoreRequest) { r.Policy = 7 }), res), eInval},
		{"score temperature NaN", L.Score(hd, req(func(r *ScoreRequest) { r.Temperature = math.NaN() }), res), eInval},
		{"score unknown flags", L.Score(hd, req(func(r *ScoreRequest) { r.Candidates = &badCand }), res), eInval},
		{"score NaN rtt", L.Score(hd, req(func(r *ScoreRequest) { r.Candidates = &nanCand }), res), eInval},
		{"score NULL hashes", L.Score(hd, req(func(r *ScoreRequest) { r.LocalHashes = nil }), res), eInval},
		{"score oversize hashes", L.Score(hd, req(func(r *ScoreRequest) { r.NHashes = maxBlocks + 1 }), res), eTooBig},
		{"score NULL candidates", L.Score(hd, req(func(r *ScoreRequest) { r.Candidates = nil }), res), eInval},
		{"score oversize candidates", L.Score(hd, req(func(r *ScoreRequest) { r.NCandidates = maxCandidates + 1 }), res), eTooBig},
		{"score oversize isl", L.Score(hd, req(func(r *ScoreRequest) { r.ISLTokens = maxTokens + 1 }), res), eTooBig},
		{"score no eligible", L.Score(hd, req(func(r *ScoreRequest) { r.Policy = policyTTFT }), res), eNoCandidate},
		{"apply_frame NULL", L.ApplyFrame(hd, nil, 3), eInval},
		{"apply_frame oversize", L.ApplyFrame(hd, pstr(frame), maxFrame+1), eTooBig},
		{"apply_frame on an exact handle", L.ApplyFrame(hd, pstr(frame), 3), eMode},
		{"set_rtt on an exact handle", L.SetRTT(hd, 1, 1), eMode},
		{"set_rtt NaN", L.SetRTT(hd, 1, math.NaN()), eInval},
		{"attach_replica NULL", L.AttachReplica(hd, nil, 3), eInval},
		{"attach_replica oversize", L.AttachReplica(hd, pstr(path), maxName+1), eTooBig},
		{"attach_replica on an exact handle", L.AttachReplica(hd, pstr(path), uintptr(len(path))), eMode},
		{"stats NULL", L.Stats(hd, nil), eInval},
		{"stats struct_size 4", L.Stats(hd, &Counters{StructSize: 4}), eInval},
		{"last_error NULL buffer", L.LastError(hd, nil, 4, nil), eInval},
	}
	for _, c := range cases {
		h.rc(c.got, c.want, "bad arguments: "+c.step)
	}
	L.Probe(hd, &one[0], 1, &ov[0], 1, &n)
	assert.Equal(h.t, uintptr(2), n, "bad arguments: probe into 1 slot must report 2 needed")
	full := "goindex_probe: ffi: output buffer too small: out needs 2 entries, capacity 1"
	assert.Equal(h.t, full, h.lastError(hd), "bad arguments: last_error")
	buf := []byte("zzzzzzzzzz")
	var need uintptr
	h.rc(L.LastError(hd, &buf[0], 5, &need), ok, "last_error truncated")
	assert.Equal(h.t, "goin\x00zzzzz", string(buf), "last_error into 5 bytes: 4 bytes, NUL, rest untouched")
	assert.Equal(h.t, uintptr(len(full)+1), need, "last_error needed")
	assert.Equal(h.t, "unknown error", h.name(-99), "strerror(-99)")
	assert.Equal(h.t, "output buffer too small", h.name(eBuffer), "strerror(EBUFFER)")
	h.close(hd)

	c := Counters{StructSize: uint32(unsafe.Sizeof(Counters{}))}
	for _, bad := range []uint64{0, hd, math.MaxUint64} {
		for _, x := range []struct {
			step string
			got  int32
		}{
			{"insert", L.Insert(bad, 0, 0, 0, nil, &one[0], &one[0], 1)},
			{"insert_tokens", L.InsertTokens(bad, 0, 0, 0, nil, &one[0], 1, &toks[0], 2, nil, 0, nil, 0)},
			{"remove", L.Remove(bad, 0, 0, 0, &one[0], 1)}, {"clear", L.Clear(bad, 0, 0, 0)},
			{"remove_worker", L.RemoveWorker(bad, 0)}, {"remove_rank", L.RemoveRank(bad, 0, 0)},
			{"hash_tokens", L.HashTokens(bad, &toks[0], 4, nil, 0, nil, 0, &out[0], 1, &n)},
			{"probe", L.Probe(bad, &one[0], 1, &ov[0], 1, &n)},
			{"probe_batch", L.ProbeBatch(bad, &two[0], &lens[0], 2, &ov[0], 1, &counts[0], &n)},
			{"score", L.Score(bad, req(nil), res)}, {"apply_frame", L.ApplyFrame(bad, pstr(frame), 3)},
			{"attach_replica", L.AttachReplica(bad, pstr(path), 3)}, {"stats", L.Stats(bad, &c)}, {"close", L.Close(bad)},
			{"set_rtt", L.SetRTT(bad, 1, 1)},
		} {
			h.rc(x.got, eHandle, fmt.Sprintf("bad handle %d: %s", bad, x.step))
		}
		if bad != 0 {
			h.rc(L.LastError(bad, &buf[0], 4, nil), eHandle, fmt.Sprintf("bad handle %d: last_error", bad))
		}
	}
}
