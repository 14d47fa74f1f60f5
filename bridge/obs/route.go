package obs

import (
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/goindex/goindex/bridge/route"
	"github.com/goindex/goindex/goindex/follow"
	"github.com/goindex/goindex/goindex/score"
	"github.com/prometheus/client_golang/prometheus"
)

// costBucketsMs are the cost-part histogram buckets: 0.25 ms doubling to
// 32.8 s, which spans a same-rack RTT to a long queue or a 100k-token
// prefill.
var costBucketsMs = prometheus.ExponentialBuckets(0.25, 2, 18)

// RouteMetrics are the router's metrics (goindex_route_*; see the package
// doc's table): routing decisions and cost parts recorded by Observe (give
// it to route.Config.Observe), and the router's counters and signals read
// at scrape time once Attach names the router. It is a
// prometheus.Collector; Observe and Collect may run concurrently.
type RouteMetrics struct {
	rt atomic.Pointer[route.Router]

	decisions      *prometheus.CounterVec
	cached, prompt *prometheus.CounterVec
	cost           *prometheus.HistogramVec

	requests, loadOnly, tokenizerErrors, tokenizerSkipped, failures family
	fallbacks, models                                               family
	other, cut, degraded                                            family
	replicaState, badLanes, integrityFailures, replicaFaults        family
	attached, generation, heartbeatAge, eligibleDCs                 family
	lane, laneReady, eligible, rtt, rttAge, loadAge                 family
}

// NewRouteMetrics returns the router's metrics, empty until Observe and
// Attach.
func NewRouteMetrics() *RouteMetrics {
	const s = "route"
	dc := []string{"dc"}
	return &RouteMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: s, Name: "decisions_total",
			Help: "Completion requests a DC answered, by that DC and the policy that chose it (load-only for prompts not hashed)."},
			[]string{"dc", "policy"}),
		cached: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: s, Name: "cached_tokens_total",
			Help: "Prompt tokens the serving DC held cached (probe depth × block size), by DC."}, dc),
		prompt: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: s, Name: "prompt_tokens_total",
			Help: "Prompt tokens of the requests each DC served (0 for prompts not hashed)."}, dc),
		cost: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: s, Name: "cost_part_ms",
			Help:    "The ttft cost terms of the serving DC, in ms, by DC and part (rtt, queue, prefill); ttft decisions only.",
			Buckets: costBucketsMs}, []string{"dc", "part"}),
		requests:        newFamily(s, "requests_total", "Completion requests received.", counter),
		loadOnly:        newFamily(s, "load_only_total", "Completion requests routed without a hashed prompt.", counter),
		tokenizerErrors: newFamily(s, "tokenizer_errors_total", "Tokenizer calls that failed (the request went load-only).", counter),
		tokenizerSkipped: newFamily(s, "tokenizer_skipped_total", "Text requests routed load-only without calling the tokenizer "+
			"(its breaker open after failures in a row).", counter),
		failures: newFamily(s, "failures_total", "Requests the router answered with an error, by reason: rejected (4xx), loop "+
			"(508), unroutable (no eligible DC, 503), upstream (every DC unreachable or a DC failed, 502/504), client_gone "+
			"(the client left before a DC answered, 499).", counter, "reason"),
		fallbacks: newFamily(s, "fallbacks_total", "DCs skipped after a refused connect or a 502/503/529 answer.", counter),
		models:    newFamily(s, "models_requests_total", "/v1/models requests forwarded.", counter),
		other:     newFamily(s, "other_requests_total", "Other /v1/ requests forwarded (embeddings, responses, ...).", counter),
		cut:       newFamily(s, "cut_total", "Answers cut mid-body: the DC's body failed or went silent past the idle timeout.", counter),
		degraded: newFamily(s, "degraded_total", "Decisions made without fresh signals (failing open: on the last known load and RTT, "+
			"or the default DC), by reason: replica-missing, replica-damaged, consumer-stale, signals-stale.", counter, "reason"),
		replicaState: newFamily(s, "replica_state", "1 for the replica's current health (healthy, replica-missing, "+
			"replica-damaged, consumer-stale), 0 for the others.", gauge, "state"),
		badLanes: newFamily(s, "replica_bad_lanes", "Lanes of the attached replica that failed their integrity check "+
			"(left out of routing until their consumer heals them).", gauge),
		integrityFailures: newFamily(s, "replica_integrity_failures_total", "Lanes found failing their integrity check.", counter),
		replicaFaults:     newFamily(s, "replica_faults_total", "Searches of the replica mapping that faulted (the file was truncated).", counter),
		attached:          newFamily(s, "replica_attached", "1 while a replica file is attached.", gauge),
		generation:        newFamily(s, "replica_generation", "Generation of the attached replica file (0: none).", gauge),
		heartbeatAge:      newFamily(s, "replica_age_seconds", "Time since the consumer last touched the attached replica (its writer heartbeat).", gauge),
		eligibleDCs:       newFamily(s, "eligible_dcs", "DCs with every signal the configured policy needs.", gauge),
		lane:              newFamily(s, "dc_lane", "1 when the attached replica has a lane for the DC.", gauge, dc...),
		laneReady:         newFamily(s, "dc_lane_ready", "1 when the DC's lane is ready (its cached blocks count).", gauge, dc...),
		eligible:          newFamily(s, "dc_eligible", "1 when the DC has every signal the configured policy needs.", gauge, dc...),
		rtt:               newFamily(s, "dc_rtt_seconds", "The consumer's last round trip to the DC's relay (absent before the first).", gauge, dc...),
		rttAge:            newFamily(s, "dc_rtt_age_seconds", "Time since that round trip was measured.", gauge, dc...),
		loadAge:           newFamily(s, "dc_load_age_seconds", "Time since the consumer received the DC's last load report.", gauge, dc...),
	}
}

