package shm

import (
	"math/bits"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/replica"
)

// Integrity of the bucket region. Each lane's n buckets are cut into K =
// min(n, MaxSegments) segments of n/K consecutive buckets; for each the
// writer publishes, in the lane's integrity block, the sum mod 2^64 of
// mix(b, word) over its buckets (mix(b, 0) = 0, so an empty region sums to
// zero and a new file needs no pass). The sum is updated with every word
// the writer stores, from the word it replaces, so it follows deltas at
// two hashes a word; a snapshot installed from its first bucket to its
// last sets the lane's sums afresh from the snapshot's own words (and
// counts a seal), which is how a lane whose words or sums were damaged is
// healed. A lane's version word is odd while its writer is storing, so a
// verifier that reads the same even version before and after summing a
// segment knows it saw the writer's state; probes never look at either.

// Integrity block of a lane (8-byte words), after the lane records.
const (
	// IntegrityBytes is the size of one lane's integrity block; lane l's
	// starts at FixedHeaderBytes + D·LaneMetaBytes + l·IntegrityBytes.
	IntegrityBytes = 576
	// MaxSegments is the most segments a lane's buckets are cut into.
	MaxSegments = 64

	iwVersion = 0 // odd while the lane's writer changes its words
	iwSeals   = 1 // snapshots whose sums were set afresh
	iwStale   = 2 // 1 while the lane's sums are not kept (a snapshot arriving in order): not verifiable
	iwSums    = 8 // K segment sums from here
)

// mix is a bucket's share of its segment's sum: 0 for an empty bucket,
// else the word keyed by its bucket (so that a word moved to another bucket
// changes the sum too) through one multiply and an xor-shift. It guards
// against accidents, not adversaries: any changed word changes its share
// with probability about 1 − 2^-64, and the segment's sum with it. It has
// no branch: filters are a random mix of empty and full buckets; one
// multiply keeps a snapshot's install at about 1.5× the bare stores
// (BenchmarkInstall).
func mix(b, w uint64) uint64 {
	x := (w ^ b*0x9E3779B97F4A7C15) * 0xFF51AFD7ED558CCD
	x ^= x >> 29
	return x & -((w | -w) >> 63) // all ones when w != 0
}

// segments returns K for n buckets.
func segments(n uint64) int { return int(min(n, MaxSegments)) }

// integrity returns lane l's integrity block.
func (m *mapping) integrity(l int) []uint64 {
	off := (FixedHeaderBytes + m.hdr.lanes*LaneMetaBytes + l*IntegrityBytes) / 8
	return m.words[off : off+IntegrityBytes/8]
}

// rows returns the bucket rows of the region (row b at b·stride).
func (m *mapping) rows() []uint64 {
	return m.words[m.hdr.headerBytes/8+rowsOffsetWords : (uint64(m.hdr.headerBytes)+m.hdr.regionBytes)/8]
}

// rowsOffsetWords is the replica region's header line before its rows.
const rowsOffsetWords = replica.GroupLanes

// segmentSums writes into sums[l], for every lane l in mask, the sum of
// segment seg of lane l as it reads now.
func (m *mapping) segmentSums(seg int, mask uint64, sums *[MaxLanes]uint64) {
	n := m.hdr.buckets
	per := n / uint64(segments(n))
	rows, stride := m.rows(), uint64(m.hdr.stride)
	for l := range m.hdr.lanes {
		sums[l] = 0
	}
	for b := uint64(seg) * per; b < uint64(seg+1)*per; b++ {
		row := rows[b*stride : b*stride+uint64(m.hdr.lanes)]
		for l := range row {
			if mask&(1<<l) != 0 {
				sums[l] += mix(b, atomic.LoadUint64(&row[l]))
			}
		}
	}
}

// Segments returns K, the segments of each lane's integrity sums.
func (r *Reader) Segments() int { return segments(r.m.hdr.buckets) }

// Seals returns how many snapshots set lane l's sums afresh (0 if the read
// faulted); a lane found damaged is healed by the next one.
func (r *Reader) Seals(l int) (n uint64) {
	blk := r.m.integrity(l)
	if !r.m.memory {
		defer r.m.guard(debug.SetPanicOnFault(true), nil)
	}
	return atomic.LoadUint64(&blk[iwSeals])
}

// VerifySegment sums segment seg of every lane in mask and compares each
// with the sum its writer published: bad has the lanes whose words (or
// published sum) were changed behind the writer's back; busy those the
// writer was changing meanwhile (try again). A read that faulted reports
// every lane busy (Faulted then says so). It reads n/K rows of the region.
func (r *Reader) VerifySegment(seg int, mask uint64) (bad, busy uint64) {
	return r.m.verify(seg, mask, func(l int, _ []uint64) []uint64 { return r.m.integrity(l)[iwSums:] })
}

