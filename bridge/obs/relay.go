package obs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/publish"
	"github.com/prometheus/client_golang/prometheus"
)

// statusTimeout bounds a scrape's or readiness check's wait for a relay
// pool's writer goroutine to answer Status.
const statusTimeout = 2 * time.Second

// Value types of the const metrics.
const (
	counter = prometheus.CounterValue
	gauge   = prometheus.GaugeValue
)

// relayCollector reads a relay's pool statuses at scrape time.
type relayCollector struct {
	r *relay.Relay

	ready, running, feedsReady, info                       family
	messages, events, applied, rejected, gaps, untracked   family
	intake                                                 family
	refusals, unknownRemovals, omissions                   family
	loadFactor, tracked, resident, canonicals, members     family
	buckets, memory, pendingEvents                         family
	frames, bytes, sequence, deltas, fenced, snapshots     family
	snapshotBytes, snapshotSequence, logSequence, rebuild  family
	checkpoints, checkpointBytes, restored, restoredBlocks family
}

// NewRelayCollector returns a collector of r's metrics (goindex_relay_*,
// labelled by domain and dc; see the package doc's table). Each scrape
// takes one Status of every pool, from the pools' writer goroutines,
// bounded by 2 s; before the relay is set up it reports only
// goindex_relay_ready 0.
func NewRelayCollector(r *relay.Relay) prometheus.Collector {
	const s = "relay"
	pool := []string{"domain", "dc"}
	with := func(l ...string) []string { return append(slices.Clone(pool), l...) }
	return &relayCollector{r: r,
		ready: newFamily(s, "ready", "1 once every pool is set up (first snapshot stored), none has stopped and every pool's feeds "+
			"work.", gauge),
		feedsReady: newFamily(s, "feeds_ready", "1 while every feed of the pool works: its discovery (etcd, Kubernetes) has "+
			"listed and its latest request, a list or the periodic check, succeeded.", gauge, pool...),
		running: newFamily(s, "pool_running", "1 while the pool's writer loop serves.", gauge, pool...),
		info: newFamily(s, "pool_info", "The pool's producer identity (always 1): incarnation and layout generation.", gauge,
			with("incarnation", "layout_generation")...),
		messages: newFamily(s, "messages_total", "Messages received on the pool's event subjects.", counter, pool...),
		events:   newFamily(s, "events_total", "Primary-index events handed to the producer.", counter, pool...),
		applied:  newFamily(s, "events_applied_total", "Events the producer applied (handed over and not refused).", counter, pool...),
		rejected: newFamily(s, "rejected_total", "Messages or events not applied, by reason: non_primary, unsupported (an event Dynamo's "+
			"residency rules refuse), malformed, too_large, "+
			"wrong_topic, duplicate, untracked_publisher, bad_frames (ZMQ part count or frame header), identity (ZMQ frames, "+
			"envelope and discovered publisher disagree) (intake) and producer (refused by the producer).", counter, with("reason")...),
		intake: newFamily(s, "intake_total", "Intake work by kind: load_samples (ActiveLoad and WorkerLoad taken), engine_batches "+
			"(vLLM/SGLang batches), replayed_batches (of them from a replay socket), resyncs (engine sources cleared after an "+
			"unrecoverable gap), late (envelopes taken below their publisher's highest sequence, each filling one counted gap).", counter, with("kind")...),
		gaps: newFamily(s, "envelope_gaps_total", "Sequences a publisher skipped, counted as a later one arrived; "+
			"intake_total{kind=\"late\"} counts those that came afterwards (gaps − late are missing).", counter, pool...),
		untracked: newFamily(s, "untracked_workers_total", "Load samples and events of new workers not tracked (worker table full).", counter, pool...),
		refusals: newFamily(s, "producer_refusals_total", "Stored events the producer refused, by reason: missing_parent, remap, "+
			"invalid_sequence, ownership_overflow.", counter, with("reason")...),
		unknownRemovals:  newFamily(s, "unknown_removals_total", "Removed blocks the member did not map (ignored).", counter, pool...),
		omissions:        newFamily(s, "capacity_omissions_total", "Blocks tracked but not admitted to the filter (insertion failed).", counter, pool...),
		loadFactor:       newFamily(s, "load_factor", "Filter slot occupancy: resident fingerprints / (4 · buckets).", gauge, pool...),
		tracked:          newFamily(s, "tracked_blocks", "(member, block) mappings of the exact state.", gauge, pool...),
		resident:         newFamily(s, "resident_fingerprints", "Canonical blocks whose fingerprint is in the filter.", gauge, pool...),
		canonicals:       newFamily(s, "canonical_blocks", "Distinct canonical blocks with an owner.", gauge, pool...),
		members:          newFamily(s, "members", "Members (worker, dp rank) that map at least one block.", gauge, pool...),
		buckets:          newFamily(s, "buckets", "Filter buckets.", gauge, pool...),
		memory:           newFamily(s, "producer_memory_bytes", "Estimated producer memory: filter, dirty window, exact state.", gauge, pool...),
		pendingEvents:    newFamily(s, "pending_events", "Events in the open publication window.", gauge, pool...),
		frames:           newFamily(s, "frames_published_total", "Frames put on NATS, by frame type.", counter, with("type")...),
		bytes:            newFamily(s, "published_bytes_total", "Bytes of the frames put on NATS, by frame type.", counter, with("type")...),
		sequence:         newFamily(s, "sequence", "Last sequence the publisher assigned.", gauge, pool...),
		deltas:           newFamily(s, "deltas_total", "Delta frames delivered to the log.", counter, pool...),
		fenced:           newFamily(s, "fenced", "1 while the publisher is fenced (delivery uncertain; a snapshot will recover).", gauge, pool...),
		snapshots:        newFamily(s, "snapshots_total", "Snapshots stored.", counter, pool...),
		snapshotBytes:    newFamily(s, "snapshot_bytes", "Size of the stored snapshot object.", gauge, pool...),
		snapshotSequence: newFamily(s, "snapshot_sequence", "Terminal sequence of the stored snapshot.", gauge, pool...),
		logSequence:      newFamily(s, "log_stream_sequence", "Stream sequence of the last log message written.", gauge, pool...),
		rebuild:          newFamily(s, "rebuilds_total", "New layout generations after a fenced producer.", counter, pool...),
		checkpoints: newFamily(s, "checkpoints_total", "Checkpoints of the exact state (--checkpoint-dir), by result: written, "+
			"failed.", counter, with("result")...),
		checkpointBytes: newFamily(s, "checkpoint_bytes", "Size of the last checkpoint written.", gauge, pool...),
		restored: newFamily(s, "restored_members_total", "Members of the checkpoint restored at start, by outcome: restored, kept "+
			"(their publisher's next envelope proved continuity), cleared (a gap, a restart, another publisher or no proof "+
			"within the grace).", counter, with("outcome")...),
		restoredBlocks: newFamily(s, "restored_blocks_total", "Blocks restored from the checkpoint at start.", counter, pool...),
	}
}

