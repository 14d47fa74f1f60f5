package ingest

import (
	"slices"
	"sync/atomic"

	"github.com/goindex/goindex/goindex/relayproto"
)

// LaneTable is the consumer-side storage the lanes write: a transposed table
// of n words per lane with a ready mask. *replica.Table implements it. Each
// method touches one lane only, and every word is written with one atomic
// 64-bit store, so queries may read concurrently (spec §5.4). A lane is
// written by its own ingestor only; different lanes may be written
// concurrently.
type LaneTable interface {
	// Lanes returns the number of lanes the table holds.
	Lanes() int
	// Buckets returns n, the words per lane.
	Buckets() uint64
	// StoreWords stores words[i] into bucket offset+i of lane
	// (offset+len(words) ≤ n).
	StoreWords(lane int, offset uint64, words []uint64)
	// Apply stores each image's word into its bucket of lane, in order. The
	// lane has already checked every index; an error (nothing stored) is
	// an ingestion failure that faults the lane.
	Apply(lane int, images []relayproto.Image) error
	// SetReady sets lane's ready bit with release semantics, after its words.
	SetReady(lane int)
	// ClearReady clears lane's ready bit.
	ClearReady(lane int)
}

// State is a lane's protocol state (spec §5.3).
type State uint8

// Lane states.
const (
	// StateUnclaimed: no ingestor holds the lane.
	StateUnclaimed State = iota
	// StateIdle: claimed, no lease.
	StateIdle
	// StateAwaiting: a lease is assigned, no snapshot installed yet.
	StateAwaiting
	// StateReady: a snapshot is installed and the ready bit is set.
	StateReady
	// StateFaulted: the lease is assigned but deactivated, not ready; only
	// Assign (a higher epoch), Retire or Release leave it.
	StateFaulted
)

var stateNames = [...]string{"UNCLAIMED", "IDLE", "AWAITING_SNAPSHOT", "READY", "FAULTED"}

// String returns the spec's name of s.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "STATE(?)"
}

// Outcome is what one message did to a lane: it was ignored, it progressed
// the lane, it asked for a snapshot retry, or it faulted the lane. The rule
// numbers are spec §5.3's.
type Outcome uint8

// Outcomes.
const (
	// ForeignLease (rule 1, ignored): the lane is IDLE, FAULTED or unclaimed,
	// or the message's lease is not the lane's current lease.
	ForeignLease Outcome = iota + 1
	// StaleOrDuplicate (rules 3 and 8, ignored): a snapshot N ≤ installed on
	// a READY lane, or a delta with sequence ≤ installed; also an older load
	// report.
	StaleOrDuplicate
	// AwaitingSnapshot (rule 7, ignored): a delta before the snapshot.
	AwaitingSnapshot
	// HeartbeatSeen (rule 14, ignored): a heartbeat that shows no loss.
	HeartbeatSeen
	// ForeignIdentity (ignored): a load report from another producer
	// identity than the lane's assignment; [EXT] also a snapshot, delta,
	// heartbeat or drain marker from another pool (misrouted or forged: it
	// cannot be the lane's producer) or from a superseded identity of the
	// lane's pool (an older incarnation, or an older layout generation of
	// the same incarnation: a replaced relay whose late frames must not
	// fault the lane that serves its successor).
	ForeignIdentity
	// RetrySnapshot (rule 4 while AWAITING): a chunk of the wrong size, or
	// out of order; the lane stays AWAITING and the same lease may retry.
	RetrySnapshot
	// ChunkStored (rule 6, progress): a snapshot chunk was stored; more are
	// needed before the lane is complete.
	ChunkStored
	// Installed (rule 6, progress): the snapshot is complete; READY.
	Installed
	// Applied (rule 12, progress): the delta's images were stored.
	Applied
	// Acknowledged (rule 13, progress): the drain marker matches.
	Acknowledged
	// LoadRecorded (progress): the load report was kept.
	LoadRecorded
	// WrongIdentity (rule 2, fault): a message of the lane's pool from a
	// newer or otherwise different producer identity (a restart, a rebuild,
	// a format change): the lane must re-snapshot.
	WrongIdentity
	// InvalidSnapshot (rule 4 while READY, fault): a snapshot chunk of the
	// wrong size on a live lane.
	InvalidSnapshot
	// SnapshotWhileReady (rule 5, fault): a forward snapshot on a live lease.
	SnapshotWhileReady
	// BaseSequenceMismatch (rule 9, fault): a gap; nothing is buffered.
	BaseSequenceMismatch
	// NonContiguous (rule 10, fault): sequence ≠ base + 1.
	NonContiguous
	// EmptyDelta (rule 11, fault): a delta without images.
	EmptyDelta
	// InvalidIndex (rule 11, fault): an image bucket ≥ n.
	InvalidIndex
	// DuplicateIndex (rule 11, fault): two images of one bucket.
	DuplicateIndex
	// TerminalSequenceMismatch (rule 13, fault): a drain marker that does
	// not match the installed sequence, or arrives before READY.
	TerminalSequenceMismatch
	// DeltaLost (rule 14, fault): an ordered heartbeat ahead of installed.
	DeltaLost
	// IngestFailure (fault): the table refused a validated delta (an
	// ingestion failure mid-apply); Disposition.Detail has its error.
	IngestFailure

	outcomeCount
)

