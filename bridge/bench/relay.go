package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/relayproto"
)

// Limits of Relay's configuration.
const (
	MaxRelayLanes  = relayproto.MaxLanes
	MaxRelayBlocks = 1 << 24
)

// RelayConfig configures Relay: DC relays and one consumer over an
// embedded NATS server on loopback, all in this process.
type RelayConfig struct {
	// Lanes is the number of DCs, each with its own relay, in [1, MaxRelayLanes].
	Lanes int
	// Blocks is the blocks per lane, in [1, MaxRelayBlocks].
	Blocks int
	// RunBlocks is the blocks per stored event while filling. optional; default: 64
	RunBlocks int
	// SteadyEvents is the events of the steady-state phase. optional; default: 20,000
	SteadyEvents int
	// Samples is the visibility latency samples. optional; default: 200
	Samples int
	// Seed seeds the block hashes.
	Seed uint64
	// Synthetic fills each lane's table directly with random fingerprints
	// at the load of Blocks (no events, no exact ownership) and runs only
	// the resync and encoding phases.
	Synthetic bool
	// Progress receives the phases' progress lines. optional
	Progress io.Writer
	// ResyncProfile receives a CPU profile (runtime/pprof) of the cold
	// resync alone, from the consumer's start to every lane READY: the
	// relays' server sending, the consumer receiving, decoding and
	// installing share the process, so the profile splits the resync by
	// stage. optional
	ResyncProfile io.Writer
}

func (c *RelayConfig) validate() error {
	c.RunBlocks = cmp.Or(c.RunBlocks, 64)
	c.SteadyEvents = cmp.Or(c.SteadyEvents, 20_000)
	c.Samples = cmp.Or(c.Samples, 200)
	switch {
	case c.Lanes < 1 || c.Lanes > MaxRelayLanes:
		return fmt.Errorf("%w: %d lanes, want 1..%d", ErrConfig, c.Lanes, MaxRelayLanes)
	case c.Blocks < 1 || c.Blocks > MaxRelayBlocks:
		return fmt.Errorf("%w: %d blocks, want 1..%d", ErrConfig, c.Blocks, MaxRelayBlocks)
	case c.RunBlocks < 1 || c.RunBlocks > dynamo.MaxBlocksPerEvent:
		return fmt.Errorf("%w: run blocks %d, want 1..%d", ErrConfig, c.RunBlocks, dynamo.MaxBlocksPerEvent)
	case c.SteadyEvents < 1 || c.Samples < 1:
		return fmt.Errorf("%w: steady events and samples must be ≥ 1", ErrConfig)
	}
	return nil
}

// RelayReport is the result of Relay; its JSON form is `goindex bench
// relay --json`.
type RelayReport struct {
	// Synthetic says the tables were filled directly, not by events:
	// FillSeconds is then the synthesis and the relays' start-up.
	Synthetic     bool          `json:"synthetic"`
	Lanes         int           `json:"lanes"`
	BlocksPerLane int           `json:"blocks_per_lane"`
	Buckets       uint64        `json:"buckets"`
	LoadFactor    float64       `json:"load_factor"`
	FillSeconds   float64       `json:"fill_seconds"`
	Resync        RelayResync   `json:"resync"`
	Encoding      RelayEncoding `json:"encoding"`
	Steady        *RelaySteady  `json:"steady,omitempty"` // absent from a synthetic run, as are Visible and Apply
	Visible       *RelayVisible `json:"visible,omitempty"`
	Apply         *RelayApply   `json:"apply,omitempty"`
	Machine       Machine       `json:"machine"`
}

// RelayResync is the cold consumer's resync of every lane.
type RelayResync struct {
	Seconds float64 `json:"seconds"`
	// CPUSeconds is the CPU time the whole process (server, relays and
	// consumer) used during the resync (linux): on a shared machine the
	// figure that does not depend on what else runs.
	CPUSeconds           float64 `json:"cpu_seconds,omitempty"`
	WireBytes            uint64  `json:"wire_bytes"`
	WireBytesPerBlock    float64 `json:"wire_bytes_per_block"`
	SnapshotBytes        int64   `json:"snapshot_bytes"`
	ResidentBlocks       uint64  `json:"resident_blocks"`
	BlocksPerSecond      float64 `json:"blocks_per_second"`
	ExtrapolatedTo130MSs float64 `json:"extrapolated_130m_seconds"`
	// Retries counts lane subscriptions that ended before every lane was
	// READY (each one re-reads its snapshot): 0 in a clean resync.
	Retries uint64 `json:"retries"`
}

// RelayEncoding is the snapshot bytes per resident block of each encoding
// and the floor under any encoding: the information in the lanes' tables
// (each bucket's multiset of fingerprints and the buckets' occupancies),
// in bytes per resident block.
type RelayEncoding struct {
	DenseBytesPerBlock   float64 `json:"dense_bytes_per_block"`
	CompactBytesPerBlock float64 `json:"compact_bytes_per_block"`
	FloorBytesPerBlock   float64 `json:"floor_bytes_per_block"`
}

