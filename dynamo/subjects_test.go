package dynamo

import (
	"fmt"
	"strings"
	"testing"
)

func TestSubjects_Names(t *testing.T) {
	cases := []struct{ name, got, want string }{
		{"EventSubject", EventSubject("dynamo", "backend"), "namespace.dynamo.component.backend.kv-events"},
		{"EventSubject escapes", EventSubject("team.a", "vllm worker"), "namespace.team%2Ea.component.vllm%20worker.kv-events"},
		{"LegacyEventSubject", LegacyEventSubject("dynamo", "backend"), "namespace.dynamo.component.backend.kv_events"},
		{"LegacyStreamName", LegacyStreamName("dynamo", "backend"), "namespace-dynamo-component-backend-kv-events"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
}

func TestEscapeSubjectSegment_Examples(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", ""},
		{"Az09_-", "Az09_-"},
		{"a.b", "a%2Eb"},
		{"50%", "50%25"},
		{"*>", "%2A%3E"},
		{"é", "%C3%A9"},
		{"\x00\xff", "%00%FF"},
	}
	for _, c := range cases {
		if got := EscapeSubjectSegment(c.in); got != c.want {
			t.Errorf("EscapeSubjectSegment(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// escapeReference is the obvious per-byte encoder.
func escapeReference(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func TestEscapeSubjectSegment_MatchesReference(t *testing.T) {
	rng := testRand(t, 3)
	for range 2000 {
		raw := make([]byte, rng.IntN(12))
		for i := range raw {
			raw[i] = byte(rng.IntN(256))
		}
		if got, want := EscapeSubjectSegment(string(raw)), escapeReference(string(raw)); got != want {
			t.Fatalf("EscapeSubjectSegment(%q) = %q, want %q", raw, got, want)
		}
	}
}
