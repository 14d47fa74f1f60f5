package main

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/goindex/goindex/goindex/score"
)

// The Go runner of tests/c/fixture's scripts (fixture.Script documents the
// lines); tests/c/global_test.c runs the same scripts from C.

// scriptConfig returns the script's config line.
func scriptConfig(t testing.TB, script string) string {
	t.Helper()
	for _, line := range strings.Split(script, "\n") {
		if cfg, ok := strings.CutPrefix(line, "config "); ok {
			return cfg
		}
	}
	t.Fatal("the script has no config line")
	return ""
}

// scriptLine is one parsed line: its op, label and numeric fields.
type scriptLine struct {
	no     int
	op     string
	label  string
	fields []string
}

func (l *scriptLine) u64(t testing.TB, i int) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(l.fields[i], 10, 64)
	if err != nil {
		t.Fatalf("script line %d: field %d: %v", l.no, i, err)
	}
	return v
}

func (l *scriptLine) int(t testing.TB, i int) int {
	t.Helper()
	v, err := strconv.Atoi(l.fields[i])
	if err != nil {
		t.Fatalf("script line %d: field %d: %v", l.no, i, err)
	}
	return v
}

// hashes reads a count and that many hashes from field i, and returns
// them with the index of the next field.
func (l *scriptLine) hashes(t testing.TB, i int) ([]uint64, int) {
	n := l.int(t, i)
	q := make([]uint64, n)
	for j := range q {
		q[j] = l.u64(t, i+1+j)
	}
	return q, i + 1 + n
}

// runScript runs the lines of variant v (and the lines before any variant
// line) on h; v 0 runs a script that has no variants.
func runScript(t *testing.T, h cU64, script string, v int) {
	t.Helper()
	current := 0
	for no, text := range strings.Split(script, "\n") {
		f := strings.Fields(text)
		if len(f) == 0 || f[0] == "config" {
			continue
		}
		if f[0] == "variant" {
			current, _ = strconv.Atoi(f[1])
			continue
		}
		if current != v {
			continue
		}
		l := scriptLine{no: no + 1, op: f[0], fields: f[1:]}
		if l.op != "rtt" && l.op != "stats" {
			l.label, l.fields = f[1], f[2:]
		}
		runLine(t, h, &l)
	}
}

func runLine(t *testing.T, h cU64, l *scriptLine) {
	t.Helper()
	where := fmt.Sprintf("script line %d (%s %s)", l.no, l.op, l.label)
	switch l.op {
	case "apply":
		want := l.int(t, 0)
		frame, err := hex.DecodeString(l.fields[1])
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if rc := goindex_apply_frame(h, (*inU8)(unsafe.SliceData(frame)), cSize(len(frame))); int(rc) != want {
			t.Errorf("%s: goindex_apply_frame(%d bytes) = %d, want %d: %s", where, len(frame), rc, want, lastError(h))
		}
	case "rtt":
		ms, err := strconv.ParseFloat(l.fields[1], 64)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if rc := goindex_set_rtt(h, cU64(l.u64(t, 0)), cDouble(ms)); rc != 0 {
			t.Errorf("%s: goindex_set_rtt = %d: %s", where, rc, lastError(h))
		}
	case "probe":
		q, i := l.hashes(t, 0)
		var want []string
		for k := l.int(t, i); k > 0; k-- {
			want = append(want, fmt.Sprintf("%s/%s=%s", l.fields[i+1], l.fields[i+2], l.fields[i+3]))
			i += 3
		}
		if got := probe(t, h, q); got != strings.Join(want, " ") {
			t.Errorf("%s: goindex_probe(%d hashes) = %q, want %q", where, len(q), got, strings.Join(want, " "))
		}
	case "score":
		policy := l.int(t, 0)
		q, i := l.hashes(t, 1)
		want, lane, dc, eligible, degraded := l.int(t, i), l.int(t, i+1), l.u64(t, i+2), l.int(t, i+3), l.int(t, i+4)
		res, rc := scoreLanes(h, policy, q, unsafe.Sizeof(resultC{}))
		if int(rc) != want {
			t.Errorf("%s: goindex_score = %d, want %d: %s", where, rc, want, lastError(h))
		} else if rc == 0 && (int(res.chosen) != lane || uint64(res.id) != dc || int(res.eligible) != eligible ||
			int(res.degraded) != degraded || (res.flags == 1) != (degraded != 0)) {
			t.Errorf("%s: goindex_score chose lane %d (DC %d) of %d eligible, degraded %d (flags %d); want lane %d (DC %d) of %d, degraded %d",
				where, res.chosen, res.id, res.eligible, res.degraded, res.flags, lane, dc, eligible, degraded)
		}
		if degraded != 0 {
			if _, rc := scoreLanes(h, policy, q, scoreResultV1Bytes); rc != code(score.ErrNoCandidate) {
				t.Errorf("%s: goindex_score with a 72-byte result = %d, want GOINDEX_ENOCANDIDATE (earlier hosts' contract)", where, rc)
			}
		}
	case "stats":
		c := stats(t, h)
		got := []uint64{uint64(c.lanes_ready), uint64(c.frames_applied), uint64(c.frames_rejected), uint64(c.frames_ignored), uint64(c.replica_generation)}
		for i, name := range []string{"lanes_ready", "frames_applied", "frames_rejected", "frames_ignored", "replica_generation"} {
			if want := l.u64(t, i); got[i] != want {
				t.Errorf("%s: goindex_stats %s = %d, want %d", where, name, got[i], want)
			}
		}
	default:
		t.Fatalf("%s: unknown op", where)
	}
}

// scoreLanes scores q over every ready lane (no candidates) with a fixed
// seed, into a result of size bytes.
func scoreLanes(h cU64, policy int, q []uint64, size uintptr) (resultC, status) {
	req := requestC{struct_size: cU32(unsafe.Sizeof(requestC{})), policy: cU32(policy), n_hashes: cSize(len(q)), random_seed: 1}
	if len(q) > 0 {
		req.local_hashes = (*cU64)(unsafe.Pointer(unsafe.SliceData(q)))
	}
	res := resultC{struct_size: cU32(size)}
	rc := goindex_score(h, &req, &res)
	return res, rc
}

func stats(t testing.TB, h cU64) countersC {
	t.Helper()
	c := countersC{struct_size: cU32(unsafe.Sizeof(countersC{}))}
	if rc := goindex_stats(h, &c); rc != 0 {
		t.Fatalf("goindex_stats = %d: %s", rc, lastError(h))
	}
	return c
}
