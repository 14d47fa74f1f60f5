package sim

import (
	"fmt"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/ingest"
	"github.com/goindex/goindex/goindex/relayproto/publish"
	"github.com/goindex/goindex/goindex/relayproto/wire"
)

// RelayStats counts what one DC's relay sent the router over the WAN: the
// frames as encoded by relayproto, and their bytes.
type RelayStats struct {
	Snapshots       int   `json:"snapshots"`
	SnapshotBytes   int64 `json:"snapshot_bytes"`
	Deltas          int   `json:"deltas"`
	DeltaBytes      int64 `json:"delta_bytes"`
	Images          int64 `json:"images"`
	LoadReports     int   `json:"load_reports"`
	LoadReportBytes int64 `json:"load_report_bytes"`
	DrainMarkers    int   `json:"drain_markers"`
}

func (r *RelayStats) add(o RelayStats) {
	r.Snapshots += o.Snapshots
	r.SnapshotBytes += o.SnapshotBytes
	r.Deltas += o.Deltas
	r.DeltaBytes += o.DeltaBytes
	r.Images += o.Images
	r.LoadReports += o.LoadReports
	r.LoadReportBytes += o.LoadReportBytes
	r.DrainMarkers += o.DrainMarkers
}

// linkItem is one thing in flight on a DC's WAN link to one router: an
// encoded frame (shared by every router's link, read-only), or (frame nil)
// the events of one publication window for the router's audit index, which
// travel right behind their delta.
type linkItem struct {
	frame  []byte
	events []kv.Event
}

// linkSink is a DC publisher's publish.Sink: it encodes each message
// into a frame and puts it on the DC's link.
type linkSink struct {
	s *simulation
	d *dc
}

func (k linkSink) Send(m relayproto.Message) error { return k.s.sendFrame(k.d, k.s.now, m) }

// sendFrame encodes m and puts the frame on d's link.
func (s *simulation) sendFrame(d *dc, now float64, m relayproto.Message) error {
	frame, err := wire.AppendFrame(nil, m)
	if err != nil {
		return fmt.Errorf("%w: dc %s encode %v: %w", ErrEngine, d.name, m.Type(), err)
	}
	st := &d.stats.relay
	switch m := m.(type) {
	case *relayproto.Snapshot:
		st.Snapshots++
		st.SnapshotBytes += int64(len(frame))
	case *relayproto.Delta:
		st.Deltas++
		st.DeltaBytes += int64(len(frame))
		st.Images += int64(len(m.Images))
	case *relayproto.LoadReport:
		st.LoadReports++
		st.LoadReportBytes += int64(len(frame))
	case *relayproto.DrainMarker:
		st.DrainMarkers++
	}
	s.sendOnLink(d, now, frame, nil)
	return nil
}

// sendOnLink puts an item on d's link to every router; it reaches each one
// way later (half the matrix RTT between the DC's site and the router's;
// the control plane has no jitter, so every link is FIFO).
func (s *simulation) sendOnLink(d *dc, now float64, frame []byte, events []kv.Event) {
	for _, rt := range s.routers {
		d.links[rt.idx] = append(d.links[rt.idx], linkItem{frame: frame, events: events})
		s.q.push(now+s.rtt(rt.site, d)/2, evDeliver, d.idx, rt.idx)
	}
}

