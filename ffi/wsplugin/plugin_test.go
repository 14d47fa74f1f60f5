package wsplugin

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/goindex/goindex/dynamo/selector"
	"github.com/goindex/goindex/internal/testseed"
)

// Dynamo's status codes (include/goindex.h DYNAMO_WS_*).
const (
	wsOK         = 0
	wsInvalid    = 1
	wsUseDefault = 4
)

// wsColumnsSet is one selection's candidate columns in Go memory; build
// lays them out as Dynamo does (dynamo-compat §5a) and points in at them.
type wsColumnsSet struct {
	ids    []cU64
	ranks  []cU32
	cached []cU64
	loads  []wsLoad
	caps   []wsCapacity
	has    uint64
	cols   wsColumns
	in     wsInput
}

// newColumns fills every column the ttft policy reads from cands.
func newColumns(cands []selector.Candidate, isl uint64) *wsColumnsSet {
	s := &wsColumnsSet{has: selector.InputIdentity | selector.InputCachedTokens | selector.InputLoad | selector.InputCapacity}
	for _, c := range cands {
		s.ids = append(s.ids, cU64(c.WorkerID))
		s.ranks = append(s.ranks, cU32(c.DPRank))
		s.cached = append(s.cached, cU64(c.CachedTokens))
		s.loads = append(s.loads, wsLoad{active_prefill_tokens: cU64(c.ActivePrefillTokens), active_decode_blocks: cU64(c.ActiveDecodeBlocks),
			additional_active_blocks: cU64(c.AdditionalActiveBlocks)})
		s.caps = append(s.caps, wsCapacity{total_kv_blocks: cU64(c.TotalKVBlocks), max_num_batched_tokens: cU64(selector.Unavailable)})
	}
	s.in = wsInput{struct_size: cU32(unsafe.Sizeof(wsInput{})), candidate_format: 1, block_size: 16, isl_tokens: cU64(isl),
		candidate_count: cSize(len(cands))}
	return s
}

// build points the input at the columns (after any edit of the slices).
func (s *wsColumnsSet) build() *wsInput {
	s.cols = wsColumns{struct_size: cU32(unsafe.Sizeof(wsColumns{})), provided_inputs: cU64(s.has)}
	if len(s.ids) > 0 {
		s.cols.worker_ids, s.cols.dp_ranks, s.cols.cached_tokens = &s.ids[0], &s.ranks[0], &s.cached[0]
		s.cols.loads, s.cols.capacities = &s.loads[0], &s.caps[0]
	}
	s.in.candidate_columns = &s.cols
	return &s.in
}

// pluginState creates a plugin state from config and destroys it at the end
// of the test.
func pluginStateT(t *testing.T, config string) cU64 {
	t.Helper()
	var st cU64
	eb, buf := errBuf(256)
	if rc := dynamoSelectorCreate(u8p(config), cSize(len(config)), 1, &st, eb); rc != wsOK || st == 0 {
		t.Fatalf("create(%s) = %d, state %d: %s", config, rc, st, errText(eb, buf))
	}
	t.Cleanup(func() { dynamoSelectorDestroy(st) })
	return st
}

func u8p(s string) *inU8 {
	if s == "" {
		return nil
	}
	return (*inU8)(unsafe.Pointer(unsafe.StringData(s)))
}

func errBuf(n int) (*wsErrorBuf, []byte) {
	buf := make([]byte, n)
	eb := &wsErrorBuf{capacity: cSize(n)}
	if n > 0 {
		eb.ptr = (*wsU8)(unsafe.Pointer(&buf[0]))
	}
	return eb, buf
}

func errText(eb *wsErrorBuf, buf []byte) string { return string(buf[:eb.written]) }

