package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// CKFReport is the result of CKF; its JSON form is `goindex bench ckf
// --json`.
type CKFReport struct {
	Benchmark string `json:"benchmark"`
	Trace     string `json:"trace"`
	Requests  int    `json:"trace_requests"`
	BlockSize int    `json:"block_size"`
	Seed      uint64 `json:"seed"`
	// Interleaved says the probes were timed query by query in turn.
	Interleaved bool      `json:"interleaved"`
	Cells       []CKFCell `json:"cells"`
	Machine     Machine   `json:"machine"`
}

// CKFCell is one (lanes, blocks per lane) cell.
type CKFCell struct {
	Lanes         int     `json:"lanes"`
	BlocksPerLane int     `json:"blocks_per_lane"`
	Buckets       uint64  `json:"buckets"`
	Load          float64 `json:"load"` // slot occupancy of the lanes, mean
	Copies        int     `json:"universe_copies"`
	Queries       int     `json:"queries"`
	QueryBlocks   float64 `json:"mean_query_blocks"`
	HitLanes      float64 `json:"mean_hit_lanes"` // lanes with exact depth > 0 per query
	ExactBlocks   float64 `json:"mean_exact_best_blocks"`

	Shape  CKFShape  `json:"shape"`
	Probe  CKFProbe  `json:"probe"`
	Ratios CKFRatios `json:"ratios"`
	Checks CKFChecks `json:"checks"`
	Ingest CKFIngest `json:"ingest"`
	Memory CKFMemory `json:"memory"`
	// RadixSkipped and ChurnedSkipped say why a radix index was not built.
	RadixSkipped   string  `json:"radix_skipped,omitempty"`
	ChurnedSkipped string  `json:"radix_churned_skipped,omitempty"`
	Seconds        float64 `json:"build_seconds"`
}

// CKFProbe holds each structure's latency per query.
type CKFProbe struct {
	// Chunked is the default search (replica.Chunked) from the canonical
	// hashes, on a table whose memory asked for huge pages.
	Chunked Latency `json:"replica_chunked"`
	// ChunkedSmallPages is the same search on a copy of the table on 4 KiB
	// pages (MADV_NOHUGEPAGE), as a router reads a replica file where
	// shared memory has no huge pages.
	ChunkedSmallPages *Latency `json:"replica_chunked_small_pages,omitempty"`
	// ChunkedLocals is the chunked search given the query's local hashes
	// (replica.Searcher.SearchLocals chains them as it reads): the
	// router-facing figure, from the same input the radix index walks.
	ChunkedLocals Latency `json:"replica_chunked_locals"`
	Bisect        Latency `json:"replica_bisect"`
	// AFirst is the search reading row B only where row A leaves a lane
	// unresolved (replica.AFirst).
	AFirst Latency `json:"replica_afirst"`
	// Radix is the exact index in its best case: each lane's nodes
	// allocated in arrival order, so a chain lies in consecutive lines.
	Radix *Latency `json:"radix,omitempty"`
	// RadixChurned is the same content with its nodes at random ids, as
	// after hours of evictions.
	RadixChurned *Latency `json:"radix_churned,omitempty"`
	PerLane      Latency  `json:"perlane_filters"`
	// Chain is kv.AppendChain of the query's local hashes alone: the
	// canonical hashes the replica and the per-lane filters start from.
	Chain Latency `json:"chain"`
}