var outcomeNames = [...]string{
	ForeignLease: "ForeignLease", StaleOrDuplicate: "StaleOrDuplicate", AwaitingSnapshot: "AwaitingSnapshot",
	HeartbeatSeen: "HeartbeatSeen", ForeignIdentity: "ForeignIdentity", RetrySnapshot: "RetrySnapshot",
	ChunkStored: "ChunkStored", Installed: "Installed", Applied: "Applied", Acknowledged: "Acknowledged",
	LoadRecorded: "LoadRecorded", WrongIdentity: "WrongIdentity", InvalidSnapshot: "InvalidSnapshot",
	SnapshotWhileReady: "SnapshotWhileReady", BaseSequenceMismatch: "BaseSequenceMismatch",
	NonContiguous: "NonContiguous", EmptyDelta: "EmptyDelta", InvalidIndex: "InvalidIndex",
	DuplicateIndex: "DuplicateIndex", TerminalSequenceMismatch: "TerminalSequenceMismatch",
	DeltaLost: "DeltaLost", IngestFailure: "IngestFailure",
}

// String returns the spec's name of o.
func (o Outcome) String() string {
	if o > 0 && o < outcomeCount {
		return outcomeNames[o]
	}
	return "Outcome(?)"
}

// Faults reports whether o moves the lane to FAULTED.
func (o Outcome) Faults() bool { return o >= WrongIdentity && o < outcomeCount }

// Ignored reports whether o left the lane exactly as it was.
func (o Outcome) Ignored() bool { return o >= ForeignLease && o <= ForeignIdentity }

// Disposition records why a lane last entered FAULTED.
type Disposition struct {
	Outcome   Outcome
	Lease     relayproto.Lease
	Identity  relayproto.ProducerIdentity
	Installed uint64 // installed sequence at the fault
	Sequence  uint64 // the message's sequence
	Detail    string // the table's error, for IngestFailure
}

// LaneStatus is a snapshot of a lane's protocol state.
type LaneStatus struct {
	Lane        int
	State       State
	Lease       relayproto.Lease
	Identity    relayproto.ProducerIdentity
	LastEpoch   uint64 // highest epoch ever accepted on the lane
	Installed   uint64
	Latest      uint64 // highest sequence the producer is known to have published
	Disposition Disposition
	Counts      [outcomeCount]uint64 // messages per Outcome
}

// Lag returns how many batches the lane is known to be behind its producer.
func (s *LaneStatus) Lag() uint64 {
	if s.Latest > s.Installed {
		return s.Latest - s.Installed
	}
	return 0
}

// assembly tracks the chunks of a snapshot being installed on an AWAITING
// lane: chunks of one sequence arrive in order and contiguous from offset 0.
type assembly struct {
	active bool
	seq    uint64
	next   uint64
}

