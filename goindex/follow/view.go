package follow

import (
	"fmt"
	"math/bits"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/replica"
	"github.com/goindex/goindex/goindex/shm"
)

// View is one set of lanes a search reads: one generation of an attached
// replica file (Follower.Acquire) or a Feed's in-process lanes
// (Feed.Acquire). Every method may run concurrently with the others and
// with the lanes' writer; reads are weak (spec §5.4). Release it after use:
// a retired file view is unmapped only once its last user released it, so
// no search ever reads an unmapped file.
type View struct {
	r      *shm.Reader
	dcs    []uint64 // DC id of each lane
	all    uint64   // mask of every lane
	gen    uint64   // layout generation; 0 for a Feed's lanes
	memory uint64   // bytes of the lanes' table (mapped bytes for a file)
	file   bool     // a file mapping: counted, retired, unmapped, guarded
	pool   sync.Pool
	// onFault is told when a search of the mapping faulted (the follower
	// retires the view); nil for a Feed's lanes.
	onFault func(*View)

	refs    atomic.Int64
	retired atomic.Bool
	closed  atomic.Bool

	// bad has the lanes whose integrity check failed: searches and Ready
	// leave them out until a new snapshot seals them again (badSeals[l]:
	// the lane's seal count when it was found bad).
	bad      atomic.Uint64
	badSeals [64]atomic.Uint64
	cursor   atomic.Uint64 // the next segment the verifier checks
	clean    [64]uint64    // per lane, segments verified clean in a row (verifier only)
}

// scratch is one search's state over one view.
type scratch struct {
	searcher *replica.Searcher
	depth    []uint32
}

func newView(r *shm.Reader, file bool) *View {
	info := r.Info()
	v := &View{r: r, dcs: info.DCs, all: ^uint64(0) >> (64 - len(info.DCs)), gen: info.Generation,
		memory: uint64(info.RegionBytes), file: file}
	if file {
		v.memory += uint64(info.HeaderBytes)
	}
	v.pool.New = func() any {
		s, err := replica.NewSearcher(r.Table(), r.Format(), replica.SearchConfig{})
		if err != nil {
			// The table and format come from one header: they always agree.
			panic(fmt.Sprintf("follow: searcher over a view: %v", err))
		}
		return &scratch{searcher: s}
	}
	return v
}

// acquire takes a reference on v; it fails once v is retired (the caller
// then loads its successor).
func (v *View) acquire() bool {
	if !v.file {
		return true
	}
	v.refs.Add(1)
	if !v.retired.Load() {
		return true
	}
	v.Release()
	return false
}

// Release ends one use of v.
func (v *View) Release() {
	if v.file && v.refs.Add(-1) == 0 && v.retired.Load() {
		v.unmap()
	}
}

// retire marks v replaced; it is unmapped now if no search uses it, else by
// the last one's Release. A search that loaded v before the mark either
// sees it (and backs off) or holds a reference the mark sees: sync/atomic's
// sequentially consistent order leaves no third case.
func (v *View) retire() {
	v.retired.Store(true)
	if v.refs.Load() == 0 {
		v.unmap()
	}
}

func (v *View) unmap() {
	if v.closed.CompareAndSwap(false, true) {
		_ = v.r.Close()
	}
}

// DCs returns the DC id of each lane, lane l at index l. The slice is
// shared: do not modify it.
func (v *View) DCs() []uint64 { return v.dcs }

// Generation returns the replica file's layout generation, 0 for a Feed's
// lanes.
func (v *View) Generation() uint64 { return v.gen }

// MemoryBytes returns the bytes the lanes occupy: the mapped file, or a
// Feed's bucket region.
func (v *View) MemoryBytes() uint64 { return v.memory }

// Ready returns the mask of lanes with an installed snapshot, less those
// that failed their integrity check (0 if the read faulted).
func (v *View) Ready() uint64 { return v.r.Ready() & v.all &^ v.bad.Load() }

// Bad returns the lanes whose integrity check failed (left out of searches
// and Ready until a new snapshot).
func (v *View) Bad() uint64 { return v.bad.Load() }

// Lane returns lane l's record: protocol state, RTT, load (the zero record,
// nothing known, if the read faulted). It panics if l is out of range.
func (v *View) Lane(l int) shm.LaneInfo { return v.r.Lane(l) }

