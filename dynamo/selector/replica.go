package selector

import (
	"fmt"
	"slices"
	"time"

	"github.com/goindex/goindex/goindex/follow"
	"github.com/goindex/goindex/goindex/score"
)

// Replica is the Source of a config that names a replica: its DC's
// measured rates from goindex's shared replica, through the engine's one
// replica follower (goindex/follow), which attaches the file (again at
// every check while it is missing, so a replica that appears after Dynamo
// started is picked up), follows its generations and judges it. The
// follower decides what is unusable, as it does for goindex_score and
// goindex route: the replica missing, damaged or its consumer stale
// (Health), the DC without a ready lane, its load report older than
// maxAge (SetSignals). DCRates then fails with ErrReplicaUnusable, follow's
// Reason and the detail. A Replica is safe for concurrent use.
type Replica struct {
	f      *follow.Follower
	dc     uint64
	maxAge time.Duration
	clock  func() time.Time
}

// NewReplica follows the replica file at path for DC dc: a load report
// older than maxAge, or a consumer whose heartbeat is, is stale. clock is
// the time heartbeats and reports are aged by (nil: time.Now). Close
// releases the file.
func NewReplica(path string, dc uint64, maxAge time.Duration, clock func() time.Time) *Replica {
	if clock == nil {
		clock = time.Now
	}
	r := &Replica{dc: dc, maxAge: maxAge, clock: clock}
	r.f = follow.New(path, follow.Config{MaxStaleness: maxAge, Clock: clock})
	return r
}

// Close stops following the file and unmaps it.
func (r *Replica) Close() { r.f.Close() }

// DCRates returns the DC's rates from its lane's load report, or an
// ErrReplicaUnusable error saying why there are none to trust.
func (r *Replica) DCRates() (DCRates, error) {
	if h := r.f.Health(); h.Degraded() {
		return DCRates{}, fmt.Errorf("%w %s: %v: %w", ErrReplicaUnusable, r.f.Path(), follow.ReasonOf(h), h.Err)
	}
	v := r.f.Acquire()
	if v == nil { // closed, or gone since Health
		return DCRates{}, fmt.Errorf("%w %s: %v", ErrReplicaUnusable, r.f.Path(), follow.ReplicaMissing)
	}
	defer v.Release()
	l := slices.Index(v.DCs(), r.dc)
	switch {
	case l < 0:
		return DCRates{}, fmt.Errorf("%w %s: dc %d has no lane (its DCs: %v)", ErrReplicaUnusable, r.f.Path(), r.dc, v.DCs())
	case v.Ready()&(1<<l) == 0:
		return DCRates{}, fmt.Errorf("%w %s: dc %d's lane is not ready", ErrReplicaUnusable, r.f.Path(), r.dc)
	}
	info := v.Lane(l)
	now := r.clock()
	var c score.Candidate
	follow.SetSignals(&c, &info, now, r.maxAge)
	if !c.HasLoad {
		age := "never received"
		if at := info.Load.ReceivedAt; !at.IsZero() {
			age = now.Sub(at).Round(time.Millisecond).String() + " old"
		}
		return DCRates{}, fmt.Errorf("%w %s: %v: dc %d's load report is %s, over max_staleness_ms %v",
			ErrReplicaUnusable, r.f.Path(), follow.SignalsStale, r.dc, age, r.maxAge)
	}
	return DCRates{PrefillTokensPerMs: c.PrefillTokensPerMs, QueueTokensPerMs: c.QueueTokensPerMs,
		DecodeBlocksPerMs: c.DecodeBlocksPerMs, LiveWorkers: info.Load.LiveWorkers}, nil
}