func (c *relayCollector) families() []family {
	return []family{c.ready, c.running, c.feedsReady, c.info, c.messages, c.events, c.applied, c.rejected, c.intake, c.gaps, c.untracked,
		c.refusals, c.unknownRemovals, c.omissions, c.loadFactor, c.tracked, c.resident, c.canonicals, c.members,
		c.buckets, c.memory, c.pendingEvents, c.frames, c.bytes, c.sequence, c.deltas, c.fenced, c.snapshots,
		c.snapshotBytes, c.snapshotSequence, c.logSequence, c.rebuild, c.checkpoints, c.checkpointBytes, c.restored,
		c.restoredBlocks}
}

// Describe implements prometheus.Collector.
func (c *relayCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range c.families() {
		ch <- f.desc
	}
}

// Collect implements prometheus.Collector.
func (c *relayCollector) Collect(ch chan<- prometheus.Metric) {
	pools, err := relayStatus(c.r)
	if err != nil {
		c.ready.emit(ch, 0)
		if !errors.Is(err, ErrNotReady) {
			ch <- prometheus.NewInvalidMetric(c.running.desc, err)
		}
		return
	}
	c.ready.emit(ch, boolValue(poolsRunning(pools) == nil))
	for i := range pools {
		c.collectPool(ch, &pools[i])
	}
}