// The plugin's choice over each layout (96- and 72-byte columns, rows)
// equals dynamo/selector's over the same candidates in Go: every layout is
// read at its offsets and every signal reaches the cost model. Random
// candidates, several configs.
func TestPlugin_SelectMatchesSelectorOnRandomColumns(t *testing.T) {
	s := testseed.For(t, 3)
	rng := rand.New(rand.NewPCG(s, 9))
	for _, config := range []string{``, `{"prefill_tokens_per_ms": 8, "decode_blocks_per_ms": 2}`, `{"policy": "credit"}`, `{"policy": "load-only"}`} {
		st := pluginStateT(t, config)
		cfg, err := selector.ParseConfig([]byte(config))
		if err != nil {
			t.Fatal(err)
		}
		ref, err := selector.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		var need cU64
		if rc := dynamoSelectorRequiredInputs(st, &need, nil); rc != wsOK || uint64(need) != ref.RequiredInputs() {
			t.Errorf("required_candidate_inputs(%s) = %d, %#x; want 0, %#x", config, rc, uint64(need), ref.RequiredInputs())
		}
		for range 200 {
			cands := make([]selector.Candidate, 1+rng.IntN(12))
			for i := range cands {
				cands[i] = selector.Candidate{WorkerID: rng.Uint64N(1 << 40), DPRank: uint32(rng.IntN(4)),
					HasCachedTokens: true, CachedTokens: uint64(rng.IntN(4096)),
					HasLoad: true, ActivePrefillTokens: uint64(rng.IntN(8192)), ActiveDecodeBlocks: uint64(rng.IntN(2000)),
					AdditionalActiveBlocks: uint64(rng.IntN(100)), HasCapacity: true, TotalKVBlocks: uint64(500 + rng.IntN(3000))}
				if rng.IntN(4) == 0 {
					cands[i].TotalKVBlocks = selector.Unavailable
				}
			}
			isl := uint64(1 + rng.IntN(8192))
			want, err := ref.Select(selector.Request{BlockSize: 16, ISLTokens: isl}, cands)
			if err != nil || want.UseDefault {
				t.Fatalf("selector.Select = %+v, %v", want, err)
			}
			cols := newColumns(cands, isl)
			cols72 := newColumns(cands, isl)
			in72 := cols72.build()
			cols72.cols.struct_size = 72 // fork d18d569's table: no default_* columns
			_, rowIn := newRows(cands, isl)
			for layout, in := range map[string]*wsInput{"columns96": cols.build(), "columns72": in72, "row": (*wsInput)(unsafe.Pointer(rowIn))} {
				var got cSize
				eb, buf := errBuf(256)
				if rc := dynamoSelectorSelect(st, in, &got, eb); rc != wsOK || int(got) != want.Index {
					t.Errorf("select(%s, %s, %d candidates, isl %d) = %d, index %d; want 0, %d (selector): %s (GOINDEX_SEED=%d)",
						layout, config, len(cands), isl, rc, got, want.Index, errText(eb, buf), s)
				}
			}
		}
	}
}

// Columns the policy needs but the host did not provide, and zero
// candidates, make the plugin defer to Dynamo's own selector.
func TestPlugin_UseDefaultWhenInputsAreMissing(t *testing.T) {
	st := pluginStateT(t, `{}`)
	cands := []selector.Candidate{{WorkerID: 1, HasLoad: true, HasCachedTokens: true, CachedTokens: 64}, {WorkerID: 2, HasLoad: true, HasCachedTokens: true}}
	for name, edit := range map[string]func(c *wsColumnsSet){
		"zero candidates":   func(c *wsColumnsSet) { c.in.candidate_count = 0 },
		"zero, no columns":  func(c *wsColumnsSet) { c.in.candidate_count = 0; c.in.candidate_columns = nil },
		"no load column":    func(c *wsColumnsSet) { c.has &^= selector.InputLoad },
		"no cached tokens":  func(c *wsColumnsSet) { c.has &^= selector.InputCachedTokens },
		"nothing provided":  func(c *wsColumnsSet) { c.has = 0 },
		"only the identity": func(c *wsColumnsSet) { c.has = selector.InputIdentity },
	} {
		c := newColumns(cands, 128)
		in := c.build()
		edit(c)
		c.cols.provided_inputs = cU64(c.has)
		got := cSize(77)
		if rc := dynamoSelectorSelect(st, in, &got, nil); rc != wsUseDefault || got != 77 {
			t.Errorf("%s: select = %d (index out %d); want USE_DEFAULT (4), index untouched", name, rc, got)
		}
	}
	// Capacity is optional for ttft: without it the choice still stands.
	c := newColumns(cands, 128)
	c.has &^= selector.InputCapacity
	var got cSize
	if rc := dynamoSelectorSelect(st, c.build(), &got, nil); rc != wsOK || got != 0 {
		t.Errorf("select without capacities = %d, index %d; want 0 and the cached worker 0", rc, got)
	}
}