// deliver hands the oldest item of d's link to router rt: a frame goes
// through rt's consumer (decode, lane rules, replica writes) and must make
// progress; a window's events go to the lane's audit index.
func (s *simulation) deliver(d *dc, rt *router) error {
	link := d.links[rt.idx]
	it := link[0]
	link[0] = linkItem{}
	d.links[rt.idx] = link[1:]
	where := func() string { return fmt.Sprintf("router %s lane %d (%s)", s.cfg.Grid.Sites[rt.site], d.idx, d.name) }
	if it.frame != nil {
		o, rest, err := rt.consumer.Apply(it.frame)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrEngine, where(), err)
		}
		switch {
		case len(rest) != 0:
			return fmt.Errorf("%w: %s: %d bytes after one frame", ErrEngine, where(), len(rest))
		case !progress(o):
			return fmt.Errorf("%w: %s: frame outcome %v", ErrEngine, where(), o)
		}
	}
	for k := range it.events {
		ev := &it.events[k]
		if ev.Kind == kv.Stored {
			rt.inserts[d.idx].Add(s.now, float64(len(ev.Blocks)))
		}
		if rt.refetch != nil {
			rt.observeRefetch(d.idx, ev)
		}
		if err := rt.audit[d.idx].apply(&it.events[k]); err != nil {
			return fmt.Errorf("%w: %s audit index: %w", ErrEngine, where(), err)
		}
	}
	return nil
}

func progress(o ingest.Outcome) bool {
	switch o {
	case ingest.ChunkStored, ingest.Installed, ingest.Applied, ingest.LoadRecorded, ingest.Acknowledged:
		return true
	}
	return false
}

// connect binds DC d's publisher to its lane at every router the way a
// consumer start does: claim the lane, take a lease, assign the producer's
// identity, and have the publisher snapshot after a barrier; the
// snapshot's chunks go out on the links like any frame. Every router's
// consumer is a fresh instance of the same manifest, so each offers the
// same first lease and one stream serves them all (NATS fans it out).
func (s *simulation) connect(d *dc) error {
	var lease relayproto.Lease
	for _, rt := range s.routers {
		lane := rt.consumer.Lane(d.idx)
		if err := lane.Claim(); err != nil {
			return fmt.Errorf("%w: lane %d: %w", ErrEngine, d.idx, err)
		}
		lease = lane.NextLease()
		if err := lane.Assign(d.identity, lease); err != nil {
			return fmt.Errorf("%w: lane %d: %w", ErrEngine, d.idx, err)
		}
	}
	pub, err := publish.New(publish.Config{Identity: d.identity, Sink: linkSink{s: s, d: d}, Source: d.prod})
	if err != nil {
		return fmt.Errorf("%w: dc %s: %w", ErrEngine, d.name, err)
	}
	d.pub = pub
	snap, err := pub.SnapshotAfterBarrier(lease)
	if err != nil {
		return fmt.Errorf("%w: dc %s snapshot: %w", ErrEngine, d.name, err)
	}
	for c := range snap.Chunks(0) {
		if err := s.sendFrame(d, s.now, c); err != nil {
			return err
		}
	}
	return nil
}

// drain ends DC d's stream when the last request has finished: the open
// window is published and a drain marker follows it on the link, which the
// lane must acknowledge when it arrives.
func (s *simulation) drain(d *dc) error {
	if d.prod.PendingEvents() > 0 {
		if err := s.boundary(d, s.now); err != nil {
			return err
		}
	}
	m, err := d.pub.DrainMarker()
	if err != nil {
		return fmt.Errorf("%w: dc %s: %w", ErrEngine, d.name, err)
	}
	return s.sendFrame(d, s.now, m)
}

// verify checks, once every frame has been delivered, that DC d's lane at
// every router holds exactly its producer's words (the convergence
// guarantee of spec §5.3: after snapshot N and deltas N+1..M, byte for
// byte).
func (s *simulation) verify(d *dc) error {
	want := d.prod.AppendWords(nil)
	for _, rt := range s.routers {
		if n := len(d.links[rt.idx]); n != 0 {
			return fmt.Errorf("%w: lane %d (%s): %d items still on the link to router %d", ErrEngine, d.idx, d.name, n, rt.idx)
		}
		got := rt.table.AppendLane(nil, d.idx)
		if diff := countDiff(got, want); diff != 0 {
			return fmt.Errorf("%w: router %d lane %d (%s) differs from its producer in %d of %d buckets after the drain", ErrEngine, rt.idx, d.idx, d.name, diff, len(want))
		}
	}
	return nil
}

// countDiff counts the positions where a and b, of equal length, differ.
func countDiff(a, b []uint64) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}
