package main

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/ckfindex"
	"github.com/goindex/goindex/goindex/hostindex"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
	"github.com/goindex/goindex/goindex/score"
	"github.com/goindex/goindex/internal/testseed"
)

// The tests call the exports as Go functions with Go memory: everything but
// the cgo transition itself (tests/c, tests/python and tests/gohost cover
// that on the real library), and under -race.

// mix64 and chainOf are tests/c/chain.h's opaque external hashes: a
// SplitMix64 fold over the chain prefix.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xBF58476D1CE4E5B9
	z ^= z >> 27
	z *= 0x94D049BB133111EB
	z ^= z >> 31
	return z
}

const chainRoot = 0xD1B54A32D192ED03

func chainOf(locals []uint64) []uint64 {
	ext, prev := make([]uint64, len(locals)), uint64(chainRoot)
	for i, l := range locals {
		prev = mix64(prev ^ mix64(l))
		ext[i] = prev
	}
	return ext
}

func u64p(s []uint64) *inU64 { return (*inU64)(unsafe.Pointer(unsafe.SliceData(s))) }

func charp(s string) *inChar { return (*inChar)(unsafe.Pointer(unsafe.StringData(s))) }

// openT opens a handle and closes it when the test ends.
func openT(t testing.TB, cfg string) cU64 {
	t.Helper()
	var h cU64
	if rc := goindex_open(charp(cfg), cSize(len(cfg)), &h); rc != 0 {
		t.Fatalf("goindex_open(%s) = %d: %s", cfg, rc, handles.openError())
	}
	t.Cleanup(func() {
		if rc := goindex_close(h); rc != 0 {
			t.Errorf("goindex_close(%d) = %d", h, rc)
		}
	})
	return h
}

// store inserts blocks below the chain of prefix on (w, 0), local hashes
// being the values themselves (dynamo-compat §3.5's convention).
func store(h cU64, w uint64, prefix, blocks []uint64) status {
	ext := chainOf(append(append([]uint64(nil), prefix...), blocks...))
	var parent *inU64
	if len(prefix) > 0 {
		parent = u64p(ext[len(prefix)-1:])
	}
	return goindex_insert(h, cU64(w), 0, 0, parent, u64p(ext[len(prefix):]), u64p(blocks), cSize(len(blocks)))
}

// probe returns the probe of q as "w/r=d …".
func probe(t testing.TB, h cU64, q []uint64) string {
	t.Helper()
	out := make([]overlapC, 64)
	var n cSize
	if rc := goindex_probe(h, u64p(q), cSize(len(q)), &out[0], cSize(len(out)), &n); rc != 0 {
		t.Fatalf("goindex_probe(%v) = %d", q, rc)
	}
	parts := make([]string, n)
	for i, o := range out[:n] {
		parts[i] = fmt.Sprintf("%d/%d=%d", o.id, o.rank, o.blocks)
	}
	return strings.Join(parts, " ")
}

func lastError(h cU64) string {
	buf := make([]byte, 512)
	if rc := goindex_last_error(h, (*cChar)(unsafe.Pointer(&buf[0])), cSize(len(buf)), nil); rc != 0 {
		return fmt.Sprintf("goindex_last_error = %d", rc)
	}
	return string(buf[:strings.IndexByte(string(buf), 0)])
}

func TestCode_MapsEverySentinelThroughWrapping(t *testing.T) {
	for _, row := range codes {
		if got := code(fmt.Errorf("call: %w", row.err)); got != row.code {
			t.Errorf("code(wrapped %v) = %d, want %d", row.err, got, row.code)
		}
		if name := goindex_strerror(row.code); name == unknownName {
			t.Errorf("goindex_strerror(%d) = unknown error, want a name", row.code)
		}
	}
	if got := code(nil); got != 0 {
		t.Errorf("code(nil) = %d, want 0", got)
	}
	if got := code(errors.New("stray")); got != code(errInternal) {
		t.Errorf("code(unmapped) = %d, want GOINDEX_EINTERNAL", got)
	}
	for _, err := range []error{radix.ErrParentNotFound, radix.ErrInvalidBlockSequence, radix.ErrConflictingBlock, radix.ErrBlockNotFound,
		radix.ErrCapacity, ckf.ErrParentBlockNotFound, ckf.ErrInvalidBlockSequence, ckf.ErrCapacityExhausted, ckfindex.ErrNoFreeLane,
		score.ErrNoCandidate} {
		if code(err) == code(errInternal) {
			t.Errorf("code(%v) = GOINDEX_EINTERNAL: the index sentinel has no row", err)
		}
	}
}

