package obs

import (
	"fmt"
	"strconv"

	"github.com/goindex/goindex/bridge/consume"
	"github.com/goindex/goindex/goindex/relayproto/ingest"
	"github.com/prometheus/client_golang/prometheus"
)

// laneStates are the lane states goindex_consume_lane_state reports, one
// series each (1 for the current state).
var laneStates = []ingest.State{ingest.StateUnclaimed, ingest.StateIdle, ingest.StateAwaiting,
	ingest.StateReady, ingest.StateFaulted}

// consumeCollector reads a consumer's lane statuses at scrape time.
type consumeCollector struct {
	c *consume.Consumer

	lanes, lanesReady, rebuilds, ready, state, epoch, identity family
	installed, latest, lag, pending, drained                   family
	frames, bytes, deltas, snapshots, requests, faults         family
	resyncs, catchUps, integrity, rtt                          family
	loadActive, loadQueued, loadDecode, loadLive, loadCap      family
}

// NewConsumeCollector returns a collector of c's metrics
// (goindex_consume_*, labelled by lane and dc; see the package doc's
// table). Each scrape reads every lane's Status, which never waits on a
// lane's ingestor.
func NewConsumeCollector(c *consume.Consumer) prometheus.Collector {
	const s = "consume"
	lane := []string{"lane", "dc"}
	with := func(l ...string) []string { return append(append([]string(nil), lane...), l...) }
	return &consumeCollector{c: c,
		lanes:      newFamily(s, "lanes", "Lanes of the replica (one per DC).", gauge),
		lanesReady: newFamily(s, "lanes_ready", "Lanes whose snapshot is installed and ready bit set.", gauge),
		rebuilds: newFamily(s, "replica_rebuilds_total", "Times the replica file was found truncated, grown, overwritten, removed "+
			"or replaced and written again as a new generation.", counter),
		ready: newFamily(s, "lane_ready", "1 while the lane is READY (routers read its cached blocks).", gauge, lane...),
		state: newFamily(s, "lane_state", "1 for the lane's current protocol state, 0 for the others (UNCLAIMED, IDLE, "+
			"AWAITING_SNAPSHOT, READY, FAULTED).", gauge, with("state")...),
		epoch: newFamily(s, "lane_lease_epoch", "Epoch of the lane's current lease (a new one every resync).", gauge, lane...),
		identity: newFamily(s, "lane_identity_info", "The relay incarnation the lane's lease is assigned to (always 1; absent "+
			"before the first assignment).", gauge, with("incarnation")...),
		installed: newFamily(s, "lane_installed_sequence", "Last sequence installed (snapshot or delta).", gauge, lane...),
		latest:    newFamily(s, "lane_latest_sequence", "Highest sequence the relay is known to have published.", gauge, lane...),
		lag:       newFamily(s, "lane_sequence_lag", "Latest minus installed sequence.", gauge, lane...),
		pending:   newFamily(s, "lane_pending_messages", "Delta-log messages written beyond the last one the lane applied (0 at the tail).", gauge, lane...),
		drained:   newFamily(s, "lane_drained", "1 when the relay's drain marker was acknowledged at the installed sequence.", gauge, lane...),
		frames:    newFamily(s, "lane_frames_received_total", "Frames received, by frame type (invalid: did not decode).", counter, with("type")...),
		bytes:     newFamily(s, "lane_received_bytes_total", "Bytes of the frames received, by frame type.", counter, with("type")...),
		deltas:    newFamily(s, "lane_deltas_applied_total", "Deltas applied to the lane.", counter, lane...),
		snapshots: newFamily(s, "lane_snapshots_installed_total", "Snapshots installed from the relay's store.", counter, lane...),
		requests:  newFamily(s, "lane_snapshot_requests_total", "Fresh snapshots asked of the relay (deltas gone, store behind).", counter, lane...),
		faults:    newFamily(s, "lane_faults_total", "Messages that faulted the lane, and bad frames.", counter, lane...),
		resyncs:   newFamily(s, "lane_resyncs_total", "Subscriptions that ended (fault, relay or transport down) and were retried.", counter, lane...),
		catchUps: newFamily(s, "lane_catchups_total", "Subscriptions that started behind the log's tail (retained messages "+
			"to replay after the stored snapshot) and reached it.", counter, lane...),
		integrity: newFamily(s, "lane_integrity_failures_total", "Times the lane's words in the replica file failed their "+
			"integrity check (damaged behind the consumer's back) and the lane resynced from a snapshot.", counter, lane...),
		rtt:        newFamily(s, "lane_rtt_seconds", "Last round trip to the DC's relay (absent before the first).", gauge, lane...),
		loadActive: newFamily(s, "lane_load_active_blocks", "Last load report: blocks the DC's relay tracks.", gauge, lane...),
		loadQueued: newFamily(s, "lane_load_queued_prefill_tokens", "Last load report: queued prefill tokens.", gauge, lane...),
		loadDecode: newFamily(s, "lane_load_active_decode_blocks", "Last load report: KV blocks held by running decodes.", gauge, lane...),
		loadLive:   newFamily(s, "lane_load_live_workers", "Last load report: live workers.", gauge, lane...),
		loadCap:    newFamily(s, "lane_load_capacity_blocks", "Last load report: KV capacity in blocks (0: unknown).", gauge, lane...),
	}
}

