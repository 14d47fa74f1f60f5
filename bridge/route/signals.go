package route

import (
	"time"

	"github.com/goindex/goindex/goindex/follow"
	"github.com/goindex/goindex/goindex/score"
)

// DCSignals is what the router sees of one DC right now, as a completion
// decided at this moment would see it.
type DCSignals struct {
	DC      DC
	HasLane bool // the attached replica has a lane for the DC
	Ready   bool // that lane is ready (its cached blocks count)
	// Eligible: the DC has every signal the configured policy needs.
	Eligible bool
	// RTT is the consumer's last round trip to the DC's relay and RTTAge
	// how long ago it was measured; both zero without a sample. HasRTT
	// says whether it is fresh (within MaxStaleness).
	RTT    time.Duration
	RTTAge time.Duration
	HasRTT bool
	// LoadAge is how long ago the consumer received the DC's last load
	// report (0 without one); HasLoad says whether it is fresh.
	LoadAge time.Duration
	HasLoad bool
}

// Signals is the router's view of the replica and of every DC.
type Signals struct {
	Generation uint64 // attached replica generation; 0: none
	// HeartbeatAge is how long ago the consumer last touched the attached
	// replica (its writer heartbeat); HasHeartbeat is false when no
	// replica is attached or it was never touched.
	HeartbeatAge time.Duration
	HasHeartbeat bool
	DCs          []DCSignals // in configuration order
	// Replica is the replica's health (goindex/follow): its state, the
	// lanes that failed their integrity check, integrity failures and
	// faulted searches so far.
	Replica follow.Health
}

// Signals returns the router's current view of the replica and the DCs.
// It may run concurrently with requests.
func (rt *Router) Signals() Signals {
	obs := make([]laneObs, len(rt.cfg.DCs))
	gen := rt.replica.observe(obs, nil)
	now := time.Now()
	s := Signals{Generation: gen, DCs: make([]DCSignals, len(obs)), Replica: rt.replica.health()}
	if hb, ok := rt.replica.heartbeat(); ok {
		s.HeartbeatAge, s.HasHeartbeat = max(0, now.Sub(hb)), true
	}
	cands := rt.candidates(obs, now, rt.cfg.MaxStaleness)
	age := func(at time.Time) time.Duration {
		if at.IsZero() {
			return 0
		}
		return max(0, now.Sub(at))
	}
	for i, o := range obs {
		c := &cands[i]
		_, eligible := rt.scorer.Cost(score.Request{}, *c)
		d := DCSignals{DC: rt.cfg.DCs[i], HasLane: o.lane >= 0, Ready: o.ready, Eligible: eligible,
			HasRTT: c.HasRTT, HasLoad: c.HasLoad}
		if o.lane >= 0 {
			d.RTT, d.RTTAge, d.LoadAge = o.info.RTT, age(o.info.RTTAt), age(o.info.Load.ReceivedAt)
		}
		s.DCs[i] = d
	}
	return s
}

// Policy returns the configured routing policy (prompts that cannot be
// hashed are routed load-only instead).
func (rt *Router) Policy() score.Policy { return rt.scorer.Config().Policy }
