package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/goindex/shm"
)

// attachment is a global handle's shared replica: the path, the view of the
// generation mapped now, and the rate-limited check for a newer one.
// Probes and scores call acquire; attach (an event call) and the checks
// themselves serialize on mu.
type attachment struct {
	cur   atomic.Pointer[laneView]
	every time.Duration // 0: check on every acquire
	start time.Time     // monotonic base of next
	next  atomic.Int64  // when the next check is due, ns since start

	mu   sync.Mutex
	path string // under mu
}

// attach maps the replica file at path and makes it the handle's only lane
// source (frames are refused from now on). Attaching again, to the same or
// another path, replaces the view; the old one is unmapped once no probe
// uses it.
func (g *globalIndex) attach(path string) error {
	r, err := shm.Attach(path)
	if err != nil {
		return fmt.Errorf("%w: %w", errReplica, err)
	}
	a := g.att.Load()
	if a == nil {
		a = &attachment{every: g.checkEvery, start: time.Now()}
	}
	a.mu.Lock()
	a.path = path
	a.swap(newAttachedView(r))
	a.next.Store(int64(time.Since(a.start) + a.every))
	a.mu.Unlock()
	g.att.Store(a)
	return nil
}

func newAttachedView(r *shm.Reader) *laneView {
	info := r.Info()
	v := newLaneView(r.Table(), r.Format(), info.DCs)
	v.reader, v.generation, v.fileBytes = r, info.Generation, uint64(info.HeaderBytes)+info.RegionBytes
	return v
}

// swap installs v (nil: none) and retires the view it replaces. The new view
// is stored first, so a search that finds the old one retired finds its
// successor on its next load.
func (a *attachment) swap(v *laneView) {
	if old := a.cur.Swap(v); old != nil {
		old.retire()
	}
}

// acquire returns the current view with a reference taken (release it), or
// nil once the attachment is closed. When a check is due it first looks for
// a new generation.
func (a *attachment) acquire() *laneView {
	if a.every == 0 || time.Since(a.start) >= time.Duration(a.next.Load()) {
		a.check()
	}
	for {
		v := a.cur.Load()
		if v == nil {
			return nil
		}
		v.refs.Add(1)
		if !v.retired.Load() {
			return v
		}
		v.release()
	}
}

// check runs on one caller at a time (others skip it rather than wait): if
// the consumer replaced the file (shm.Reader.Stale), it maps the new
// generation. A failed look or attach keeps the current view serving (its
// signals age out by their own timestamps) and is retried at the next
// check.
func (a *attachment) check() {
	if !a.mu.TryLock() {
		return
	}
	defer a.mu.Unlock()
	now := time.Since(a.start)
	if a.every > 0 && now < time.Duration(a.next.Load()) {
		return // another caller just checked
	}
	a.next.Store(int64(now + a.every))
	old := a.cur.Load()
	if old == nil {
		return
	}
	if stale, err := old.reader.Stale(); err != nil || !stale {
		return
	}
	r, err := shm.Attach(a.path)
	if err != nil {
		return
	}
	a.swap(newAttachedView(r))
}

// close retires the current view; later acquires find none.
func (a *attachment) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.swap(nil)
}
