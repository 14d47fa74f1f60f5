package hostindex

import (
	"cmp"
	"slices"

	"github.com/goindex/goindex/goindex/kv"
)

// Match appends the overlaps of the query (local hashes from the root) to
// dst, unsorted and uncounted: one per member with a positive depth (exact,
// ckf) or per ready DC lane (global: Worker = DC id, Rank = lane). locals
// may be memory the caller owns: it is read during the call only.
func (ix *Index) Match(dst []kv.Overlap, locals []uint64) []kv.Overlap {
	switch {
	case ix.exact != nil:
		return ix.exact.Match(dst, locals)
	case ix.ckf != nil:
		return ix.ckf.Match(dst, locals)
	}
	return ix.global.match(dst, locals)
}

// CountProbe counts one probe call (goindex_stats's probes).
func (ix *Index) CountProbe() { ix.probes.Add(1) }

// ProbeBatch matches the queries locals[0:lens[0]], locals[lens[0]:][:lens[1]],
// … and appends each query's overlaps to dst sorted by member, query q's
// ending at ends[q]; it counts one probe. The lengths must sum to at most
// len(locals).
func (ix *Index) ProbeBatch(dst []kv.Overlap, ends []int, locals []uint64, lens []int) ([]kv.Overlap, []int) {
	off := 0
	for _, n := range lens {
		start := len(dst)
		dst = ix.Match(dst, locals[off:off+n])
		SortMembers(dst[start:])
		ends = append(ends, len(dst))
		off += n
	}
	ix.CountProbe()
	return dst, ends
}

// SortMembers orders overlaps by (worker, rank). A probe reports one entry
// per member or lane, a few dozen at most in practice and often in order
// already (global mode's lanes when "dcs" is sorted, radix's entries of one
// depth), so one pass finds the sorted prefix first and a linear insertion
// places the rest; longer unsorted results fall back to pdqsort
// (BenchmarkSortMembers, BENCHMARKS.md).
func SortMembers(o []kv.Overlap) {
	i := 1
	for i < len(o) && !o[i].Member.Less(o[i-1].Member) {
		i++
	}
	if i >= len(o) {
		return
	}
	if len(o) > InsertionSortMax {
		slices.SortFunc(o, byMember)
		return
	}
	for ; i < len(o); i++ {
		v, j := o[i], i
		for j > 0 && v.Member.Less(o[j-1].Member) {
			o[j] = o[j-1]
			j--
		}
		o[j] = v
	}
}

// InsertionSortMax is the longest result SortMembers sorts by insertion.
const InsertionSortMax = 32

func byMember(a, b kv.Overlap) int {
	if a.Member.Worker != b.Member.Worker {
		return cmp.Compare(a.Member.Worker, b.Member.Worker)
	}
	return cmp.Compare(a.Member.Rank, b.Member.Rank)
}

// depth returns m's entry in overlaps sorted by member, 0 when absent.
func depth(overlaps []kv.Overlap, m kv.Member) int {
	i, ok := slices.BinarySearchFunc(overlaps, kv.Overlap{Member: m}, byMember)
	if !ok {
		return 0
	}
	return overlaps[i].Blocks
}
