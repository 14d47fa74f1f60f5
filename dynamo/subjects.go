package dynamo

// Dynamo's KV-event topics (dynamo-compat §2.4, §2.5).
const (
	// EventTopic is the topic of the current event plane, carried in every
	// EventEnvelope and ending every event-plane subject.
	EventTopic = "kv-events"
	// legacyTopic ends the G2025 NATS core subject (note the underscore).
	legacyTopic = "kv_events"
)

// EventSubject returns the current event-plane subject (G26a → CUR) of a
// namespace and component: namespace.<ns>.component.<comp>.kv-events, with
// ns and comp percent-encoded by EscapeSubjectSegment.
func EventSubject(namespace, component string) string {
	return "namespace." + EscapeSubjectSegment(namespace) + ".component." + EscapeSubjectSegment(component) + "." + EventTopic
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