// Lane is one physical lane of a consumer: the spec §5.3 state machine over
// its words in a LaneTable. It has one serialized ingestor: Claim takes the
// lane, and from then on every other method must be called from that one
// goroutine (or with external serialization). Different lanes are
// independent and may be driven concurrently. Lanes are created by
// New.
type Lane struct {
	index             int
	instance          uint64
	owner             relayproto.PoolID
	format            relayproto.Format
	n                 uint64
	table             LaneTable
	orderedHeartbeats bool

	claimed atomic.Bool

	state     State
	identity  relayproto.ProducerIdentity
	lease     relayproto.Lease
	lastEpoch uint64
	installed uint64
	latest    uint64
	asm       assembly
	disp      Disposition
	counts    [outcomeCount]uint64
	load      relayproto.LoadReport
	hasLoad   bool

	indices []uint32 // scratch for the duplicate-index check
}

// Index returns the lane's physical index.
func (l *Lane) Index() int { return l.index }

// Owner returns the pool that owns the lane in the manifest.
func (l *Lane) Owner() relayproto.PoolID { return l.owner }

// Claim makes the caller the lane's one ingestor (UNCLAIMED → IDLE). It is
// safe to call concurrently; exactly one caller wins and the others get an
// error.
func (l *Lane) Claim() error {
	if !l.claimed.CompareAndSwap(false, true) {
		return errClaimed
	}
	l.state = StateIdle
	return nil
}

// Release drops the ingestor (say, after it crashed mid-apply): it clears the
// ready bit, the assignment and the claim (→ UNCLAIMED). The epoch history
// is kept, so later leases still need higher epochs. Call it from the
// ingestor, or from a supervisor once the ingestor has stopped.
func (l *Lane) Release() {
	if !l.claimed.Load() {
		return
	}
	l.table.ClearReady(l.index)
	l.unassign()
	l.state = StateUnclaimed
	l.claimed.Store(false)
}

// NextLease returns a lease for this lane one epoch above the last accepted:
// what the consumer side issues to a producer (leased transports) or takes
// for a new subscription (fan-out transports).
func (l *Lane) NextLease() relayproto.Lease {
	return relayproto.Lease{ConsumerInstance: l.instance, Lane: uint8(l.index), Epoch: l.lastEpoch + 1}
}

// Assign binds the lane to a producer identity under lease (legal from any
// claimed state). The lease must name this consumer instance and lane, the
// identity's pool must be the lane's owner, its format must equal the
// manifest's, and the epoch must exceed every epoch accepted on this lane.
// On success the ready bit is cleared first, then the assignment stored,
// installed set to 0, and the lane enters AWAITING_SNAPSHOT. On error
// nothing changes.
func (l *Lane) Assign(id relayproto.ProducerIdentity, lease relayproto.Lease) error {
	switch {
	case l.state == StateUnclaimed:
		return errUnclaimed
	case lease.ConsumerInstance != l.instance || int(lease.Lane) != l.index:
		return errForeignLease
	case id.Pool != l.owner:
		return ErrForeignPool
	case id.Format != l.format:
		return ErrWrongFormat
	case lease.Epoch <= l.lastEpoch:
		return ErrStaleEpoch
	}
	l.table.ClearReady(l.index)
	l.identity, l.lease, l.lastEpoch = id, lease, lease.Epoch
	l.installed, l.latest, l.asm, l.hasLoad = 0, 0, assembly{}, false
	l.state = StateAwaiting
	return nil
}

// Retire clears the ready bit and the assignment and enters IDLE.
func (l *Lane) Retire() error {
	if l.state == StateUnclaimed {
		return errUnclaimed
	}
	l.table.ClearReady(l.index)
	l.unassign()
	l.state = StateIdle
	return nil
}

func (l *Lane) unassign() {
	l.identity, l.lease = relayproto.ProducerIdentity{}, relayproto.Lease{}
	l.installed, l.latest, l.asm, l.hasLoad = 0, 0, assembly{}, false
}

// Status returns the lane's state, assignment, sequences, last fault and
// message counts.
func (l *Lane) Status() LaneStatus {
	return LaneStatus{Lane: l.index, State: l.state, Lease: l.lease, Identity: l.identity, LastEpoch: l.lastEpoch,
		Installed: l.installed, Latest: l.latest, Disposition: l.disp, Counts: l.counts}
}