func (c *relayCollector) collectPool(ch chan<- prometheus.Metric, p *relay.PoolStatus) {
	d, dc := strconv.FormatUint(p.Domain, 10), strconv.FormatUint(p.DC, 10)
	in, prod, pub := &p.Intake, &p.Producer, &p.Publisher
	c.running.emit(ch, boolValue(p.Running), d, dc)
	c.feedsReady.emit(ch, boolValue(p.FeedErr == ""), d, dc)
	c.info.emit(ch, 1, d, dc, strconv.FormatUint(p.Incarnation, 10), strconv.FormatUint(p.LayoutGeneration, 10))
	c.messages.emit(ch, float64(in.Messages), d, dc)
	c.events.emit(ch, float64(in.Events), d, dc)
	c.applied.emit(ch, float64(in.Events-min(in.Events, p.Rejected)), d, dc)
	for _, r := range []struct {
		reason string
		v      uint64
	}{{"non_primary", in.NonPrimary}, {"unsupported", in.Unsupported}, {"malformed", in.Malformed}, {"too_large", in.TooLarge},
		{"wrong_topic", in.WrongTopic}, {"duplicate", in.Duplicates}, {"untracked_publisher", in.Untracked},
		{"bad_frames", in.BadFrames}, {"identity", in.Identity}, {"producer", p.Rejected}} {
		c.rejected.emit(ch, float64(r.v), d, dc, r.reason)
	}
	for _, k := range []struct {
		kind string
		v    uint64
	}{{"load_samples", in.LoadSamples}, {"engine_batches", in.EngineBatches}, {"replayed_batches", in.Replayed}, {"resyncs", in.Resyncs}, {"late", in.Late}} {
		c.intake.emit(ch, float64(k.v), d, dc, k.kind)
	}
	c.gaps.emit(ch, float64(in.Gaps), d, dc)
	c.untracked.emit(ch, float64(p.UntrackedWorkers), d, dc)
	for _, r := range []struct {
		reason string
		v      uint64
	}{{"missing_parent", prod.MissingParents}, {"remap", prod.RemapRejections},
		{"invalid_sequence", prod.InvalidSequences}, {"ownership_overflow", prod.OwnershipOverflows}} {
		c.refusals.emit(ch, float64(r.v), d, dc, r.reason)
	}
	c.unknownRemovals.emit(ch, float64(prod.UnknownRemovals), d, dc)
	c.omissions.emit(ch, float64(prod.CapacityOmissions), d, dc)
	c.loadFactor.emit(ch, prod.LoadFactor, d, dc)
	c.tracked.emit(ch, float64(prod.TrackedBlocks), d, dc)
	c.resident.emit(ch, float64(prod.Resident), d, dc)
	c.canonicals.emit(ch, float64(prod.Canonicals), d, dc)
	c.members.emit(ch, float64(prod.Members), d, dc)
	c.buckets.emit(ch, float64(prod.Buckets), d, dc)
	c.memory.emit(ch, float64(prod.MemoryBytes), d, dc)
	c.pendingEvents.emit(ch, float64(prod.PendingEvents), d, dc)
	for _, t := range frameTypes(p.Wire.Frames) {
		c.frames.emit(ch, float64(p.Wire.Frames[t]), d, dc, t)
		c.bytes.emit(ch, float64(p.Wire.Bytes[t]), d, dc, t)
	}
	c.sequence.emit(ch, float64(pub.LastSequence), d, dc)
	c.deltas.emit(ch, float64(pub.Deltas), d, dc)
	c.fenced.emit(ch, boolValue(pub.Fence != publish.FenceNone), d, dc)
	c.snapshots.emit(ch, float64(p.Snapshots), d, dc)
	c.snapshotBytes.emit(ch, float64(p.SnapshotBytes), d, dc)
	c.snapshotSequence.emit(ch, float64(p.SnapshotSequence), d, dc)
	c.logSequence.emit(ch, float64(p.LogSequence), d, dc)
	c.rebuild.emit(ch, float64(p.Rebuilds), d, dc)
	ck := &p.Checkpoint
	c.checkpoints.emit(ch, float64(ck.Written), d, dc, "written")
	c.checkpoints.emit(ch, float64(ck.Failed), d, dc, "failed")
	c.checkpointBytes.emit(ch, float64(ck.Bytes), d, dc)
	c.restored.emit(ch, float64(ck.RestoredMembers), d, dc, "restored")
	c.restored.emit(ch, float64(ck.Kept), d, dc, "kept")
	c.restored.emit(ch, float64(ck.Cleared), d, dc, "cleared")
	c.restoredBlocks.emit(ch, float64(ck.RestoredBlocks), d, dc)
}

// wireFrameTypes are the frame types a relay or a lane may count; every
// one is reported (0 until seen) so that rates exist from the start.
var wireFrameTypes = []string{relayproto.FrameSnapshot.String(), relayproto.FrameDelta.String(),
	relayproto.FrameDrainMarker.String(), relayproto.FrameHeartbeat.String(), relayproto.FrameLoadReport.String()}

// frameTypes returns wireFrameTypes plus any other key of seen, sorted
// after them.
func frameTypes(seen map[string]uint64) []string {
	out := slices.Clone(wireFrameTypes)
	var extra []string
	for k := range seen {
		if !slices.Contains(out, k) {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	return append(out, extra...)
}

// relayStatus returns every pool's status, or an ErrNotReady error before
// the relay is set up.
func relayStatus(r *relay.Relay) ([]relay.PoolStatus, error) {
	select {
	case <-r.Ready():
	default:
		return nil, fmt.Errorf("relay: %w: pools not set up yet", ErrNotReady)
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	pools, err := r.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("relay: status: %w", err)
	}
	return pools, nil
}

// poolsRunning returns nil when every pool runs and its feeds work, else
// why one does not.
func poolsRunning(pools []relay.PoolStatus) error {
	for _, p := range pools {
		name := relay.PoolLogValue(relayproto.DomainID(p.Domain), relayproto.DCID(p.DC))
		if !p.Running {
			why := "stopped"
			if p.Err != "" {
				why = "stopped: " + p.Err
			}
			return fmt.Errorf("relay: %w: pool %s %s", ErrNotReady, name, why)
		}
		if p.FeedErr != "" {
			return fmt.Errorf("relay: %w: pool %s feeds: %s", ErrNotReady, name, p.FeedErr)
		}
	}
	return nil
}

// RelayReady returns r's readiness check: ready once every pool is set up
// (its first snapshot stored) while none has stopped and every pool's
// feeds work (relay.PoolStatus.FeedErr: a discovery source that has not
// listed, or whose latest list or check failed, makes its relay not
// ready until a list succeeds).
func RelayReady(r *relay.Relay) ReadyFunc {
	return func() error {
		pools, err := relayStatus(r)
		if err != nil {
			return err
		}
		return poolsRunning(pools)
	}
}