func TestGuard_PanicBecomesInternalWithDetail(t *testing.T) {
	h := openT(t, "{}")
	boom := func(id uint64) (rc status) {
		defer guard(&rc, id, "goindex_boom")
		panic("boom")
	}
	if rc := boom(uint64(h)); rc != code(errInternal) {
		t.Errorf("guarded panic = %d, want GOINDEX_EINTERNAL", rc)
	}
	if msg := lastError(h); msg != "goindex_boom: ffi: internal error: panic: boom" {
		t.Errorf("last_error after a panic = %q", msg)
	}
	if rc := boom(0); rc != code(errInternal) || !strings.Contains(handles.openError(), "panic: boom") {
		t.Errorf("guarded panic on handle 0 = %d, open error %q", rc, handles.openError())
	}
	if got := probe(t, h, []uint64{1}); got != "" {
		t.Errorf("probe after a recovered panic = %q, want the handle still usable", got)
	}
}

func TestHandles_NeverReusedAndClosedMeansEHANDLE(t *testing.T) {
	var a, b cU64
	if goindex_open(nil, 0, &a) != 0 || goindex_close(a) != 0 || goindex_open(nil, 0, &b) != 0 {
		t.Fatal("open/close/open failed")
	}
	defer goindex_close(b)
	if b <= a {
		t.Errorf("handle after close = %d, want above %d", b, a)
	}
	if rc := goindex_close(a); rc != code(errHandle) {
		t.Errorf("second goindex_close(%d) = %d, want GOINDEX_EHANDLE", a, rc)
	}
	if rc := store(a, 0, nil, []uint64{1}); rc != code(errHandle) {
		t.Errorf("insert on a closed handle = %d, want GOINDEX_EHANDLE", rc)
	}
}

func TestProbe_SortedByMemberAndTruncatedAtMismatch(t *testing.T) {
	h := openT(t, "{}")
	for _, w := range []uint64{9, 3, 5} {
		if rc := store(h, w, nil, []uint64{1, 2, 3}); rc != 0 {
			t.Fatalf("store(%d) = %d", w, rc)
		}
	}
	if rc := store(h, 3, []uint64{1, 2, 3}, []uint64{4}); rc != 0 {
		t.Fatalf("store(3, [1 2 3]→[4]) = %d", rc)
	}
	if got, want := probe(t, h, []uint64{1, 2, 3, 4}), "3/0=4 5/0=3 9/0=3"; got != want {
		t.Errorf("probe([1 2 3 4]) = %q, want %q", got, want)
	}
	if got, want := probe(t, h, []uint64{1, 7, 3}), "3/0=1 5/0=1 9/0=1"; got != want {
		t.Errorf("probe([1 7 3]) = %q, want %q", got, want)
	}
}

// TestProbe_ConcurrentWithEvents runs probes on several goroutines while one
// applies events, in both modes (under -race, the lock-free read path is
// checked too): no probe may report a depth above what its member ever
// stored. In ckf mode a probe racing a lane's reassignment may credit the
// lane to its previous member (ckfindex's documented weak read), so the
// bound there is the deepest chain any member stored.
func TestProbe_ConcurrentWithEvents(t *testing.T) {
	for _, mode := range []string{"exact", "ckf"} {
		t.Run("mode="+mode, func(t *testing.T) { probeDuringEvents(t, mode) })
	}
}

