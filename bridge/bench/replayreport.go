package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// ReplayReport is the result of Replay; its JSON form is `goindex bench
// radix --json`.
type ReplayReport struct {
	Benchmark string         `json:"benchmark"`
	Trace     TraceFigures   `json:"trace"`
	Setup     SetupFigures   `json:"setup"`
	Apply     ApplyFigures   `json:"apply"`
	Match     Latency        `json:"match"`
	Index     IndexFigures   `json:"index"`
	Cache     CacheFigures   `json:"cache"`
	Overlap   OverlapFigures `json:"overlap"`
	Workers   []WorkerRow    `json:"per_worker"`
	Examples  []ExampleQuery `json:"examples"`
	Machine   Machine        `json:"machine"`
}

// TraceFigures describe the replayed trace.
type TraceFigures struct {
	Path         string `json:"path"`
	Requests     int    `json:"requests"`
	Stretch      int    `json:"stretch"`
	Duplicate    int    `json:"duplicate"`
	PromptBlocks int    `json:"prompt_blocks"`
}

// SetupFigures echo the replay's configuration.
type SetupFigures struct {
	Workers        int    `json:"workers"`
	Seed           uint64 `json:"seed"`
	BlockSize      int    `json:"block_size"`
	Scheme         string `json:"scheme"`
	CapacityBlocks int    `json:"capacity_blocks"`
}

// ApplyFigures count the events and time their application to the index.
type ApplyFigures struct {
	Events         int     `json:"events"`
	StoredEvents   int     `json:"stored_events"`
	RemovedEvents  int     `json:"removed_events"`
	BlockOps       int     `json:"block_ops"` // stored blocks + removed hashes
	Seconds        float64 `json:"seconds"`
	EventsPerSec   float64 `json:"events_per_sec"`
	BlockOpsPerSec float64 `json:"block_ops_per_sec"`
	Errors         int     `json:"errors"`
	FirstError     string  `json:"first_error,omitempty"`
}

// IndexFigures count what the index must track, from the engines' caches,
// and what its heap costs per tracked block.
type IndexFigures struct {
	MemberBlocks            int            `json:"member_blocks"`   // (member, block) ownerships held
	DistinctBlocks          int            `json:"distinct_blocks"` // distinct prefixes held by anyone
	Reported                *ReportedSizes `json:"reported,omitempty"`
	HeapBytes               int64          `json:"heap_bytes"`
	HeapBytesPerMemberBlock float64        `json:"heap_bytes_per_member_block"`
	HeapBytesPerBlock       float64        `json:"heap_bytes_per_block"`
}

// ReportedSizes are the index's own counts (ReplayTarget.Sizes).
type ReportedSizes struct {
	DistinctBlocks int `json:"distinct_blocks"`
	MemberBlocks   int `json:"member_blocks"`
}

// CacheFigures are the engines' own cache statistics over the trace.
type CacheFigures struct {
	PromptBlocks  int     `json:"prompt_blocks"`
	HitBlocks     int     `json:"hit_blocks"`
	HitRate       float64 `json:"hit_rate"`
	StoredBlocks  int     `json:"stored_blocks"`
	EvictedBlocks int     `json:"evicted_blocks"`
}

// OverlapFigures hold the check of the index's answers against the engines.
type OverlapFigures struct {
	Verified          int     `json:"verified_queries"`
	WantTimedOverlaps int     `json:"want_timed_overlaps"` // what Match.Overlaps must be
	Mismatches        int     `json:"mismatches"`
	FirstMismatch     string  `json:"first_mismatch,omitempty"`
	Matched           int     `json:"matched_queries"`
	MeanBestBlocks    float64 `json:"mean_best_overlap_blocks"`
	BestFraction      float64 `json:"best_overlap_fraction"` // Σ best depth / Σ query blocks
}

// WorkerRow is one worker's share of the replay.
type WorkerRow struct {
	Worker         uint64  `json:"worker"`
	Requests       int     `json:"requests"`
	PromptBlocks   int     `json:"prompt_blocks"`
	HitBlocks      int     `json:"hit_blocks"`
	HitRate        float64 `json:"hit_rate"`
	EvictedBlocks  int     `json:"evicted_blocks"`
	HeldBlocks     int     `json:"held_blocks"`
	MatchedQueries int     `json:"matched_queries"`
	MeanMatched    float64 `json:"mean_matched_blocks"` // over the queries it matched
}

// ExampleQuery is one of the most-shared queries with every holder's depth.
type ExampleQuery struct {
	Request int           `json:"request"`
	Worker  int           `json:"worker"` // where the trace sent it
	Blocks  int           `json:"blocks"`
	Matches []ExampleHold `json:"matches"` // deepest first
}

// ExampleHold is one member's matched depth of an example query.
type ExampleHold struct {
	Worker uint64 `json:"worker"`
	Rank   uint32 `json:"rank"`
	Blocks int    `json:"blocks"`
}