// Observe records one served completion: its decision and the DC choice
// that answered. It is route.Config.Observe's shape.
func (m *RouteMetrics) Observe(d *route.Decision, c *route.Choice) {
	name := c.DC.Name
	m.decisions.WithLabelValues(name, d.Policy.String()).Inc()
	m.cached.WithLabelValues(name).Add(float64(c.CachedTokens))
	m.prompt.WithLabelValues(name).Add(float64(d.PromptTokens))
	if d.Policy == score.TTFT {
		m.cost.WithLabelValues(name, "rtt").Observe(c.Parts.RTTms)
		m.cost.WithLabelValues(name, "queue").Observe(c.Parts.QueueMs)
		m.cost.WithLabelValues(name, "prefill").Observe(c.Parts.PrefillMs)
		if d.FleetUtilization > 0 {
			m.cost.WithLabelValues(name, "others").Observe(c.Parts.OthersMs)
		}
	}
}

// Attach names the router whose counters and signals scrapes read, and
// creates every DC's decision and token series at 0 so that rates exist
// before the first request.
func (m *RouteMetrics) Attach(rt *route.Router) {
	for _, d := range rt.Signals().DCs {
		for _, p := range []score.Policy{rt.Policy(), score.LoadOnly} {
			m.decisions.WithLabelValues(d.DC.Name, p.String())
		}
		m.cached.WithLabelValues(d.DC.Name)
		m.prompt.WithLabelValues(d.DC.Name)
	}
	m.rt.Store(rt)
}

func (m *RouteMetrics) families() []family {
	return []family{m.requests, m.loadOnly, m.tokenizerErrors, m.tokenizerSkipped, m.failures, m.fallbacks, m.models, m.other, m.cut, m.degraded,
		m.replicaState, m.badLanes, m.integrityFailures, m.replicaFaults, m.attached,
		m.generation, m.heartbeatAge, m.eligibleDCs, m.lane, m.laneReady, m.eligible, m.rtt, m.rttAge, m.loadAge}
}