func probeDuringEvents(t *testing.T, mode string) {
	const members, depth = 4, 32
	h := openT(t, fmt.Sprintf(`{"mode": %q, "lanes": 8, "expected_blocks_per_lane": 256}`, mode))
	s := testseed.For(t, 7)
	q := make([]uint64, depth)
	for i := range q {
		q[i] = uint64(i + 1)
	}
	ext := chainOf(q)
	var maxStored [members]atomic.Uint32
	var done atomic.Bool
	var wg sync.WaitGroup
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]overlapC, members)
			for n := 0; !done.Load() || n < 50; n++ {
				var w cSize
				if rc := goindex_probe(h, u64p(q), depth, &out[0], members, &w); rc != 0 {
					t.Errorf("goindex_probe = %d", rc)
					return
				}
				for _, o := range out[:w] {
					if o.id >= members {
						t.Errorf("probe: unknown member %d", o.id)
						return
					}
					bound := maxStored[o.id].Load()
					if mode == "ckf" {
						for m := range maxStored {
							bound = max(bound, maxStored[m].Load())
						}
					}
					if uint32(o.blocks) > bound {
						t.Errorf("probe: member %d depth %d, at most %d ever stored (GOINDEX_SEED=%d)", o.id, o.blocks, bound, s)
						return
					}
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(s, 1))
	var held [members]int            // reachable prefix
	var tracked [members][depth]bool // positions held, orphans included
	rounds := 2000
	if testing.Short() {
		rounds = 300
	}
	for i := 0; i < rounds; i++ {
		w, k := rng.IntN(members), rng.IntN(depth)+1
		var rc status
		switch rng.IntN(4) {
		case 0, 1:
			if k > held[w] {
				if uint32(k) > maxStored[w].Load() {
					maxStored[w].Store(uint32(k))
				}
				var parent *inU64
				if held[w] > 0 {
					parent = u64p(ext[held[w]-1:])
				}
				rc = goindex_insert(h, cU64(w), 0, 0, parent, u64p(ext[held[w]:]), u64p(q[held[w]:]), cSize(k-held[w]))
				for p := held[w]; p < k; p++ {
					tracked[w][p] = true
				}
				held[w] = k
			}
		case 2:
			if k <= held[w] {
				rc = goindex_remove(h, cU64(w), 0, 0, u64p(ext[k-1:]), 1)
				tracked[w][k-1] = false
				held[w] = k - 1
			}
		default:
			rc = goindex_clear(h, cU64(w), 0, 0)
			tracked[w] = [depth]bool{}
			held[w] = 0
		}
		if rc != 0 {
			t.Fatalf("event %d on worker %d = %d: %s (GOINDEX_SEED=%d)", i, w, rc, lastError(h), s)
		}
	}
	done.Store(true)
	wg.Wait()
	// Exact mode must give each member its reachable depth, held[w]; ckf may
	// also count blocks still tracked below a removed one, up to the held
	// prefix (the harness's bounds, dynamo-compat §3.6).
	final := make([]overlapC, members)
	var n cSize
	if rc := goindex_probe(h, u64p(q), depth, &final[0], members, &n); rc != 0 {
		t.Fatalf("final goindex_probe = %d", rc)
	}
	got := make(map[uint64]int)
	for _, o := range final[:n] {
		got[uint64(o.id)] = int(o.blocks)
	}
	for w := range held {
		heldLen := 0
		for heldLen < depth && tracked[w][heldLen] {
			heldLen++
		}
		d, hi := got[uint64(w)], held[w]
		if mode == "ckf" {
			hi = heldLen
		}
		if d < held[w] || d > hi {
			t.Errorf("%s: final depth of member %d = %d, want within [%d, %d] (GOINDEX_SEED=%d)", mode, w, d, held[w], hi, s)
		}
	}
}