// Every input the plugin cannot use is USE_DEFAULT with the reason in the
// error buffer, never a status that fails the request nor a crash, and
// leaves the state usable.
func TestPlugin_UnfamiliarInputIsUseDefault(t *testing.T) {
	st := pluginStateT(t, ``)
	cands := []selector.Candidate{{WorkerID: 1, HasLoad: true, HasCachedTokens: true}, {WorkerID: 2, HasLoad: true, HasCachedTokens: true}}
	misaligned := make([]cU64, 8)
	for _, c := range []struct {
		name, detail string
		edit         func(c *wsColumnsSet)
	}{
		{"input struct_size 87", "struct_size 87", func(c *wsColumnsSet) { c.in.struct_size = 87 }},
		{"input struct_size 0", "struct_size 0", func(c *wsColumnsSet) { c.in.struct_size = 0 }},
		{"word @4 is 0", "word @4 is 0", func(c *wsColumnsSet) { c.in.candidate_format = 0 }},
		{"format 2", "word @4 is 2", func(c *wsColumnsSet) { c.in.candidate_format = 2 }},
		{"candidate size 136", "word @4 is 136", func(c *wsColumnsSet) { c.in.candidate_format = 136 }},
		{"columns NULL", "candidate_columns is NULL", func(c *wsColumnsSet) { c.in.candidate_columns = nil }},
		{"columns struct_size 71", "columns struct_size 71", func(c *wsColumnsSet) { c.cols.struct_size = 71 }},
		{"too many candidates", "at most", func(c *wsColumnsSet) { c.in.candidate_count = 1<<16 + 1 }},
		{"worker_ids NULL", "worker_ids is provided", func(c *wsColumnsSet) { c.cols.worker_ids = nil }},
		{"dp_ranks NULL", "dp_ranks is provided", func(c *wsColumnsSet) { c.cols.dp_ranks = nil }},
		{"cached_tokens NULL", "cached_tokens is provided", func(c *wsColumnsSet) { c.cols.cached_tokens = nil }},
		{"loads NULL", "loads is provided", func(c *wsColumnsSet) { c.cols.loads = nil }},
		{"capacities NULL", "capacities is provided", func(c *wsColumnsSet) { c.cols.capacities = nil }},
		{"misaligned cached_tokens", "aligned", func(c *wsColumnsSet) {
			c.cols.cached_tokens = (*cU64)(unsafe.Add(unsafe.Pointer(&misaligned[0]), 4))
		}},
		{"block_size 0", "block size 0", func(c *wsColumnsSet) { c.in.block_size = 0 }},
	} {
		cols := newColumns(cands, 64)
		in := cols.build()
		c.edit(cols)
		eb, buf := errBuf(512)
		got := cSize(77)
		rc := dynamoSelectorSelect(st, in, &got, eb)
		if msg := errText(eb, buf); rc != wsUseDefault || got != 77 || !strings.Contains(msg, c.detail) {
			t.Errorf("%s: select = %d, index %d, error %q; want USE_DEFAULT (4) mentioning %q, index untouched", c.name, rc, got, msg, c.detail)
		}
	}
	// Misaligned rows and column tables (structs holding pointers, which
	// checkptr refuses to build in Go) are tests/c's plugin hosts' cases.
	_, rowIn := newRows(cands, 64)
	rowIn.candidates = nil
	if rc := dynamoSelectorSelect(st, (*wsInput)(unsafe.Pointer(rowIn)), new(cSize), nil); rc != wsUseDefault {
		t.Errorf("select(NULL rows) = %d, want USE_DEFAULT", rc)
	}
	var out cSize
	if rc := dynamoSelectorSelect(st, nil, &out, nil); rc != wsUseDefault {
		t.Errorf("select(NULL input) = %d, want USE_DEFAULT", rc)
	}
	if rc := dynamoSelectorSelect(st, newColumns(cands, 64).build(), nil, nil); rc != wsUseDefault {
		t.Errorf("select(NULL index out) = %d, want USE_DEFAULT", rc)
	}
	if rc := dynamoSelectorSelect(st, newColumns(cands, 64).build(), &out, nil); rc != wsOK {
		t.Errorf("select after the unusable calls = %d, want OK: the state stays usable", rc)
	}
}