// CKFRatios are the chunked replica's latency over another structure's
// from the same run: below 1 the CKF is faster. Radix ratios are absent
// when the radix index was not built.
type CKFRatios struct {
	RadixP50 float64 `json:"chunked_over_radix_p50,omitempty"`
	RadixP99 float64 `json:"chunked_over_radix_p99,omitempty"`
	// LocalsRadix* are chunked-from-locals over radix: both from the local
	// hashes.
	LocalsRadixP50 float64 `json:"locals_over_radix_p50,omitempty"`
	LocalsRadixP99 float64 `json:"locals_over_radix_p99,omitempty"`
	ChurnedP50     float64 `json:"chunked_over_radix_churned_p50,omitempty"`
	ChurnedP99     float64 `json:"chunked_over_radix_churned_p99,omitempty"`
	SmallPagesP50  float64 `json:"chunked_over_small_pages_p50,omitempty"`
	SmallPagesP99  float64 `json:"chunked_over_small_pages_p99,omitempty"`
	AFirstP50      float64 `json:"chunked_over_afirst_p50"`
	AFirstP99      float64 `json:"chunked_over_afirst_p99"`
	BisectP50      float64 `json:"chunked_over_bisect_p50"`
	BisectP99      float64 `json:"chunked_over_bisect_p99"`
	PerLaneP50     float64 `json:"chunked_over_perlane_p50"`
	PerLaneP99     float64 `json:"chunked_over_perlane_p99"`
}

// CKFChecks count (query, lane) results against the engines' caches.
type CKFChecks struct {
	Results        int `json:"results"`
	Underestimates int `json:"underestimates"` // the replica or radix below the exact depth
	// PerLaneUnder counts per-lane filter results below the exact depth:
	// the library drops a fingerprint when an insertion runs out of kicks,
	// so they can follow PerLaneInsertFails (they are reported, not failed).
	PerLaneUnder       int `json:"perlane_underestimates"`
	ChunkedOver        int `json:"chunked_over"`
	BisectOver         int `json:"bisect_over"`
	PerLaneOver        int `json:"perlane_over"`
	ChunkedVsLinear    int `json:"chunked_vs_linear_mismatches"`
	LocalsVsChunked    int `json:"locals_vs_chunked_mismatches"`      // SearchLocals against Search
	AFirstVsChunked    int `json:"afirst_vs_chunked_mismatches"`      // replica.AFirst against Chunked
	SmallVsChunked     int `json:"small_pages_vs_chunked_mismatches"` // the 4 KiB copy against the table
	RadixMismatches    int `json:"radix_mismatches"`                  // either radix index against the engines
	PerLaneInsertFails int `json:"perlane_insert_failures"`
	CapacityOmissions  int `json:"producer_capacity_omissions"`
}

// CKFIngest are the ingest rates of the same events, one core.
type CKFIngest struct {
	Events         int     `json:"events"`
	BlockOps       int     `json:"block_ops"` // stored blocks + removed hashes, all lanes
	ProducerOpsSec float64 `json:"producer_block_ops_per_sec"`
	RadixOpsSec    float64 `json:"radix_block_ops_per_sec,omitempty"`
	PerLaneOpsSec  float64 `json:"perlane_block_ops_per_sec"`
	// The same rates over the CPU time of the ingesting thread (linux):
	// time the thread waited for a core while other processes ran is
	// left out, so on a loaded shared machine these are the per-core
	// figures.
	ProducerCPUOpsSec float64 `json:"producer_block_ops_per_cpu_sec,omitempty"`
	RadixCPUOpsSec    float64 `json:"radix_block_ops_per_cpu_sec,omitempty"`
}

// CKFMemory is the memory per tracked block per lane.
type CKFMemory struct {
	ReplicaBytesPerBlock  float64 `json:"replica_bytes_per_block"`
	ProducerBytesPerBlock float64 `json:"producer_bytes_per_block"`
	RadixBytesPerBlock    float64 `json:"radix_heap_bytes_per_block,omitempty"`
	PerLaneBytesPerBlock  float64 `json:"perlane_bytes_per_block"`
	// ReplicaHugePageFraction is the share of the replica table the kernel
	// backed with huge pages (-1: unknown); SmallPagesHugeFraction the same
	// for its 4 KiB copy, which should be 0.
	ReplicaHugePageFraction float64 `json:"replica_huge_page_fraction"`
	SmallPagesHugeFraction  float64 `json:"small_pages_huge_page_fraction,omitempty"`
}