// Check fails (ErrCheck) when the index rejected events, counts blocks
// other than the engines hold, or disagreed with the engines on a query:
// the figures would not measure what they claim.
func (r *ReplayReport) Check() error {
	if r.Apply.Errors > 0 {
		return fmt.Errorf("bench %s: the index rejected %d of %d events (first: %s): %w", r.Benchmark, r.Apply.Errors, r.Apply.Events, r.Apply.FirstError, ErrCheck)
	}
	if rs := r.Index.Reported; rs != nil && (rs.DistinctBlocks != r.Index.DistinctBlocks || rs.MemberBlocks != r.Index.MemberBlocks) {
		return fmt.Errorf("bench %s: the index reports %d distinct and %d member blocks, the engines hold %d and %d: %w",
			r.Benchmark, rs.DistinctBlocks, rs.MemberBlocks, r.Index.DistinctBlocks, r.Index.MemberBlocks, ErrCheck)
	}
	if r.Match.Overlaps != r.Overlap.WantTimedOverlaps {
		return fmt.Errorf("bench %s: the timed queries returned %d overlaps, the engines imply %d: %w", r.Benchmark, r.Match.Overlaps, r.Overlap.WantTimedOverlaps, ErrCheck)
	}
	if r.Overlap.Mismatches > 0 {
		return fmt.Errorf("bench %s: %d of %d queries disagree with the engines' caches (first: %s): %w", r.Benchmark, r.Overlap.Mismatches, r.Overlap.Verified, r.Overlap.FirstMismatch, ErrCheck)
	}
	return nil
}

// maxWorkerRows bounds the per-worker table of the human report.
const maxWorkerRows = 32

// Print writes the human-readable report.
func (r *ReplayReport) Print(w io.Writer) {
	fmt.Fprintf(w, "goindex bench %s: %s\n", r.Benchmark, r.Trace.Path)
	fmt.Fprintf(w, "trace    %d requests (stretch %d, duplicate %d), %d prompt blocks\n", r.Trace.Requests, r.Trace.Stretch, r.Trace.Duplicate, r.Trace.PromptBlocks)
	fmt.Fprintf(w, "setup    %d workers (partition seed %d), block size %d (%s), %d cache blocks per worker\n", r.Setup.Workers, r.Setup.Seed, r.Setup.BlockSize, r.Setup.Scheme, r.Setup.CapacityBlocks)
	fmt.Fprintf(w, "apply    %d events (%d stored, %d removed), %d block ops in %.1f ms: %s events/s, %s block ops/s\n",
		r.Apply.Events, r.Apply.StoredEvents, r.Apply.RemovedEvents, r.Apply.BlockOps, r.Apply.Seconds*1e3, si(r.Apply.EventsPerSec), si(r.Apply.BlockOpsPerSec))
	fmt.Fprintf(w, "match    %d queries: p50 %.2f µs, p99 %.2f µs, mean %.2f µs, max %.2f µs\n", r.Match.Queries, r.Match.P50us, r.Match.P99us, r.Match.MeanUs, r.Match.MaxUs)
	counted := ""
	if rs := r.Index.Reported; rs != nil {
		counted = fmt.Sprintf(" (index's own count: %d and %d)", rs.MemberBlocks, rs.DistinctBlocks)
	}
	fmt.Fprintf(w, "index    %d member blocks, %d distinct blocks%s, heap %s: %.0f B per member block, %.0f B per block\n",
		r.Index.MemberBlocks, r.Index.DistinctBlocks, counted, bytesIEC(r.Index.HeapBytes), r.Index.HeapBytesPerMemberBlock, r.Index.HeapBytesPerBlock)
	fmt.Fprintf(w, "cache    engine hit rate %.1f%% (%d of %d prompt blocks), %d stored, %d evicted\n",
		100*r.Cache.HitRate, r.Cache.HitBlocks, r.Cache.PromptBlocks, r.Cache.StoredBlocks, r.Cache.EvictedBlocks)
	fmt.Fprintf(w, "overlap  %d queries checked against the engines: %d mismatches; %d matched somewhere, best overlap %.1f blocks on average (%.1f%% of the prompt)\n",
		r.Overlap.Verified, r.Overlap.Mismatches, r.Overlap.Matched, r.Overlap.MeanBestBlocks, 100*r.Overlap.BestFraction)
	fmt.Fprintln(w)
	r.printWorkers(w)
	r.printExamples(w)
	fmt.Fprintf(w, "\nmachine  %s; apply and match run on one goroutine\n", r.Machine)
}

func (r *ReplayReport) printWorkers(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "worker\trequests\tprompt blocks\thit blocks\thit rate\tevicted\theld\tmatched queries\tmean depth\t")
	for i, row := range r.Workers {
		if i == maxWorkerRows {
			fmt.Fprintf(tw, "…\t%d more workers in --json\t\t\t\t\t\t\t\t\n", len(r.Workers)-maxWorkerRows)
			break
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.1f%%\t%d\t%d\t%d\t%.1f\t\n", row.Worker, row.Requests, row.PromptBlocks, row.HitBlocks,
			100*row.HitRate, row.EvictedBlocks, row.HeldBlocks, row.MatchedQueries, row.MeanMatched)
	}
	tw.Flush()
}

func (r *ReplayReport) printExamples(w io.Writer) {
	if len(r.Examples) > 0 {
		fmt.Fprintln(w, "\nexample queries (member=matched blocks, deepest first):")
	}
	for _, ex := range r.Examples {
		fmt.Fprintf(w, "  request %d (%d-block prompt, served by worker %d):", ex.Request, ex.Blocks, ex.Worker)
		for i, m := range ex.Matches {
			if i == 8 {
				fmt.Fprintf(w, " … %d more", len(ex.Matches)-8)
				break
			}
			fmt.Fprintf(w, " %d/%d=%d", m.Worker, m.Rank, m.Blocks)
		}
		if len(ex.Matches) == 0 {
			fmt.Fprint(w, " no member holds its first block")
		}
		fmt.Fprintln(w)
	}
}