// RelaySteady is the steady phase: lane 0's delta frames and images.
type RelaySteady struct {
	Events       int     `json:"events"`
	Seconds      float64 `json:"seconds"`
	Frames       uint64  `json:"frames"`
	Images       uint64  `json:"images"`
	FramesPerSec float64 `json:"frames_per_second"`
	ImagesPerSec float64 `json:"images_per_second"`
}

// RelayVisible is the event → replica latency.
type RelayVisible struct {
	Samples int     `json:"samples"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
}

// RelayApply is the consumer-side time per delta frame (decode and
// install into the replica) over the steady and visible phases.
type RelayApply struct {
	Frames         int     `json:"frames"`
	ImagesPerFrame float64 `json:"images_per_frame"`
	P50Us          float64 `json:"p50_us"`
	P99Us          float64 `json:"p99_us"`
	MaxUs          float64 `json:"max_us"`
}

// Relay runs the relay benchmark: fill (or synthesize), encoding, cold
// resync, then (not synthetic) steady deltas, event → replica visibility
// and the consumer's delta apply. A replica that differs from its
// producers after the resync is an ErrCheck error.
func Relay(ctx context.Context, cfg RelayConfig) (*RelayReport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &relayBench{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 7))}
	defer b.close()
	rep, err := b.run(ctx)
	if err != nil {
		return nil, err
	}
	rep.Machine = ReadMachine()
	return rep, nil
}

// Print writes the human-readable report.
func (r *RelayReport) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	if r.Synthetic {
		fmt.Fprintf(tw, "SYNTHETIC tables\teach lane filled directly with %d random fingerprints (no events, no exact ownership);\n", r.BlocksPerLane)
		fmt.Fprintf(tw, "\tpublished by the real relays' snapshot store, resynced by the real consumer\n")
	}
	fmt.Fprintf(tw, "lanes × blocks\t%d × %d (%d buckets per lane, load %.3f)\n", r.Lanes, r.BlocksPerLane, r.Buckets, r.LoadFactor)
	if r.Synthetic {
		fmt.Fprintf(tw, "synthesize\t%.2f s (tables filled, relays up, snapshots stored)\n", r.FillSeconds)
	} else {
		fmt.Fprintf(tw, "fill\t%.2f s\n", r.FillSeconds)
	}
	fmt.Fprintf(tw, "cold resync\t%.2f s (%.2f s of CPU), %d bytes received (%.3f B/block), %.1f M blocks/s; 130M blocks ≈ %.1f s at this rate; %d lane retries\n",
		r.Resync.Seconds, r.Resync.CPUSeconds, r.Resync.WireBytes, r.Resync.WireBytesPerBlock, r.Resync.BlocksPerSecond/1e6, r.Resync.ExtrapolatedTo130MSs, r.Resync.Retries)
	fmt.Fprintf(tw, "snapshot bytes/block\tdense %.3f, compact %.3f, floor %.3f (the tables' entropy)\n",
		r.Encoding.DenseBytesPerBlock, r.Encoding.CompactBytesPerBlock, r.Encoding.FloorBytesPerBlock)
	if !r.Synthetic {
		fmt.Fprintf(tw, "steady (lane 0)\t%d events in %.2f s: %.0f frames/s, %.0f images/s\n", r.Steady.Events, r.Steady.Seconds, r.Steady.FramesPerSec, r.Steady.ImagesPerSec)
		fmt.Fprintf(tw, "event → replica\tp50 %.3f ms, p99 %.3f ms, max %.3f ms (%d samples)\n", r.Visible.P50Ms, r.Visible.P99Ms, r.Visible.MaxMs, r.Visible.Samples)
		fmt.Fprintf(tw, "delta apply\tp50 %.1f µs, p99 %.1f µs, max %.1f µs (%d deltas, %.1f images each; consumer decode + install into the replica)\n",
			r.Apply.P50Us, r.Apply.P99Us, r.Apply.MaxUs, r.Apply.Frames, r.Apply.ImagesPerFrame)
	}
	fmt.Fprintf(tw, "machine\t%s\n", r.Machine)
	return tw.Flush()
}

// applyTimes collects the consumer's per-delta apply times once on.
type applyTimes struct {
	mu     sync.Mutex
	on     bool
	took   []time.Duration
	images int
}

// observe is the consumer's ObserveDelta.
func (a *applyTimes) observe(_, images int, took time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.on {
		a.took = append(a.took, took)
		a.images += images
	}
}

func (a *applyTimes) start() {
	a.mu.Lock()
	a.on = true
	a.mu.Unlock()
}

func (a *applyTimes) frames() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.took)
}