// Heartbeat returns the writer's last heartbeat (zero if it never beat,
// always for a Feed's lanes).
func (v *View) Heartbeat() time.Time { return v.r.WriterHeartbeat() }

// SearchLocals writes into dst (resized to the lane count) the depth in
// blocks of every ready lane in lanes for the query's local hashes from the
// root, and returns it with the mask of lanes searched. A search whose
// mapping faulted (the file was truncated) reports no lane.
func (v *View) SearchLocals(dst []uint32, locals []uint64, lanes uint64) ([]uint32, uint64) {
	return v.search(dst, locals, lanes, true)
}

// Search is SearchLocals for a query given as its canonical sequence hashes
// (kv.AppendChain of its local hashes).
func (v *View) Search(dst []uint32, hashes []uint64, lanes uint64) ([]uint32, uint64) {
	return v.search(dst, hashes, lanes, false)
}

func (v *View) search(dst []uint32, q []uint64, lanes uint64, locals bool) ([]uint32, uint64) {
	s := v.pool.Get().(*scratch)
	depth, m, ok := v.guarded(s, dst, q, lanes&v.all&^v.bad.Load(), locals)
	if !ok {
		v.faulted()
		return depth, 0
	}
	v.pool.Put(s)
	return depth, m
}

// guarded runs one search of s inside a fault guard of a file mapping; ok
// is false when it faulted (s is then dropped, its state unknown).
func (v *View) guarded(s *scratch, dst []uint32, q []uint64, lanes uint64, locals bool) (depth []uint32, m uint64, ok bool) {
	depth = dst
	if v.file {
		defer v.r.Guard(debug.SetPanicOnFault(true))
	}
	if locals {
		depth, m = s.searcher.SearchLocals(dst, q, lanes)
	} else {
		depth, m = s.searcher.Search(dst, q, lanes)
	}
	return depth, m, true
}

// faulted tells the follower that a search of v's mapping faulted.
func (v *View) faulted() {
	if v.onFault != nil {
		v.onFault(v)
	}
}

// Match appends one overlap per ready lane whose depth for the query (local
// hashes from the root) is positive: Worker = the lane's DC id, Rank = the
// lane. It allocates nothing once the view's pooled scratch has grown; a
// search that faulted appends nothing.
func (v *View) Match(dst []kv.Overlap, locals []uint64) []kv.Overlap {
	if len(locals) == 0 {
		return dst
	}
	s := v.pool.Get().(*scratch)
	depth, ready, ok := v.guarded(s, s.depth, locals, v.all&^v.bad.Load(), true)
	if !ok {
		v.faulted()
		return dst
	}
	s.depth = depth
	for m := ready; m != 0; m &= m - 1 {
		l := bits.TrailingZeros64(m)
		if d := depth[l]; d > 0 {
			dst = append(dst, kv.Overlap{Member: kv.Member{Worker: v.dcs[l], Rank: uint32(l)}, Blocks: int(d)})
		}
	}
	v.pool.Put(s)
	return dst
}

// verify checks the next segment of every ready lane and of the lanes
// found bad, and returns the lanes newly found bad. A bad lane is judged
// again once a new snapshot sealed it, or once it passed a whole round of
// segments (its published sums were damaged, and its writer published them
// again). One caller at a time.
func (v *View) verify() (found uint64) {
	k := uint64(v.r.Segments())
	seg := int(v.cursor.Add(1)-1) % int(k)
	bad := v.bad.Load()
	for m := bad; m != 0; m &= m - 1 {
		if l := bits.TrailingZeros64(m); v.r.Seals(l) != v.badSeals[l].Load() || v.clean[l] >= k {
			bad &^= 1 << l
		}
	}
	mask := (v.r.Ready() | v.bad.Load()) & v.all
	failed, busy := v.r.VerifySegment(seg, mask)
	for m := mask &^ failed &^ busy; m != 0; m &= m - 1 {
		v.clean[bits.TrailingZeros64(m)]++
	}
	for m := failed; m != 0; m &= m - 1 {
		l := bits.TrailingZeros64(m)
		v.clean[l] = 0
		if bad&(1<<l) == 0 {
			v.badSeals[l].Store(v.r.Seals(l))
		}
	}
	v.bad.Store(bad | failed)
	return failed &^ bad
}
