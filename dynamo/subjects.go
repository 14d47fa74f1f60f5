package dynamo

import "strings"

// Dynamo's event-plane topics (dynamo-current §1.6).
const (
	// EventTopic is the topic of KV events on the current event plane,
	// carried in every EventEnvelope and ending every event-plane subject.
	EventTopic = "kv-events"
	// MetricsTopic is the topic of worker load (ActiveLoad) samples; note
	// the underscore.
	MetricsTopic = "kv_metrics"
	// legacyTopic ends the G2025 NATS core subject (note the underscore).
	legacyTopic = "kv_events"
)

// DefaultEndpoint is the endpoint a Dynamo worker serves, whose id scopes
// its KV events and load samples from v1.4 on ("<ns>.<comp>.generate").
const DefaultEndpoint = "generate"

// Scope is an EventScope of Dynamo's event plane: a namespace, a component
// of it, or an endpoint of that component (dynamo-current §1.6). The zero
// Component means namespace scope; a Component with a zero Endpoint means
// component scope.
type Scope struct {
	Namespace string
	Component string // optional
	Endpoint  string // optional; needs Component
}

// segments returns the scope's (kind, name) pairs, outermost first.
func (s Scope) segments() [][2]string {
	out := [][2]string{{"namespace", s.Namespace}}
	if s.Component != "" {
		out = append(out, [2]string{"component", s.Component})
		if s.Endpoint != "" {
			out = append(out, [2]string{"endpoint", s.Endpoint})
		}
	}
	return out
}

// Subject returns the scope's NATS subject (and broker-mode ZMQ topic) of
// topic: "namespace.<ns>[.component.<c>[.endpoint.<e>]].<topic>", every
// name percent-encoded by EscapeSubjectSegment.
func (s Scope) Subject(topic string) string {
	var b strings.Builder
	for _, seg := range s.segments() {
		b.WriteString(seg[0])
		b.WriteByte('.')
		b.WriteString(EscapeSubjectSegment(seg[1]))
		b.WriteByte('.')
	}
	b.WriteString(topic)
	return b.String()
}

// ChannelPrefix returns the etcd key prefix under which the scope's event
// channels of topic are registered (KV-store discovery, dynamo-current
// §1.7): "v1/event_channels/namespace/<ns>[/component/<c>[/endpoint/<e>]]
// /topic/<topic>/"; a publisher's key appends its id in lower-case hex.
func (s Scope) ChannelPrefix(topic string) string {
	return s.ChannelScopePrefix() + "topic/" + EscapeSubjectSegment(topic) + "/"
}

// ChannelScopePrefix returns the etcd key prefix of every event channel of
// the scope, whatever its topic (v1/event_channels/ and the scope's path,
// each segment percent-encoded, ending in "/"): what a discovery query of
// the scope lists.
func (s Scope) ChannelScopePrefix() string {
	var b strings.Builder
	b.WriteString("v1/event_channels/")
	for _, seg := range s.segments() {
		b.WriteString(seg[0])
		b.WriteByte('/')
		b.WriteString(EscapeSubjectSegment(seg[1]))
		b.WriteByte('/')
	}
	return b.String()
}

// EventSubject returns the component-scoped KV-event subject of a namespace
// and component (v1.3 and older; v1.4 moved KV events to endpoint scope):
// namespace.<ns>.component.<comp>.kv-events, names percent-encoded.
func EventSubject(namespace, component string) string {
	return Scope{Namespace: namespace, Component: component}.Subject(EventTopic)
}

// LegacyEventSubject returns the G2025 NATS core subject that carried one
// JSON RouterEvent per message: namespace.<ns>.component.<comp>.kv_events.
// G2025 did not escape names, so neither does this.
func LegacyEventSubject(namespace, component string) string {
	return "namespace." + namespace + ".component." + component + "." + legacyTopic
}

// LegacyStreamName returns the name of the late-G2025 JetStream stream of
// JSON RouterEvents: namespace-<ns>-component-<comp>-kv-events (unescaped,
// as G2025 built it).
func LegacyStreamName(namespace, component string) string {
	return "namespace-" + namespace + "-component-" + component + "-" + EventTopic
}

// EscapeSubjectSegment percent-encodes one subject segment as Dynamo's event
// plane does: bytes [A-Za-z0-9_-] stay, every other byte (including '.',
// '%' and each byte of a multi-byte UTF-8 rune) becomes %XX, uppercase hex.
func EscapeSubjectSegment(s string) string {
	const hex = "0123456789ABCDEF"
	n := 0
	for i := 0; i < len(s); i++ {
		if !subjectSafe(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	out := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if subjectSafe(c) {
			out = append(out, c)
		} else {
			out = append(out, '%', hex[c>>4], hex[c&0xf])
		}
	}
	return string(out)
}

func subjectSafe(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}
