package idtable

import (
	"sync"
	"sync/atomic"
)

// Table holds objects under ids that count up from 1 and are never
// reused, so a stale id can only miss. Id n is slot n−1 of a table every
// lookup reads without a lock (an atomic load of the table, then of the
// slot: a sync.Map lookup cost about 25 ns of a 600 ns probe, BenchmarkProbe
// impl=handle in ffi) and that Add replaces with a larger copy when it is
// full. A removed object's slot stays, nil: 8 bytes per id ever issued. The
// zero Table is empty and ready to use.
type Table[T any] struct {
	mu    sync.Mutex // Add and Remove
	n     int        // ids ever issued, under mu
	table atomic.Pointer[[]atomic.Pointer[T]]
}

// Get returns the live object id, or nil.
func (r *Table[T]) Get(id uint64) *T {
	t := r.table.Load()
	if t == nil || id-1 >= uint64(len(*t)) { // id 0 wraps and misses
		return nil
	}
	return (*t)[id-1].Load()
}

// Add registers v under a fresh id and returns it.
func (r *Table[T]) Add(v *T) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var old []atomic.Pointer[T]
	if t := r.table.Load(); t != nil {
		old = *t
	}
	if r.n == len(old) {
		grown := make([]atomic.Pointer[T], max(2*len(old), 16))
		for i := range old {
			grown[i].Store(old[i].Load())
		}
		r.table.Store(&grown)
		old = grown
	}
	r.n++
	old[r.n-1].Store(v)
	return uint64(r.n)
}

// Remove unregisters id and returns its object, or nil when id is not live.
func (r *Table[T]) Remove(id uint64) *T {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.table.Load()
	if t == nil || id-1 >= uint64(len(*t)) {
		return nil
	}
	return (*t)[id-1].Swap(nil)
}