// putSorted, goindex_probe's sort while copying into the host's buffer, is
// checked against its slow reference (SortMembers, then putOverlaps) on
// random results of distinct members, short (insertion) and long
// (fallback), with runs already in order as Match tends to emit them.
func TestPutSorted_MatchesSortThenCopy(t *testing.T) {
	s := testseed.For(t, 5)
	rng := rand.New(rand.NewPCG(s, 3))
	for trial := 0; trial < 500; trial++ {
		n := rng.IntN(2*hostindex.InsertionSortMax + 1)
		o := make([]kv.Overlap, n)
		for i, m := range rng.Perm(4 * n)[:n] {
			o[i] = kv.Overlap{Member: kv.Member{Worker: uint64(m / 4), Rank: uint32(m % 4)}, Blocks: 1 + rng.IntN(64)}
		}
		if rng.IntN(2) == 0 {
			slices.SortFunc(o[:n/2], byMember)
		}
		ref := slices.Clone(o)
		hostindex.SortMembers(ref)
		want, got := make([]overlapC, n+1), make([]overlapC, n+1)
		putOverlaps(&want[0], ref)
		putSorted(&got[0], o)
		if !slices.Equal(got, want) {
			t.Fatalf("putSorted(%d entries) = %v, want %v (GOINDEX_SEED=%d)", n, got[:n], want[:n], s)
		}
	}
}

// A result wider than goindex_probe's stack buffer comes back whole and
// sorted, and from then on the handle's probes use the pooled scratch.
func TestProbe_WiderThanStackBuffer(t *testing.T) {
	h := openT(t, "{}")
	const workers = probeStackEntries + 8
	var want []string
	for w := uint64(workers); w > 0; w-- { // stored in reverse: Match's order is not the ABI's
		if rc := store(h, w, nil, []uint64{1, 2, w%3 + 10}); rc != 0 {
			t.Fatalf("store(%d) = %d", w, rc)
		}
	}
	for w := uint64(1); w <= workers; w++ {
		want = append(want, fmt.Sprintf("%d/0=%d", w, 2+btoi(w%3 == 0)))
	}
	q := []uint64{1, 2, 10}
	for i := 0; i < 2; i++ { // through the stack buffer, then the pool
		if got := probe(t, h, q); got != strings.Join(want, " ") {
			t.Errorf("probe %d of %v = %q, want %q", i, q, got, strings.Join(want, " "))
		}
		if i == 0 && !handles.Get(uint64(h)).wideProbes.Load() {
			t.Errorf("after a probe of %d entries wideProbes = false, want true", workers)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func byMember(a, b kv.Overlap) int {
	if a.Member.Worker != b.Member.Worker {
		return cmp.Compare(a.Member.Worker, b.Member.Worker)
	}
	return cmp.Compare(a.Member.Rank, b.Member.Rank)
}

// goindex_remove of hashes never inserted is GOINDEX_ENOTFOUND in both
// event modes, as include/goindex.h promises (ckf mode used to say OK), and
// the known ones of a mixed removal are removed.
func TestRemove_UnknownHashesAreENOTFOUNDInEveryMode(t *testing.T) {
	for _, cfg := range []string{`{}`, `{"mode":"ckf","lanes":4,"expected_blocks_per_lane":64}`} {
		h := openT(t, cfg)
		locals := []uint64{1, 2, 3}
		ext := chainOf(locals)
		if rc := store(h, 7, nil, locals); rc != 0 {
			t.Fatalf("%s: store = %d: %s", cfg, rc, lastError(h))
		}
		if rc := goindex_remove(h, 7, 0, 1, u64p([]uint64{0xdead}), 1); rc != code(radix.ErrBlockNotFound) {
			t.Errorf("%s: remove of a hash never inserted = %d, want GOINDEX_ENOTFOUND", cfg, rc)
		}
		if rc := goindex_remove(h, 8, 0, 2, u64p([]uint64{ext[0]}), 1); rc != code(radix.ErrBlockNotFound) {
			t.Errorf("%s: remove for a member that holds nothing = %d, want GOINDEX_ENOTFOUND", cfg, rc)
		}
		if rc := goindex_remove(h, 7, 0, 3, u64p([]uint64{ext[2], 0xbeef}), 2); rc != code(radix.ErrBlockNotFound) {
			t.Errorf("%s: mixed removal = %d, want GOINDEX_ENOTFOUND", cfg, rc)
		}
		if got := probe(t, h, locals); got != "7/0=2" {
			t.Errorf("%s: probe after the mixed removal = %q, want 7/0=2 (the known block removed)", cfg, got)
		}
	}
}