// verify is VerifySegment against the sums want returns for each lane.
func (m *mapping) verify(seg int, mask uint64, want func(l int, blk []uint64) []uint64) (bad, busy uint64) {
	mask &= ^uint64(0) >> (64 - m.hdr.lanes)
	busy = mask
	if !m.memory {
		defer m.guard(debug.SetPanicOnFault(true), nil)
	}
	var before [MaxLanes]uint64
	for l := range m.hdr.lanes {
		if mask&(1<<l) != 0 {
			blk := m.integrity(l)
			if before[l] = atomic.LoadUint64(&blk[iwVersion]); before[l]%2 == 1 || atomic.LoadUint64(&blk[iwStale]) != 0 {
				mask &^= 1 << l
			}
		}
	}
	var got [MaxLanes]uint64
	m.segmentSums(seg, mask, &got)
	busy &^= mask
	for l := range m.hdr.lanes {
		if mask&(1<<l) == 0 {
			continue
		}
		blk := m.integrity(l)
		sum := atomic.LoadUint64(&want(l, blk)[seg])
		switch {
		case atomic.LoadUint64(&blk[iwVersion]) != before[l]:
			busy |= 1 << l
		case sum != got[l]:
			bad |= 1 << l
		}
	}
	return bad, busy
}

// sealing is a Writer's private integrity state: its own copy of every
// lane's sums (authoritative: the file's copy may be damaged too), and per
// lane the snapshot being installed from bucket 0. Each lane's part has
// that lane's writer only; sums are atomic for VerifySegment.
type sealing struct {
	sums  [][]uint64 // [lane][segment]
	fresh []freshSums
	// stale marks a lane whose running sums were not kept while a
	// snapshot arrived in order (the snapshot's own sums replace them when
	// it completes; resum recomputes them if it does not).
	stale []bool
}

// freshSums accumulates a snapshot's sums from its words while it arrives
// from bucket 0 in order.
type freshSums struct {
	active bool
	next   uint64 // the next bucket expected
	sums   []uint64
}

func newSealing(lanes int, n uint64) *sealing {
	s := &sealing{sums: make([][]uint64, lanes), fresh: make([]freshSums, lanes), stale: make([]bool, lanes)}
	for l := range lanes {
		s.sums[l] = make([]uint64, segments(n))
		s.fresh[l].sums = make([]uint64, segments(n))
	}
	return s
}

// segShift returns log2 of the buckets per segment (a power of two).
func (m *mapping) segShift() uint {
	n := m.hdr.buckets
	return uint(bits.TrailingZeros64(n / uint64(segments(n))))
}

// storeChunk stores a snapshot chunk of lane from bucket off. A chunk that
// starts or continues a snapshot in order (the usual case) only sums its
// own words into the snapshot's fresh sums and is stored by the table's
// own fast path (replica.Table.StoreWords: plain moves); the lane's running
// sums are left stale until the snapshot completes (sealFresh) or is
// abandoned (resum). Any other chunk goes word by word through store. The
// caller checked the indices and runs it inside a fault guard.
func (w *Writer) storeChunk(lane int, off uint64, words []uint64) {
	f := &w.seal.fresh[lane]
	if off == 0 {
		f.active, f.next = true, 0
		clear(f.sums)
	}
	if !f.active || off != f.next {
		f.active = false
		w.store(lane, off, words, nil)
		return
	}
	blk := w.m.integrity(lane)
	ver := lockLane(blk)
	w.seal.stale[lane] = true
	atomic.StoreUint64(&blk[iwStale], 1)
	shift := w.m.segShift()
	// A segment at a time, into a register: consecutive words share it.
	for i := 0; i < len(words); {
		seg := (off + uint64(i)) >> shift
		end := min(len(words), int((seg+1)<<shift-off))
		var acc uint64
		for j, word := range words[i:end] {
			acc += mix(off+uint64(i+j), word)
		}
		f.sums[seg] += acc
		i = end
	}
	w.m.table.StoreWords(lane, off, words)
	f.next = off + uint64(len(words))
	atomic.StoreUint64(&blk[iwVersion], ver+2)
}

// store writes words into lane from bucket off (a chunk out of order), or
// each image into its bucket (a delta: words nil), one atomic store each,
// keeping the lane's sums (private and published) in step from the words
// they replace, inside an odd version. The caller checked every index and
// runs it inside a fault guard.
func (w *Writer) store(lane int, off uint64, words []uint64, images []ckf.Image) {
	m, s := w.m, w.seal
	s.fresh[lane].active = false
	if s.stale[lane] {
		w.resum(lane)
	}
	shift := m.segShift()
	rows, stride := m.rows(), uint64(m.hdr.stride)
	blk := m.integrity(lane)
	ver := lockLane(blk)
	// Each segment's change is summed here and applied once: the sums
	// stay off the per-word path (BenchmarkApply).
	var delta [MaxSegments]uint64
	var touched uint64 // segments whose sum changed (K ≤ 64)
	count := len(words) + len(images)
	for i := range count {
		var b, word uint64
		if images != nil {
			b, word = uint64(images[i].Bucket), images[i].Word
		} else {
			b, word = off+uint64(i), words[i]
		}
		cell := &rows[b*stride+uint64(lane)]
		seg := b >> shift
		touched |= 1 << seg
		delta[seg] += mix(b, word) - mix(b, atomic.LoadUint64(cell))
		atomic.StoreUint64(cell, word)
	}
	sums := s.sums[lane]
	for t := touched; t != 0; t &= t - 1 {
		seg := bits.TrailingZeros64(t)
		v := atomic.LoadUint64(&sums[seg]) + delta[seg]
		atomic.StoreUint64(&sums[seg], v)
		atomic.StoreUint64(&blk[iwSums+seg], v)
	}
	atomic.StoreUint64(&blk[iwVersion], ver+2)
}

