package ckf

import (
	"iter"
	"math/bits"
	"unsafe"

	"github.com/goindex/goindex/internal/hugepage"
)

// flatMap is an open-addressing hash map keyed by uint64: one slot array of
// (key, value) pairs, so a lookup touches one cache line in the common
// case; linear probing from a Fibonacci hash; at most 3/4 full, then it
// doubles; deletion shifts the following run back (no tombstones, so probe
// runs stay short under churn). The key 0 marks an empty slot, so that key
// lives beside the array. Pointers returned by find and upsert are valid
// until the next upsert, del or reset.
//
// It replaces Go maps in the producer's lineage and owner tables, where one
// find-or-insert replaces a lookup plus an assignment: see
// BenchmarkMap (impl=flat vs impl=gomap) and BenchmarkIngest in BENCHMARKS.md.
type flatMap[V any] struct {
	slots   []flatSlot[V]
	shift   uint // 64 − log2(len(slots)): the hash keeps the top bits
	count   int  // keys in slots (not counting key 0)
	hasZero bool
	zero    V // value of key 0, valid when hasZero
}

type flatSlot[V any] struct {
	key uint64
	val V
}

// hugePages makes the producer advise transparent huge pages for its large
// tables (the owner table, lineages, the filter it allocates and the dirty
// window's index): ingest touches them at random, and with 4 KiB pages a
// table of tens of megabytes misses the TLB on nearly every access
// (BenchmarkIngest impl=presized vs impl=presized-nohuge). Only that
// benchmark turns it off.
var hugePages = true

// adviseHuge advises huge pages for s when hugePages is on.
func adviseHuge[T any](s []T) {
	if hugePages {
		hugepage.Advise(s)
	}
}

// minFlatSlots is the smallest slot array: one cache line of 16-byte slots.
const minFlatSlots = 4

// newFlatMap returns a map with room for hint keys before it grows.
func newFlatMap[V any](hint int) flatMap[V] {
	var m flatMap[V]
	m.alloc(slotsFor(hint))
	return m
}

// slotsFor returns the power-of-two slot count that holds keys at ≤ 3/4 load.
func slotsFor(keys int) int {
	n := minFlatSlots
	for n*3/4 < keys {
		n <<= 1
	}
	return n
}

func (m *flatMap[V]) alloc(slots int) {
	m.slots = make([]flatSlot[V], slots)
	adviseHuge(m.slots)
	m.shift = uint(64 - bits.TrailingZeros(uint(slots)))
	m.count = 0
}

// home returns key's first probe position.
func (m *flatMap[V]) home(key uint64) uint64 { return (key * rngGamma) >> m.shift }

// warm loads key's home slot and returns a word of it, so that a caller
// can start several cache misses before it needs any of them (the loads
// are independent, so the CPU overlaps them). The caller must consume the
// result to keep the load.
func (m *flatMap[V]) warm(key uint64) uint64 { return m.slots[m.home(key)].key }

// len returns the number of keys.
func (m *flatMap[V]) len() int {
	if m.hasZero {
		return m.count + 1
	}
	return m.count
}

// find returns a pointer to key's value, or nil.
func (m *flatMap[V]) find(key uint64) *V {
	if i := m.slot(key); i >= 0 {
		return m.at(i)
	}
	return nil
}

// slot returns key's position for at and delAt, or -1 if key is absent:
// its slot index, or len(m.slots) for key 0. A position is valid until
// the next upsert, del, delAt or reset.
func (m *flatMap[V]) slot(key uint64) int {
	if key == 0 {
		if m.hasZero {
			return len(m.slots)
		}
		return -1
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.home(key); ; i = (i + 1) & mask {
		switch m.slots[i].key {
		case key:
			return int(i)
		case 0:
			return -1
		}
	}
}

// at returns a pointer to the value at position i (from slot).
func (m *flatMap[V]) at(i int) *V {
	if i == len(m.slots) {
		return &m.zero
	}
	return &m.slots[i].val
}

// upsert returns a pointer to key's value, inserting the zero value first
// if key is absent (found is then false); it grows the map only when the
// insertion would pass 3/4 load.
func (m *flatMap[V]) upsert(key uint64) (v *V, found bool) {
	if key == 0 {
		found = m.hasZero
		if !found {
			var zero V
			m.hasZero, m.zero = true, zero
		}
		return &m.zero, found
	}
	m.reserve(1)
	mask := uint64(len(m.slots) - 1)
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		switch s.key {
		case key:
			return &s.val, true
		case 0:
			s.key = key
			m.count++
			return &s.val, false
		}
	}
}

// insert adds key (with the zero value) and reports whether it was absent;
// it is the set operation of the producer's per-event scratch set.
func (m *flatMap[V]) insert(key uint64) bool {
	_, found := m.upsert(key)
	return !found
}

func (m *flatMap[V]) grow() {
	old := m.slots
	m.alloc(2 * len(old))
	mask := uint64(len(m.slots) - 1)
	for _, s := range old {
		if s.key == 0 {
			continue
		}
		i := m.home(s.key)
		for m.slots[i].key != 0 {
			i = (i + 1) & mask
		}
		m.slots[i] = s
		m.count++
	}
}

// reserve grows m now if adding that many keys would grow it, so that
// the pointers find and upsert return stay valid through those upserts.
func (m *flatMap[V]) reserve(keys int) {
	for (m.count+keys)*4 > len(m.slots)*3 {
		m.grow()
	}
}

// del removes key and reports whether it was present.
func (m *flatMap[V]) del(key uint64) bool {
	_, ok := m.take(key)
	return ok
}

// take removes key and returns its value, or reports it absent.
func (m *flatMap[V]) take(key uint64) (v V, ok bool) {
	i := m.slot(key)
	if i < 0 {
		return v, false
	}
	v = *m.at(i)
	m.delAt(i)
	return v, true
}

// delAt removes the key at position pos (from slot).
func (m *flatMap[V]) delAt(pos int) {
	if pos == len(m.slots) {
		m.hasZero = false
		return
	}
	// Shift back every later entry of the run that may live at i: one whose
	// home is not cyclically inside (i, j].
	mask := uint64(len(m.slots) - 1)
	i := uint64(pos)
	for j := (i + 1) & mask; m.slots[j].key != 0; j = (j + 1) & mask {
		if (j-m.home(m.slots[j].key))&mask < (j-i)&mask {
			continue
		}
		m.slots[i] = m.slots[j]
		i = j
	}
	m.slots[i] = flatSlot[V]{}
	m.count--
}

// all yields every key and a pointer to its value; the loop must not
// upsert or delete.
func (m *flatMap[V]) all() iter.Seq2[uint64, *V] {
	return func(yield func(uint64, *V) bool) {
		if m.hasZero && !yield(0, &m.zero) {
			return
		}
		for i := range m.slots {
			if s := &m.slots[i]; s.key != 0 && !yield(s.key, &s.val) {
				return
			}
		}
	}
}

// reset empties m and sizes it for keys, reusing its slots when they are
// large enough (the producer's per-event scratch set).
func (m *flatMap[V]) reset(keys int) {
	n := slotsFor(keys)
	if cap(m.slots) >= n {
		m.slots = m.slots[:n]
		clear(m.slots)
		m.shift = uint(64 - bits.TrailingZeros(uint(n)))
		m.count = 0
	} else {
		m.alloc(n)
	}
	m.hasZero = false
}

// bytes returns the memory of the slot array.
func (m *flatMap[V]) bytes() uint64 {
	return uint64(cap(m.slots)) * uint64(unsafe.Sizeof(flatSlot[V]{}))
}
