package bench

import (
	"slices"
	"unsafe"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/replica"
)

// pageBytes is the page the shape counts a query's distinct pages in: the
// translation unit of a table on 4 KiB pages, and of one on huge pages
// wherever the hypervisor backs the guest's memory with 4 KiB pages.
const pageBytes = 4096

// CKFShape is what the chunked search reads per query, counted untimed on
// the cell's queries: the workload's shape and the memory traffic behind
// the probe latency. Means are per query unless named otherwise.
type CKFShape struct {
	QueryBlocksP50 int `json:"query_blocks_p50"`
	QueryBlocksP99 int `json:"query_blocks_p99"`
	// HitDepth is the mean exact depth of a lane that holds the query's
	// first block.
	HitDepth float64 `json:"mean_hit_lane_depth"`
	// Positions the search tested (its scan stops when no lane is left)
	// and fetched (prefetched ahead of the tests; the excess was never
	// tested).
	TestedPositions    float64 `json:"tested_positions"`
	TestedPositionsP99 int     `json:"tested_positions_p99"`
	FetchedPositions   float64 `json:"fetched_positions"`
	// Lines prefetched and lines tested (64-byte lines of rows A and B
	// of the lane groups read), and the lines prefetched before the first
	// test: the misses in flight at once.
	FetchedLines    float64 `json:"fetched_lines"`
	FetchedLinesP99 int     `json:"fetched_lines_p99"`
	TestedLines     float64 `json:"tested_lines"`
	LeadLines       float64 `json:"lead_lines"`
	// Pages is the distinct 4 KiB pages of the fetched rows: each one a
	// TLB miss unless the query shares it with recent ones.
	Pages    float64 `json:"pages"`
	PagesP99 int     `json:"pages_p99"`
	// BHitShare is the share of (tested position, hit lane) pairs whose
	// fingerprint is in row B only; BPositions the tested positions per
	// query at which some active lane misses row A, the positions whose
	// row B an A-first search would still have to read.
	BHitShare  float64 `json:"b_only_hit_share"`
	BPositions float64 `json:"b_positions"`
}

// shapeCounter accumulates CKFShape over a cell's queries.
type shapeCounter struct {
	r                                      *ckfRun
	lanes                                  int
	rowWords                               uint64 // words per row (lanes rounded up to a lane group)
	base                                   uintptr
	qblocks, tested, lines, pages          []int
	hitDepth, hitLanes, fetched, testedLns int
	fetchedLines, lead, hits, bHits, bPos  int
	pageBuf                                []uintptr
}

func newShapeCounter(r *ckfRun) *shapeCounter {
	d := r.cell.Lanes
	return &shapeCounter{r: r, lanes: d, rowWords: uint64((d + replica.GroupLanes - 1) &^ (replica.GroupLanes - 1)),
		base: uintptr(unsafe.Pointer(unsafe.SliceData(r.words)))}
}

// add counts query q, whose chunked search moved the searcher's stats from
// before to after and answered depth.
func (sc *shapeCounter) add(q int, before, after replica.Stats, depth []uint32) {
	r, chain := sc.r, sc.r.queries[q].chain
	sc.qblocks = append(sc.qblocks, len(chain))
	tested := int(after.Probes - before.Probes)
	fetched := int(after.FetchedPositions - before.FetchedPositions)
	lines := int(after.FetchedLines - before.FetchedLines)
	sc.tested = append(sc.tested, tested)
	sc.lines = append(sc.lines, lines)
	sc.fetched += fetched
	sc.fetchedLines += lines
	sc.testedLns += int(after.TestedLines - before.TestedLines)
	sc.lead += int(after.LeadLines - before.LeadLines)
	for l := range sc.lanes {
		if e := r.exact[q][l]; e > 0 {
			sc.hitLanes++
			sc.hitDepth += int(e)
		}
	}
	sc.pageBuf = sc.pageBuf[:0]
	for i := range fetched {
		p := r.format.Probe(chain[i])
		for _, b := range [2]uint32{p.A, p.B} {
			// Rows follow the region's one header line (replica.NewInRegion).
			first := sc.base + replica.RegionAlignBytes + uintptr(uint64(b)*sc.rowWords*8)
			sc.pageBuf = append(sc.pageBuf, first/pageBytes, (first+uintptr(sc.rowWords*8)-1)/pageBytes)
		}
		if i >= tested {
			continue
		}
		var active, hitA uint64
		for l := range sc.lanes {
			if int(depth[l]) < i {
				continue
			}
			active |= 1 << l
			if ckf.Contains(r.table.Word(l, uint64(p.A)), p.FP) {
				hitA |= 1 << l
			}
			if int(depth[l]) > i {
				sc.hits++
				if hitA&(1<<l) == 0 {
					sc.bHits++
				}
			}
		}
		if active&^hitA != 0 {
			sc.bPos++
		}
	}
	slices.Sort(sc.pageBuf)
	sc.pages = append(sc.pages, len(slices.Compact(sc.pageBuf)))
}

// shape returns the counts as a CKFShape.
func (sc *shapeCounter) shape() CKFShape {
	n := float64(len(sc.qblocks))
	if n == 0 {
		return CKFShape{}
	}
	pct := func(v []int, p int) int {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[min(len(s)-1, len(s)*p/100)]
	}
	mean := func(v []int) float64 {
		t := 0
		for _, x := range v {
			t += x
		}
		return float64(t) / n
	}
	ratio := func(a, b int) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	return CKFShape{
		QueryBlocksP50: pct(sc.qblocks, 50), QueryBlocksP99: pct(sc.qblocks, 99),
		HitDepth:        ratio(sc.hitDepth, sc.hitLanes),
		TestedPositions: mean(sc.tested), TestedPositionsP99: pct(sc.tested, 99),
		FetchedPositions: float64(sc.fetched) / n,
		FetchedLines:     mean(sc.lines), FetchedLinesP99: pct(sc.lines, 99),
		TestedLines: float64(sc.testedLns) / n, LeadLines: float64(sc.lead) / n,
		Pages: mean(sc.pages), PagesP99: pct(sc.pages, 99),
		BHitShare: ratio(sc.bHits, sc.hits), BPositions: float64(sc.bPos) / n,
	}
}