// LastLoad returns the last load report kept for the lane's current
// assignment.
func (l *Lane) LastLoad() (relayproto.LoadReport, bool) { return l.load, l.hasLoad }

func (l *Lane) note(o Outcome) Outcome {
	l.counts[o]++
	return o
}

// fault enters FAULTED: the ready bit is cleared first, then the
// disposition recorded.
func (l *Lane) fault(o Outcome, seq uint64) Outcome {
	l.table.ClearReady(l.index)
	l.state = StateFaulted
	l.asm = assembly{}
	l.disp = Disposition{Outcome: o, Lease: l.lease, Identity: l.identity, Installed: l.installed, Sequence: seq}
	return l.note(o)
}

// superseded reports a message identity (≠ the lane's) that rule 2 must
// not fault on [EXT]: another pool's, or an older incarnation or layout
// generation of the lane's own pool. Relays claim incarnations in
// increasing order, so an older one has been replaced; a newer one is a
// restart and faults, so the lane re-snapshots from its successor.
func (l *Lane) superseded(id relayproto.ProducerIdentity) bool {
	a := &l.identity
	switch {
	case id.Pool != a.Pool:
		return true
	case id.Incarnation != a.Incarnation:
		return id.Incarnation < a.Incarnation
	}
	return id.LayoutGeneration < a.LayoutGeneration
}

// admit is rule 1: only the current lease of an AWAITING or READY lane
// gets through; everything else is foreign and never harms the lane.
func (l *Lane) admit(lease relayproto.Lease) bool {
	return (l.state == StateAwaiting || l.state == StateReady) && lease == l.lease
}

// Snapshot applies one snapshot chunk (rules 1–6).
func (l *Lane) Snapshot(s *relayproto.Snapshot) Outcome {
	if !l.admit(s.Lease) {
		return l.note(ForeignLease)
	}
	if s.Identity != l.identity {
		if l.superseded(s.Identity) {
			return l.note(ForeignIdentity)
		}
		return l.fault(WrongIdentity, s.Sequence)
	}
	if l.state == StateReady && s.Sequence <= l.installed {
		return l.note(StaleOrDuplicate)
	}
	count := uint64(len(s.Words))
	// Rule 4, chunked: the snapshot must have n words in all, and this chunk
	// must be a non-empty part of them.
	shaped := s.Total == l.n && count > 0 && s.Offset < l.n && count <= l.n-s.Offset
	if l.state == StateReady {
		if !shaped {
			return l.fault(InvalidSnapshot, s.Sequence)
		}
		return l.fault(SnapshotWhileReady, s.Sequence)
	}
	continues := s.Offset == 0 || (l.asm.active && l.asm.seq == s.Sequence && l.asm.next == s.Offset)
	if !shaped || !continues {
		l.asm = assembly{}
		return l.note(RetrySnapshot)
	}
	l.table.StoreWords(l.index, s.Offset, s.Words)
	if end := s.Offset + count; end < l.n {
		l.asm = assembly{active: true, seq: s.Sequence, next: end}
		return l.note(ChunkStored)
	}
	l.asm = assembly{}
	l.installed = s.Sequence
	l.state = StateReady
	l.table.SetReady(l.index)
	return l.note(Installed)
}

// Delta applies one delta (rules 1, 2, 7–12). Validation completes before
// any write: a faulting delta stores nothing.
func (l *Lane) Delta(d *relayproto.Delta) Outcome {
	o := l.checkDelta(d, l.installed)
	switch {
	case o == Applied:
		if err := l.table.Apply(l.index, d.Images); err != nil {
			o = l.fault(IngestFailure, d.Sequence)
			l.disp.Detail = err.Error()
			return o
		}
		l.installed = d.Sequence
		return l.note(Applied)
	case o.Faults():
		return l.fault(o, d.Sequence)
	}
	return l.note(o)
}