// newRows lays cands out in the row layout (ai-dynamo/dynamo 167f1d6:
// candidate_size 128 at offset 4, an array of 128-byte candidates).
func newRows(cands []selector.Candidate, isl uint64) ([]wsCandidate, *wsRowInput) {
	rows := make([]wsCandidate, len(cands))
	for i, c := range cands {
		rows[i] = wsCandidate{worker_id: cU64(c.WorkerID), dp_rank: cU32(c.DPRank), cached_tokens: cU64(c.CachedTokens),
			active_prefill_tokens: cU64(c.ActivePrefillTokens), active_decode_blocks: cU64(c.ActiveDecodeBlocks),
			additional_active_blocks: cU64(c.AdditionalActiveBlocks), preferred_taint_multiplier: 1,
			total_kv_blocks: cU64(c.TotalKVBlocks), max_num_batched_tokens: cU64(selector.Unavailable)}
	}
	in := &wsRowInput{struct_size: cU32(unsafe.Sizeof(wsRowInput{})), candidate_size: cU32(unsafe.Sizeof(wsCandidate{})),
		block_size: 16, isl_tokens: cU64(isl), candidate_count: cSize(len(cands))}
	if len(rows) > 0 {
		in.candidates = &rows[0]
	}
	return rows, in
}

// create, destroy and the unknown states: bad configs and roles are
// INVALID_INPUT with a NULL state; a destroyed state is unknown; the error
// message is cut to the buffer at a UTF-8 boundary.
func TestPlugin_CreateDestroyAndUnknownStates(t *testing.T) {
	for _, c := range []struct {
		config string
		role   cU32
		detail string
	}{
		{`{"polcy": "ttft"}`, 1, "unknown field"},
		{`{"policy": "round-robin"}`, 1, "makes no sense"},
		{`{"prefill_tokens_per_ms": -1}`, 1, "positive"},
		{`{} {}`, 2, "trailing"},
		{`{}`, 3, "router_role 3"},
		{strings.Repeat(" ", selector.MaxConfigBytes+1), 0, "over"},
	} {
		st := cU64(99)
		eb, buf := errBuf(256)
		if rc := dynamoSelectorCreate(u8p(c.config), cSize(len(c.config)), c.role, &st, eb); rc != wsInvalid || st != 0 || !strings.Contains(errText(eb, buf), c.detail) {
			t.Errorf("create(%.30q, role %d) = %d, state %d, error %q; want INVALID_INPUT, state 0, mentioning %q", c.config, c.role, rc, st, errText(eb, buf), c.detail)
		}
	}
	if rc := dynamoSelectorCreate(nil, 0, 0, nil, nil); rc != wsInvalid {
		t.Errorf("create(state_out NULL) = %d, want INVALID_INPUT", rc)
	}
	if rc := dynamoSelectorCreate(nil, 5, 0, new(cU64), nil); rc != wsInvalid {
		t.Errorf("create(config NULL with length 5) = %d, want INVALID_INPUT", rc)
	}
	var st cU64
	if rc := dynamoSelectorCreate(nil, 0, 2, &st, nil); rc != wsOK || st == 0 {
		t.Fatalf("create(empty config, prefill role) = %d, state %d", rc, st)
	}
	dynamoSelectorDestroy(st)
	dynamoSelectorDestroy(st) // twice: ignored
	dynamoSelectorDestroy(0)
	var need cU64
	var out cSize
	for _, bad := range []cU64{st, 0, 1 << 40} {
		eb, buf := errBuf(256)
		if rc := dynamoSelectorRequiredInputs(bad, &need, eb); rc != wsInvalid || !strings.Contains(errText(eb, buf), "not a live plugin state") {
			t.Errorf("required_candidate_inputs(state %d) = %d (%q), want INVALID_INPUT", bad, rc, errText(eb, buf))
		}
		if rc := dynamoSelectorSelect(bad, nil, &out, nil); rc != wsUseDefault {
			t.Errorf("select(state %d) = %d, want USE_DEFAULT", bad, rc)
		}
	}
	live := pluginStateT(t, ``)
	if rc := dynamoSelectorRequiredInputs(live, nil, nil); rc != wsInvalid {
		t.Errorf("required_candidate_inputs(NULL out) = %d, want INVALID_INPUT", rc)
	}
	// A 7-byte buffer holds "goindex" of the message; 3 bytes of "é…" must
	// not split the two-byte rune.
	for _, n := range []int{0, 1, 7} {
		eb, buf := errBuf(n)
		eb.written = 99
		rc := dynamoSelectorRequiredInputs(st, &need, eb)
		if msg := errText(eb, buf); rc != wsInvalid || len(msg) != n || !utf8.ValidString(msg) {
			t.Errorf("error buffer of %d bytes: written %d (%q), want %d valid bytes", n, eb.written, msg, n)
		}
	}
	eb, buf := errBuf(3)
	wsFail(eb, wsInvalid, errorString("aé…"))
	if msg := errText(eb, buf); msg != "aé" {
		t.Errorf("wsFail into 3 bytes of %q = %q, want %q (cut at a rune boundary)", "aé…", msg, "aé")
	}
	eb, buf = errBuf(2)
	wsFail(eb, wsInvalid, errorString("aé"))
	if msg := errText(eb, buf); msg != "a" {
		t.Errorf("wsFail into 2 bytes of %q = %q, want %q", "aé", msg, "a")
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// A panic inside create or required_candidate_inputs is PANICKED with its
// message; inside select it is USE_DEFAULT, so the request is still
// served. The registry stays usable.
func TestPlugin_PanicIsPanickedOrUseDefault(t *testing.T) {
	for guard, want := range map[string]wsStatus{"wsGuard": 3, "selectGuard": wsUseDefault} {
		boom := func(eb *wsErrorBuf) (rc wsStatus) {
			if guard == "wsGuard" {
				defer wsGuard(&rc, eb)
			} else {
				defer selectGuard(&rc, eb)
			}
			panic("boom")
		}
		eb, buf := errBuf(128)
		if rc := boom(eb); rc != want || !strings.Contains(errText(eb, buf), "panic: boom") {
			t.Errorf("%s: guarded panic = %d (%q), want %d with its message", guard, rc, errText(eb, buf), want)
		}
	}
	pluginStateT(t, ``)
}

// Go names of the C types the exports take, for the tests (the package's
// own names for the header's types).
type (
	cU64   = _Ctype_uint64_t
	cU32   = _Ctype_uint32_t
	cSize  = _Ctype_size_t
	inU8   = _Ctype_goindex_in_u8
	status = _Ctype_int
)