// resum recomputes lane's running sums from its words as the file holds
// them and publishes them: after a snapshot that was abandoned half-way
// (its words were stored without keeping the sums). It reads the whole
// lane, once per abandoned snapshot.
func (w *Writer) resum(lane int) {
	m, s := w.m, w.seal
	shift := m.segShift()
	rows, stride := m.rows(), uint64(m.hdr.stride)
	blk := m.integrity(lane)
	ver := lockLane(blk)
	var sums [MaxSegments]uint64
	for b := range m.hdr.buckets {
		sums[b>>shift] += mix(b, atomic.LoadUint64(&rows[b*stride+uint64(lane)]))
	}
	for seg := range s.sums[lane] {
		atomic.StoreUint64(&s.sums[lane][seg], sums[seg])
		atomic.StoreUint64(&blk[iwSums+seg], sums[seg])
	}
	s.stale[lane] = false
	atomic.StoreUint64(&blk[iwStale], 0)
	atomic.StoreUint64(&blk[iwVersion], ver+2)
}

// lockLane makes lane's version odd and returns the even version it had:
// the lane's writer and its own verifier's republishing take turns by it
// (a compare-and-swap; the other side holds it for one store pass at most).
// Readers in other processes only read it. A version that stays odd past
// lockPatience was left so by a write that faulted or by damage to the
// file, not by a live holder: it is taken over.
func lockLane(blk []uint64) uint64 {
	var start time.Time
	for {
		v := atomic.LoadUint64(&blk[iwVersion])
		if v%2 == 0 && atomic.CompareAndSwapUint64(&blk[iwVersion], v, v+1) {
			return v
		}
		switch {
		case start.IsZero():
			start = time.Now()
		case time.Since(start) > lockPatience:
			v |= 1
			atomic.StoreUint64(&blk[iwVersion], v+2) // odd, past the stuck value
			return v + 1
		}
		runtime.Gosched()
	}
}

// lockPatience bounds the wait for a lane's version: a snapshot chunk's
// store pass (a few MiB) takes milliseconds.
const lockPatience = time.Second

// sealFresh publishes lane's fresh sums when a snapshot just arrived whole
// (from its first bucket to its last, in order), replacing whatever the
// lane's sums had become, and counts a seal; a lane whose snapshot did not
// complete has its sums recomputed instead.
func (w *Writer) sealFresh(lane int) {
	f := &w.seal.fresh[lane]
	if !f.active || f.next != w.m.hdr.buckets {
		f.active = false
		if w.seal.stale[lane] {
			w.resum(lane)
		}
		return
	}
	f.active = false
	blk := w.m.integrity(lane)
	ver := lockLane(blk)
	for seg, v := range f.sums {
		atomic.StoreUint64(&w.seal.sums[lane][seg], v)
		atomic.StoreUint64(&blk[iwSums+seg], v)
	}
	w.seal.stale[lane] = false
	atomic.StoreUint64(&blk[iwStale], 0)
	atomic.StoreUint64(&blk[iwSeals], atomic.LoadUint64(&blk[iwSeals])+1)
	atomic.StoreUint64(&blk[iwVersion], ver+2)
}

// VerifySegment is Reader.VerifySegment against the writer's own copy of
// the sums, which damage to the file cannot reach; a lane whose published
// sums differ from that copy (the file's integrity block was damaged) gets
// them published again, so readers stop flagging it. It may run
// concurrently with the lanes' writers. An in-memory image has nothing to
// verify.
func (w *Writer) VerifySegment(seg int, mask uint64) (bad, busy uint64) {
	if w.seal == nil {
		return 0, 0
	}
	bad, busy = w.m.verify(seg, mask, func(l int, _ []uint64) []uint64 { return w.seal.sums[l] })
	if !w.m.memory {
		defer w.m.guard(debug.SetPanicOnFault(true), nil)
	}
	for l := range w.m.hdr.lanes {
		if mask&^busy&(1<<l) == 0 {
			continue
		}
		blk, own := w.m.integrity(l), w.seal.sums[l]
		for k := range own {
			if atomic.LoadUint64(&blk[iwSums+k]) != atomic.LoadUint64(&own[k]) {
				ver := lockLane(blk)
				for k := range own {
					atomic.StoreUint64(&blk[iwSums+k], atomic.LoadUint64(&own[k]))
				}
				atomic.StoreUint64(&blk[iwVersion], ver+2)
				break
			}
		}
	}
	return bad, busy
}

// Segments returns K, the segments of each lane's integrity sums.
func (w *Writer) Segments() int { return segments(w.m.hdr.buckets) }