func (c *consumeCollector) families() []family {
	return []family{c.lanes, c.lanesReady, c.rebuilds, c.ready, c.state, c.epoch, c.identity, c.installed, c.latest, c.lag,
		c.pending, c.drained, c.frames, c.bytes, c.deltas, c.snapshots, c.requests, c.faults, c.resyncs, c.catchUps,
		c.integrity, c.rtt, c.loadActive, c.loadQueued, c.loadDecode, c.loadLive, c.loadCap}
}

// Describe implements prometheus.Collector.
func (c *consumeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range c.families() {
		ch <- f.desc
	}
}

// Collect implements prometheus.Collector.
func (c *consumeCollector) Collect(ch chan<- prometheus.Metric) {
	lanes := c.c.Status()
	ready := 0
	for i := range lanes {
		st := &lanes[i]
		l, dc := strconv.Itoa(st.Lane), strconv.FormatUint(st.DC, 10)
		isReady := st.State == ingest.StateReady.String()
		if isReady {
			ready++
		}
		c.ready.emit(ch, boolValue(isReady), l, dc)
		for _, s := range laneStates {
			c.state.emit(ch, boolValue(st.State == s.String()), l, dc, s.String())
		}
		c.epoch.emit(ch, float64(st.Epoch), l, dc)
		if st.Incarnation != 0 {
			c.identity.emit(ch, 1, l, dc, strconv.FormatUint(st.Incarnation, 10))
		}
		c.installed.emit(ch, float64(st.Installed), l, dc)
		c.latest.emit(ch, float64(st.Latest), l, dc)
		c.lag.emit(ch, float64(st.Lag), l, dc)
		c.pending.emit(ch, float64(st.Pending), l, dc)
		c.drained.emit(ch, boolValue(st.Drained), l, dc)
		for _, t := range frameTypes(st.FramesReceived) {
			c.frames.emit(ch, float64(st.FramesReceived[t]), l, dc, t)
			c.bytes.emit(ch, float64(st.BytesReceived[t]), l, dc, t)
		}
		c.deltas.emit(ch, float64(st.Deltas), l, dc)
		c.snapshots.emit(ch, float64(st.Snapshots), l, dc)
		c.requests.emit(ch, float64(st.Requests), l, dc)
		c.faults.emit(ch, float64(st.Faults), l, dc)
		c.resyncs.emit(ch, float64(st.Resyncs), l, dc)
		c.catchUps.emit(ch, float64(st.CatchUps), l, dc)
		c.integrity.emit(ch, float64(st.IntegrityFailures), l, dc)
		if st.RTT > 0 {
			c.rtt.emit(ch, st.RTT.Seconds(), l, dc)
		}
		if ld := st.Load; ld != nil {
			c.loadActive.emit(ch, float64(ld.ActiveBlocks), l, dc)
			c.loadQueued.emit(ch, float64(ld.QueuedPrefillTokens), l, dc)
			c.loadDecode.emit(ch, float64(ld.ActiveDecodeBlocks), l, dc)
			c.loadLive.emit(ch, float64(ld.LiveWorkers), l, dc)
			c.loadCap.emit(ch, float64(ld.CapacityBlocks), l, dc)
		}
	}
	c.lanes.emit(ch, float64(len(lanes)))
	c.lanesReady.emit(ch, float64(ready))
	c.rebuilds.emit(ch, float64(c.c.Rebuilds()))
}

// Consumer readiness policies of ConsumeReady.
const (
	// ReadyAnyLane: ready while at least one lane is READY (the router can
	// use cache signals of some DC; the others route on load and RTT).
	ReadyAnyLane = "any"
	// ReadyAllLanes: ready only while every configured lane is READY.
	ReadyAllLanes = "all"
)

// ConsumeReady returns c's readiness check under policy (ReadyAnyLane or
// ReadyAllLanes); an unknown policy returns ErrBadConfig.
func ConsumeReady(c *consume.Consumer, policy string) (ReadyFunc, error) {
	if policy != ReadyAnyLane && policy != ReadyAllLanes {
		return nil, fmt.Errorf("%w: readiness %q: want %s or %s", ErrBadConfig, policy, ReadyAnyLane, ReadyAllLanes)
	}
	return func() error {
		lanes := c.Status()
		var notReady []string
		for _, st := range lanes {
			if st.State != ingest.StateReady.String() {
				notReady = append(notReady, fmt.Sprintf("lane %d (dc %d) %s", st.Lane, st.DC, st.State))
			}
		}
		switch {
		case len(notReady) == 0:
			return nil
		case policy == ReadyAnyLane && len(notReady) < len(lanes):
			return nil
		}
		return fmt.Errorf("consume: %w: %d of %d lanes ready (%s needed): %v", ErrNotReady,
			len(lanes)-len(notReady), len(lanes), policy, notReady)
	}, nil
}