// checkDelta runs rules 1, 2 and 7–11 for d as if installed were the lane's
// installed sequence, without writing anything, and returns Applied when d
// may be applied.
//
// Rule 10's overflow branch ("base+1 overflows") cannot be reached here:
// passing rule 9 means base = installed, and passing rule 8 means sequence >
// installed, which no u64 is when installed = u64max. A lane at u64max
// therefore ignores every delta by rule 8.
func (l *Lane) checkDelta(d *relayproto.Delta, installed uint64) Outcome {
	switch {
	case !l.admit(d.Lease):
		return ForeignLease
	case d.Identity != l.identity && l.superseded(d.Identity):
		return ForeignIdentity
	case d.Identity != l.identity:
		return WrongIdentity
	case l.state != StateReady:
		return AwaitingSnapshot
	case d.Sequence <= installed:
		return StaleOrDuplicate
	case d.Base != installed:
		return BaseSequenceMismatch
	case d.Sequence != d.Base+1:
		return NonContiguous
	}
	return l.checkImages(d.Images)
}

// checkImages is rule 11: non-empty, every index < n (checked for all images
// first), no duplicate index. Producers send ascending indices, which
// proves uniqueness in the same pass; other orders are sorted in scratch.
func (l *Lane) checkImages(images []relayproto.Image) Outcome {
	if len(images) == 0 {
		return EmptyDelta
	}
	ascending := true
	for i, im := range images {
		if uint64(im.Bucket) >= l.n {
			return InvalidIndex
		}
		if i > 0 && im.Bucket <= images[i-1].Bucket {
			ascending = false
		}
	}
	if ascending {
		return Applied
	}
	idx := l.indices[:0]
	for _, im := range images {
		idx = append(idx, im.Bucket)
	}
	slices.Sort(idx)
	l.indices = idx
	for i := 1; i < len(idx); i++ {
		if idx[i] == idx[i-1] {
			return DuplicateIndex
		}
	}
	return Applied
}

// DrainMarker checks a drain marker (rules 1, 2 [EXT], 13): it acknowledges
// when the lane is READY at exactly the expected sequence and faults in
// every other case.
func (l *Lane) DrainMarker(m *relayproto.DrainMarker) Outcome {
	if !l.admit(m.Lease) {
		return l.note(ForeignLease)
	}
	if m.Identity != l.identity {
		if l.superseded(m.Identity) {
			return l.note(ForeignIdentity)
		}
		return l.fault(WrongIdentity, m.Expected)
	}
	if l.state == StateReady && l.installed == m.Expected {
		return l.note(Acknowledged)
	}
	return l.fault(TerminalSequenceMismatch, m.Expected)
}

// Heartbeat handles a heartbeat (rules 1, 2, 14). It records the producer's
// sequence for lag; on a READY lane whose transport orders heartbeats after
// the deltas they follow, a heartbeat ahead of installed means a delta was
// lost and faults the lane.
func (l *Lane) Heartbeat(h *relayproto.Heartbeat) Outcome {
	if !l.admit(h.Lease) {
		return l.note(ForeignLease)
	}
	if h.Identity != l.identity {
		if l.superseded(h.Identity) {
			return l.note(ForeignIdentity)
		}
		return l.fault(WrongIdentity, h.Sequence)
	}
	if l.state == StateReady && h.Sequence > l.installed && l.orderedHeartbeats {
		return l.fault(DeltaLost, h.Sequence)
	}
	l.latest = max(l.latest, h.Sequence)
	return l.note(HeartbeatSeen)
}

// Load keeps r when it comes from the lane's assigned producer identity
// and supersedes the report already kept (LoadReport.Supersedes). Load
// reports are not leased (they are broadcast) and never fault a lane.
func (l *Lane) Load(r *relayproto.LoadReport) Outcome {
	if l.state == StateUnclaimed || l.state == StateIdle || r.Identity != l.identity {
		return l.note(ForeignIdentity)
	}
	if l.hasLoad && !r.Supersedes(&l.load) {
		return l.note(StaleOrDuplicate)
	}
	l.load, l.hasLoad = *r, true
	l.latest = max(l.latest, r.Sequence)
	return l.note(LoadRecorded)
}