// Check fails (ErrCheck) when any structure answered below the exact
// depth, a radix index differed from the engines, or a chunked search from
// the linear reference: the latencies would not measure correct searches.
func (r *CKFReport) Check() error {
	for _, c := range r.Cells {
		k := c.Checks
		if k.Underestimates > 0 || k.RadixMismatches > 0 || k.ChunkedVsLinear > 0 || k.LocalsVsChunked > 0 || k.SmallVsChunked > 0 || k.AFirstVsChunked > 0 {
			return fmt.Errorf("bench ckf: lanes=%d blocks=%d: %d underestimates, %d radix mismatches, %d chunked-vs-linear, %d locals-vs-chunked, %d small-pages-vs-chunked and %d afirst-vs-chunked mismatches over %d results: %w",
				c.Lanes, c.BlocksPerLane, k.Underestimates, k.RadixMismatches, k.ChunkedVsLinear, k.LocalsVsChunked, k.SmallVsChunked, k.AFirstVsChunked, k.Results, ErrCheck)
		}
	}
	return nil
}

// Print writes the human-readable tables.
func (r *CKFReport) Print(w io.Writer) {
	fmt.Fprintf(w, "goindex bench ckf: %s (%d requests), block size %d, seed %d, %s\n\n", r.Trace, r.Requests, r.BlockSize, r.Seed, map[bool]string{true: "interleaved", false: "sequential"}[r.Interleaved])
	r.printProbe(w)
	r.printRatios(w)
	r.printShape(w)
	r.printIngest(w)
	r.printChecks(w)
	fmt.Fprintf(w, "\nmachine  %s; everything runs on one goroutine\n", r.Machine)
}

// latencyCell formats "p50 / p99", or why there is none.
func latencyCell(l *Latency, none string) string {
	if l == nil {
		return none
	}
	return fmt.Sprintf("%.2f / %.2f", l.P50us, l.P99us)
}

// ratioCell formats a ratio, "-" for none.
func ratioCell(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", v)
}

func (r *CKFReport) printProbe(w io.Writer) {
	fmt.Fprintln(w, "probe latency per query, µs (p50 / p99)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lanes\tblocks\tload\tquery blocks\thit lanes\treplica chunked\tA first\t4 KiB pages\tfrom locals\tbisect\tradix\tradix churned\tper-lane filters\tchain\t")
	for _, c := range r.Cells {
		p := &c.Probe
		fmt.Fprintf(tw, "%d\t%d\t%.1f%%\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			c.Lanes, c.BlocksPerLane, 100*c.Load, c.QueryBlocks, c.HitLanes,
			latencyCell(&p.Chunked, ""), latencyCell(&p.AFirst, ""), latencyCell(p.ChunkedSmallPages, "skipped"), latencyCell(&p.ChunkedLocals, ""),
			latencyCell(&p.Bisect, ""), latencyCell(p.Radix, "skipped"), latencyCell(p.RadixChurned, "skipped"),
			latencyCell(&p.PerLane, ""), latencyCell(&p.Chain, ""))
	}
	tw.Flush()
}

func (r *CKFReport) printRatios(w io.Writer) {
	fmt.Fprintln(w, "\nratios from the same run: chunked replica / other (below 1: the CKF is faster), p50 and p99")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lanes\tblocks\t/ radix\t\t/ radix churned\t\tlocals / radix\t\thuge / 4 KiB pages\t\t/ A first\t\t/ bisect\t\t/ per-lane\t\t")
	for _, c := range r.Cells {
		q := &c.Ratios
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c.Lanes, c.BlocksPerLane,
			ratioCell(q.RadixP50), ratioCell(q.RadixP99), ratioCell(q.ChurnedP50), ratioCell(q.ChurnedP99),
			ratioCell(q.LocalsRadixP50), ratioCell(q.LocalsRadixP99), ratioCell(q.SmallPagesP50), ratioCell(q.SmallPagesP99),
			ratioCell(q.AFirstP50), ratioCell(q.AFirstP99),
			ratioCell(q.BisectP50), ratioCell(q.BisectP99), ratioCell(q.PerLaneP50), ratioCell(q.PerLaneP99))
	}
	tw.Flush()
}

