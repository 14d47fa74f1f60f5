package ingest

import (
	"fmt"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/wire"
)

// Config configures a Consumer.
type Config struct {
	// OrderedHeartbeats says the transport delivers each heartbeat after the
	// deltas it follows (one ordered stream per lane, such as a JetStream
	// subject), so a heartbeat ahead of installed proves a lost delta and
	// faults the lane (rule 14). Elsewhere heartbeats only measure lag;
	// optional; default: false.
	OrderedHeartbeats bool
}

// Consumer is the manifest-driven core of a router-site consumer: one Lane
// per manifest lane over a shared LaneTable, and the routing of messages to
// lanes. A fault on one lane never touches another lane's words, ready bit
// or state.
//
// Handle may run concurrently for messages of different lanes (each lane
// with its own serialized ingestor); Apply decodes with the consumer's own
// Decoder and so must not run concurrently with itself.
type Consumer struct {
	manifest relayproto.Manifest
	cfg      Config
	lanes    []*Lane
	byPool   map[relayproto.PoolID]int
	dec      wire.Decoder
}

// New validates m and builds its lanes over table, which must hold at
// least len(m.Lanes) lanes of m.Format.Buckets words. Lanes start
// UNCLAIMED; their ready bits are cleared.
func New(m relayproto.Manifest, table LaneTable, cfg Config) (*Consumer, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if table.Lanes() < len(m.Lanes) || table.Buckets() != m.Format.Buckets {
		return nil, fmt.Errorf("%w: table has %d lanes of %d buckets, manifest needs %d of %d",
			errBadConfig, table.Lanes(), table.Buckets(), len(m.Lanes), m.Format.Buckets)
	}
	m.Lanes = append([]relayproto.PoolID(nil), m.Lanes...)
	c := &Consumer{manifest: m, cfg: cfg, lanes: make([]*Lane, len(m.Lanes)), byPool: make(map[relayproto.PoolID]int, len(m.Lanes))}
	for i, owner := range m.Lanes {
		table.ClearReady(i)
		c.lanes[i] = &Lane{index: i, instance: m.ConsumerInstance, owner: owner, format: m.Format,
			n: m.Format.Buckets, table: table, orderedHeartbeats: cfg.OrderedHeartbeats}
		c.byPool[owner] = i
	}
	return c, nil
}

// Extend returns a consumer of c's manifest with the pools of added
// appended as new lanes, over table, a new table whose first Lanes() lanes
// hold c's lanes' words as they are now (shm.Writer.ResizeCarrying copies
// them). c's lanes move into it as they are, with their claims, leases,
// installed sequences and ready bits (table's are left alone: the carrier
// copied them): a lane carried this way goes on from its next message
// without a new snapshot. The added lanes start UNCLAIMED with their ready
// bits cleared. No ingestor may run while Extend does, and c must not be
// used after it; on error (a manifest the added pools make invalid, a table
// too small) c is unchanged.
func (c *Consumer) Extend(table LaneTable, added []relayproto.PoolID) (*Consumer, error) {
	m := c.Manifest()
	m.Lanes = append(m.Lanes, added...)
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if table.Lanes() < len(m.Lanes) || table.Buckets() != m.Format.Buckets {
		return nil, fmt.Errorf("%w: table has %d lanes of %d buckets, manifest needs %d of %d",
			errBadConfig, table.Lanes(), table.Buckets(), len(m.Lanes), m.Format.Buckets)
	}
	nc := &Consumer{manifest: m, cfg: c.cfg, lanes: make([]*Lane, len(m.Lanes)), byPool: make(map[relayproto.PoolID]int, len(m.Lanes))}
	for i, owner := range m.Lanes {
		if i < len(c.lanes) {
			nc.lanes[i] = c.lanes[i]
		} else {
			table.ClearReady(i)
			nc.lanes[i] = &Lane{index: i, instance: m.ConsumerInstance, owner: owner, format: m.Format,
				n: m.Format.Buckets, orderedHeartbeats: c.cfg.OrderedHeartbeats}
		}
		nc.lanes[i].table = table
		nc.byPool[owner] = i
	}
	return nc, nil
}

// Manifest returns a copy of the consumer's manifest.
func (c *Consumer) Manifest() relayproto.Manifest {
	m := c.manifest
	m.Lanes = append([]relayproto.PoolID(nil), m.Lanes...)
	return m
}

// Lanes returns the number of lanes.
func (c *Consumer) Lanes() int { return len(c.lanes) }

// Lane returns lane i (0 ≤ i < Lanes()).
func (c *Consumer) Lane(i int) *Lane { return c.lanes[i] }

// LaneOf returns the lane owned by pool p.
func (c *Consumer) LaneOf(p relayproto.PoolID) (int, bool) {
	i, ok := c.byPool[p]
	return i, ok
}

// Route returns the lane message m belongs to: the lane its lease names
// (when the lease names this consumer instance and an existing lane), or for
// a load report the lane its pool owns. ok is false for a message no lane
// of this consumer may see.
func (c *Consumer) Route(m relayproto.Message) (lane int, ok bool) {
	var lease relayproto.Lease
	switch m := m.(type) {
	case *relayproto.Snapshot:
		lease = m.Lease
	case *relayproto.Delta:
		lease = m.Lease
	case *relayproto.DrainMarker:
		lease = m.Lease
	case *relayproto.Heartbeat:
		lease = m.Lease
	case *relayproto.LoadReport:
		return c.LaneOf(m.Identity.Pool)
	default:
		return 0, false
	}
	if lease.IsZero() || lease.ConsumerInstance != c.manifest.ConsumerInstance || int(lease.Lane) >= len(c.lanes) {
		return 0, false
	}
	return int(lease.Lane), true
}

// Handle routes m to its lane and applies it there. A message no lane may
// see is ignored as ForeignLease. The error is a *LaneError exactly when the
// outcome faults the lane.
func (c *Consumer) Handle(m relayproto.Message) (Outcome, error) {
	i, ok := c.Route(m)
	if !ok {
		return ForeignLease, nil
	}
	l := c.lanes[i]
	var o Outcome
	switch m := m.(type) {
	case *relayproto.Snapshot:
		o = l.Snapshot(m)
	case *relayproto.Delta:
		o = l.Delta(m)
	case *relayproto.DrainMarker:
		o = l.DrainMarker(m)
	case *relayproto.Heartbeat:
		o = l.Heartbeat(m)
	case *relayproto.LoadReport:
		o = l.Load(m)
	}
	if o.Faults() {
		d := l.disp
		return o, &LaneError{Lane: i, Outcome: o, Installed: d.Installed, Sequence: d.Sequence}
	}
	return o, nil
}

// Apply decodes the frame at the start of src, handles it, and returns the
// outcome and the rest of src. A frame that does not decode is a
// *wire.FrameError and changes no lane.
func (c *Consumer) Apply(src []byte) (Outcome, []byte, error) {
	m, rest, err := c.dec.Decode(src)
	if err != nil {
		return 0, src, err
	}
	o, err := c.Handle(m)
	return o, rest, err
}
