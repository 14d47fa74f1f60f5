package route

import (
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/goindex/follow"
	"github.com/goindex/goindex/goindex/shm"
)

// laneObs is what one search saw of a DC's lane.
type laneObs struct {
	lane  int // -1: the replica has no lane for the DC
	ready bool
	depth uint32 // blocks of the query's prefix the lane holds
	info  shm.LaneInfo
}

// replicaHolder follows the replica file (goindex/follow) and maps the
// router's DCs to its lanes, per generation.
type replicaHolder struct {
	f     *follow.Follower // nil: no replica configured
	dcs   []DC
	lanes atomic.Pointer[laneMap]
}

// laneMap is one generation's lane of each router DC.
type laneMap struct {
	gen   uint64
	lanes []int  // lanes[i]: the lane of DC i, -1 when the file has none
	mask  uint64 // every such lane
}

func newReplicaHolder(cfg *Config) *replicaHolder {
	h := &replicaHolder{dcs: cfg.DCs}
	if cfg.ReplicaPath != "" {
		h.f = follow.New(cfg.ReplicaPath, follow.Config{MaxStaleness: cfg.MaxStaleness, CheckEvery: cfg.ReplicaPoll})
	}
	return h
}

// refresh attaches the file when none is held, or its new generation when
// the held one was replaced (follow.Follower.Refresh).
func (h *replicaHolder) refresh() (bool, error) {
	if h.f == nil {
		return false, nil
	}
	return h.f.Refresh()
}

// health returns the replica's health; Missing when none is configured.
func (h *replicaHolder) health() follow.Health {
	if h.f == nil {
		return follow.Health{State: follow.Missing, Err: follow.ErrNoReplica}
	}
	return h.f.Health()
}

func (h *replicaHolder) close() {
	if h.f != nil {
		h.f.Close()
	}
}

// acquire returns the current view and its lane map, or nil.
func (h *replicaHolder) acquire() (*follow.View, *laneMap) {
	if h.f == nil {
		return nil, nil
	}
	v := h.f.Acquire()
	if v == nil {
		return nil, nil
	}
	m := h.lanes.Load()
	if m == nil || m.gen != v.Generation() {
		m = &laneMap{gen: v.Generation(), lanes: make([]int, len(h.dcs))}
		for i, dc := range h.dcs {
			m.lanes[i] = -1
			for l, id := range v.DCs() {
				if id == dc.ID {
					m.lanes[i] = l
					m.mask |= 1 << l
					break
				}
			}
		}
		h.lanes.Store(m)
	}
	return v, m
}

// unmatched returns, for the attached generation, the router's DCs whose
// id has no lane in the file and the DC id of each of the file's lanes;
// ok is false when no replica is attached.
func (h *replicaHolder) unmatched() (missing []DC, lanes []uint64, ok bool) {
	v, m := h.acquire()
	if v == nil {
		return nil, nil, false
	}
	defer v.Release()
	for i, l := range m.lanes {
		if l < 0 {
			missing = append(missing, h.dcs[i])
		}
	}
	return missing, append([]uint64(nil), v.DCs()...), true
}

// observe fills obs (one per router DC) from the current view: each DC's
// lane record and, for hashes (canonical sequence hashes of the query),
// the depth its lane holds if it is ready. It returns the view's
// generation, or 0 and obs all lane -1 when no replica is attached.
func (h *replicaHolder) observe(obs []laneObs, hashes []uint64) uint64 {
	v, m := h.acquire()
	if v == nil {
		for i := range obs {
			obs[i] = laneObs{lane: -1}
		}
		return 0
	}
	defer v.Release()
	var depth []uint32
	var ready uint64
	if len(hashes) > 0 && m.mask != 0 {
		depth, ready = v.Search(nil, hashes, m.mask)
	} else {
		ready = v.Ready() & m.mask
	}
	for i, l := range m.lanes {
		o := laneObs{lane: l}
		if l >= 0 {
			o.ready = ready&(1<<l) != 0
			if depth != nil {
				o.depth = depth[l]
			}
			o.info = v.Lane(l)
		}
		obs[i] = o
	}
	return v.Generation()
}

// heartbeat returns the attached replica's writer heartbeat; false when
// none is attached or it was never touched.
func (h *replicaHolder) heartbeat() (time.Time, bool) {
	v, _ := h.acquire()
	if v == nil {
		return time.Time{}, false
	}
	hb := v.Heartbeat()
	v.Release()
	return hb, !hb.IsZero()
}