func (r *CKFReport) printShape(w io.Writer) {
	fmt.Fprintln(w, "\nwhat the chunked search reads per query (mean; p99 in brackets), counted untimed")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lanes\tblocks\tquery blocks p50/p99\thit-lane depth\tpositions tested\tfetched\tlines fetched\ttested\tin flight\t4 KiB pages\tB-only hits\tB positions\t")
	for _, c := range r.Cells {
		s := &c.Shape
		fmt.Fprintf(tw, "%d\t%d\t%d / %d\t%.1f\t%.1f [%d]\t%.1f\t%.1f [%d]\t%.1f\t%.1f\t%.1f [%d]\t%.1f%%\t%.1f\t\n", c.Lanes, c.BlocksPerLane,
			s.QueryBlocksP50, s.QueryBlocksP99, s.HitDepth, s.TestedPositions, s.TestedPositionsP99, s.FetchedPositions,
			s.FetchedLines, s.FetchedLinesP99, s.TestedLines, s.LeadLines, s.Pages, s.PagesP99, 100*s.BHitShare, s.BPositions)
	}
	tw.Flush()
}

func (r *CKFReport) printIngest(w io.Writer) {
	fmt.Fprintln(w, "\ningest (block ops/s, one core, same events) and memory (bytes per tracked block per lane)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lanes\tblocks\tblock ops\tproducer\tproducer cpu\tradix\tradix cpu\tper-lane\treplica B\thuge pages\tproducer B\tradix B\tper-lane B\t")
	for _, c := range r.Cells {
		radixOps, radixCPU, radixB := "skipped", "skipped", "skipped"
		if c.Probe.Radix != nil {
			radixOps, radixCPU, radixB = si(c.Ingest.RadixOpsSec), si(c.Ingest.RadixCPUOpsSec), fmt.Sprintf("%.1f", c.Memory.RadixBytesPerBlock)
		}
		huge := "unknown"
		if f := c.Memory.ReplicaHugePageFraction; f >= 0 {
			huge = fmt.Sprintf("%.0f%%", 100*f)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%.1f\t%s\t%.2f\t\n", c.Lanes, c.BlocksPerLane, c.Ingest.BlockOps,
			si(c.Ingest.ProducerOpsSec), si(c.Ingest.ProducerCPUOpsSec), radixOps, radixCPU, si(c.Ingest.PerLaneOpsSec),
			c.Memory.ReplicaBytesPerBlock, huge, c.Memory.ProducerBytesPerBlock, radixB, c.Memory.PerLaneBytesPerBlock)
	}
	tw.Flush()
}

func (r *CKFReport) printChecks(w io.Writer) {
	fmt.Fprintln(w, "\nchecks against the engines' caches ((query, lane) results above the exact depth; none may be below)")
	for _, c := range r.Cells {
		k := c.Checks
		fmt.Fprintf(w, "  lanes=%d blocks=%d: %d results, %d under; over: chunked %d, bisect %d, per-lane %d; radix mismatches %d; locals vs chunked %d; A first vs chunked %d; 4 KiB vs chunked %d; per-lane: %d insert failures, %d under; producer omissions %d\n",
			c.Lanes, c.BlocksPerLane, k.Results, k.Underestimates, k.ChunkedOver, k.BisectOver, k.PerLaneOver, k.RadixMismatches, k.LocalsVsChunked, k.AFirstVsChunked, k.SmallVsChunked, k.PerLaneInsertFails, k.PerLaneUnder, k.CapacityOmissions)
		if c.RadixSkipped != "" {
			fmt.Fprintf(w, "    radix skipped: %s\n", c.RadixSkipped)
		}
		if c.ChurnedSkipped != "" {
			fmt.Fprintf(w, "    churned radix skipped: %s\n", c.ChurnedSkipped)
		}
	}
}
