package route

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/goindex/replica"
	"github.com/goindex/goindex/goindex/shm"
)

// view is one attached generation of the replica file. Searches hold mu
// for reading; retiring the view takes it for writing, so the mapping is
// unmapped only once no search uses it (shm.Reader.Close must not race
// with searches).
type view struct {
	mu     sync.RWMutex
	closed bool
	r      *shm.Reader
	info   shm.Info
	// lanes[i] is the lane of the router's DC i, or -1 when the file has
	// no lane for it; mask has the bits of every such lane.
	lanes     []int
	mask      uint64
	searchers sync.Pool // *replica.Searcher over r's table
}

// laneObs is what one search saw of a DC's lane.
type laneObs struct {
	lane  int // -1: the replica has no lane for the DC
	ready bool
	depth uint32 // blocks of the query's prefix the lane holds
	info  shm.LaneInfo
}

// replicaHolder keeps the current view of the replica file at path and
// follows new generations. refresh runs on one goroutine at a time
// (refreshMu); observe from any number.
type replicaHolder struct {
	path      string
	dcs       []DC
	cur       atomic.Pointer[view]
	refreshMu sync.Mutex
	lastErr   atomic.Pointer[error]
}

func newReplicaHolder(path string, dcs []DC) *replicaHolder {
	return &replicaHolder{path: path, dcs: dcs}
}

// refresh attaches the file when no view is held, or attaches its new
// generation when the held one is stale, then retires the old view. It
// reports whether the view changed. A failed attach keeps the old view (a
// stale view still serves its last signals, which go stale by their own
// timestamps) and is remembered for readyz.
func (h *replicaHolder) refresh() (bool, error) {
	if h.path == "" {
		return false, nil
	}
	h.refreshMu.Lock()
	defer h.refreshMu.Unlock()
	old := h.cur.Load()
	if old != nil {
		stale, err := old.r.Stale()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, h.fail(err)
		}
		if !stale && err == nil {
			h.lastErr.Store(nil)
			return false, nil
		}
	}
	r, err := shm.Attach(h.path)
	if err != nil {
		return false, h.fail(err)
	}
	h.lastErr.Store(nil)
	h.cur.Store(h.newView(r))
	if old != nil {
		old.retire()
	}
	return true, nil
}

func (h *replicaHolder) fail(err error) error {
	h.lastErr.Store(&err)
	return err
}

// status returns the attached generation (0: none) and the last attach
// error.
func (h *replicaHolder) status() (uint64, error) {
	var gen uint64
	if v := h.cur.Load(); v != nil {
		gen = v.info.Generation
	}
	if e := h.lastErr.Load(); e != nil {
		return gen, *e
	}
	return gen, nil
}

func (h *replicaHolder) newView(r *shm.Reader) *view {
	v := &view{r: r, info: r.Info(), lanes: make([]int, len(h.dcs))}
	for i, dc := range h.dcs {
		v.lanes[i] = -1
		for l, id := range v.info.DCs {
			if id == dc.ID {
				v.lanes[i] = l
				v.mask |= 1 << l
				break
			}
		}
	}
	v.searchers.New = func() any {
		// The reader's own table and format always agree, so this cannot
		// fail.
		s, err := replica.NewSearcher(r.Table(), r.Format(), replica.SearchConfig{})
		if err != nil {
			panic(fmt.Sprintf("route: searcher over an attached replica: %v", err))
		}
		return s
	}
	return v
}

// retire unmaps the view once no search holds it.
func (v *view) retire() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.closed {
		v.closed = true
		_ = v.r.Close()
	}
}

// close retires the current view; later observations see no replica.
func (h *replicaHolder) close() {
	h.refreshMu.Lock()
	defer h.refreshMu.Unlock()
	if v := h.cur.Swap(nil); v != nil {
		v.retire()
	}
}

// observe fills obs (one per router DC) from the current view: each DC's
// lane metadata and, for hashes (canonical sequence hashes of the query),
// the depth its lane holds if it is ready. It returns the view's
// generation, or 0 and obs all lane -1 when no replica is attached.
func (h *replicaHolder) observe(obs []laneObs, hashes []uint64) uint64 {
	for {
		v := h.cur.Load()
		if v == nil {
			for i := range obs {
				obs[i] = laneObs{lane: -1}
			}
			return 0
		}
		v.mu.RLock()
		if v.closed {
			// Retired between the load and the lock: the holder already
			// points at its successor (or at nothing).
			v.mu.RUnlock()
			continue
		}
		v.observe(obs, hashes)
		v.mu.RUnlock()
		return v.info.Generation
	}
}

// heartbeat returns the attached replica's writer heartbeat; false when
// none is attached or it was never touched.
func (h *replicaHolder) heartbeat() (time.Time, bool) {
	for {
		v := h.cur.Load()
		if v == nil {
			return time.Time{}, false
		}
		v.mu.RLock()
		if v.closed {
			v.mu.RUnlock()
			continue
		}
		hb := v.r.WriterHeartbeat()
		v.mu.RUnlock()
		return hb, !hb.IsZero()
	}
}

func (v *view) observe(obs []laneObs, hashes []uint64) {
	var depth []uint32
	var ready uint64
	if len(hashes) > 0 && v.mask != 0 {
		s := v.searchers.Get().(*replica.Searcher)
		depth, ready = s.Search(nil, hashes, v.mask)
		v.searchers.Put(s)
	} else {
		ready = v.r.Ready() & v.mask
	}
	for i, l := range v.lanes {
		o := laneObs{lane: l}
		if l >= 0 {
			o.ready = ready&(1<<l) != 0
			if depth != nil {
				o.depth = depth[l]
			}
			o.info = v.r.Lane(l)
		}
		obs[i] = o
	}
}
