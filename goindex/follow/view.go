package follow

import (
	"fmt"
	"math/bits"
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
	file   bool     // a file mapping: counted, retired, unmapped
	pool   sync.Pool

	refs    atomic.Int64
	retired atomic.Bool
	closed  atomic.Bool
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

// Ready returns the mask of lanes with an installed snapshot.
func (v *View) Ready() uint64 { return v.r.Ready() & v.all }

// Lane returns lane l's record: protocol state, RTT, load. It panics if l
// is out of range.
func (v *View) Lane(l int) shm.LaneInfo { return v.r.Lane(l) }

// Heartbeat returns the writer's last heartbeat (zero if it never beat,
// always for a Feed's lanes).
func (v *View) Heartbeat() time.Time { return v.r.WriterHeartbeat() }

// SearchLocals writes into dst (resized to the lane count) the depth in
// blocks of every ready lane in lanes for the query's local hashes from the
// root, and returns it with the mask of lanes searched.
func (v *View) SearchLocals(dst []uint32, locals []uint64, lanes uint64) ([]uint32, uint64) {
	s := v.pool.Get().(*scratch)
	dst, m := s.searcher.SearchLocals(dst, locals, lanes&v.all)
	v.pool.Put(s)
	return dst, m
}

// Search is SearchLocals for a query given as its canonical sequence hashes
// (kv.AppendChain of its local hashes).
func (v *View) Search(dst []uint32, hashes []uint64, lanes uint64) ([]uint32, uint64) {
	s := v.pool.Get().(*scratch)
	dst, m := s.searcher.Search(dst, hashes, lanes&v.all)
	v.pool.Put(s)
	return dst, m
}

// Match appends one overlap per ready lane whose depth for the query (local
// hashes from the root) is positive: Worker = the lane's DC id, Rank = the
// lane. It allocates nothing once the view's pooled scratch has grown.
func (v *View) Match(dst []kv.Overlap, locals []uint64) []kv.Overlap {
	if len(locals) == 0 {
		return dst
	}
	s := v.pool.Get().(*scratch)
	var ready uint64
	s.depth, ready = s.searcher.SearchLocals(s.depth, locals, v.all)
	for m := ready; m != 0; m &= m - 1 {
		l := bits.TrailingZeros64(m)
		if d := s.depth[l]; d > 0 {
			dst = append(dst, kv.Overlap{Member: kv.Member{Worker: v.dcs[l], Rank: uint32(l)}, Blocks: int(d)})
		}
	}
	v.pool.Put(s)
	return dst
}