// Describe implements prometheus.Collector.
func (m *RouteMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.decisions.Describe(ch)
	m.cached.Describe(ch)
	m.prompt.Describe(ch)
	m.cost.Describe(ch)
	for _, f := range m.families() {
		ch <- f.desc
	}
}

// Collect implements prometheus.Collector.
func (m *RouteMetrics) Collect(ch chan<- prometheus.Metric) {
	m.decisions.Collect(ch)
	m.cached.Collect(ch)
	m.prompt.Collect(ch)
	m.cost.Collect(ch)
	rt := m.rt.Load()
	if rt == nil {
		return
	}
	st := rt.Stats()
	m.requests.emit(ch, float64(st.Requests))
	m.loadOnly.emit(ch, float64(st.LoadOnly))
	m.tokenizerErrors.emit(ch, float64(st.TokenizerErrors))
	m.tokenizerSkipped.emit(ch, float64(st.TokenizerSkipped))
	m.failures.emit(ch, float64(st.Rejected), "rejected")
	m.failures.emit(ch, float64(st.Loops), "loop")
	m.failures.emit(ch, float64(st.Unroutable), "unroutable")
	m.failures.emit(ch, float64(st.UpstreamErrors), "upstream")
	m.failures.emit(ch, float64(st.ClientGone), "client_gone")
	m.fallbacks.emit(ch, float64(st.Fallbacks))
	m.models.emit(ch, float64(st.Models))
	m.other.emit(ch, float64(st.Other))
	m.cut.emit(ch, float64(st.Cut))
	for _, r := range degradedReasons {
		m.degraded.emit(ch, float64(st.Degraded[r.String()]), r.String())
	}
	sig := rt.Signals()
	for _, s := range replicaStates {
		m.replicaState.emit(ch, boolValue(sig.Replica.State == s), s.String())
	}
	m.badLanes.emit(ch, float64(bits.OnesCount64(sig.Replica.BadLanes)))
	m.integrityFailures.emit(ch, float64(sig.Replica.IntegrityFailures))
	m.replicaFaults.emit(ch, float64(sig.Replica.Faults))
	m.attached.emit(ch, boolValue(sig.Generation != 0))
	m.generation.emit(ch, float64(sig.Generation))
	if sig.HasHeartbeat {
		m.heartbeatAge.emit(ch, sig.HeartbeatAge.Seconds())
	}
	n := 0
	for _, d := range sig.DCs {
		name := d.DC.Name
		if d.Eligible {
			n++
		}
		m.lane.emit(ch, boolValue(d.HasLane), name)
		m.laneReady.emit(ch, boolValue(d.Ready), name)
		m.eligible.emit(ch, boolValue(d.Eligible), name)
		if d.RTT > 0 {
			m.rtt.emit(ch, d.RTT.Seconds(), name)
			m.rttAge.emit(ch, d.RTTAge.Seconds(), name)
		}
		if d.LoadAge > 0 {
			m.loadAge.emit(ch, d.LoadAge.Seconds(), name)
		}
	}
	m.eligibleDCs.emit(ch, float64(n))
}

// degradedReasons and replicaStates are the label values of
// route_degraded_total and route_replica_state.
var (
	degradedReasons = []follow.Reason{follow.ReplicaMissing, follow.ReplicaDamaged, follow.ConsumerStale, follow.SignalsStale}
	replicaStates   = []follow.State{follow.Healthy, follow.Missing, follow.Damaged, follow.Stale}
)

// RouteReady returns rt's readiness check (route.Ready): failing open, ready
// whatever the replica's state; with --on-stale=fail, while the replica is
// attached and at least one DC is eligible under the policy.
func RouteReady(rt *route.Router) ReadyFunc {
	return func() error {
		if rd := rt.Ready(); !rd.Ready {
			return fmt.Errorf("route: %w: %s", ErrNotReady, rd.Reason)
		}
		return nil
	}
}
