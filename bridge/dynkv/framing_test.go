package dynkv

import (
	"bytes"
	"testing"
)

// filterAll runs src through a fresh filter in chunks of size step.
func filterAll(src []byte, step int) []byte {
	var f arrayFilter
	var out []byte
	for len(src) > 0 {
		n := min(step, len(src))
		out = f.filter(out, src[:n])
		src = src[n:]
	}
	return out
}

func TestArrayFilter_DropsEmptyAndNullArraysWhereCommandsBegin(t *testing.T) {
	ping := respCommand("PING")
	for _, c := range []struct{ name, in, want string }{
		{"empty", "*0\r\n" + ping, ping},
		{"null", "*-1\r\n" + ping, ping},
		{"negative", "*-5\r\n" + ping, ping},
		{"between commands", ping + "*0\r\n*-1\r\n" + ping, ping + ping},
		{"inside a bulk", respCommand("ECHO", "*0\r\n"), respCommand("ECHO", "*0\r\n")},
		{"after an inline command", "PING\r\n*0\r\nPING\r\n", "PING\r\nPING\r\n"},
		{"inline starting like one", "*0x\r\n", "*0x\r\n"},
		{"malformed header", "*x\r\n*0\r\n", "*x\r\n*0\r\n"},
		{"bad bulk header", "*1\r\n#3\r\n*0\r\n", "*1\r\n#3\r\n*0\r\n"},
		{"empty inline line", "\r\n*0\r\n" + ping, "\r\n" + ping},
		{"bare LF", "\n*0\r\n" + ping, "\n" + ping},
	} {
		for _, step := range []int{1, 2, 3, 7, 1 << 20} {
			if got := filterAll([]byte(c.in), step); string(got) != c.want {
				t.Errorf("%s: filter(%q, chunks of %d) = %q, want %q", c.name, c.in, step, got, c.want)
			}
		}
	}
}

// FuzzArrayFilter checks, for any bytes, that the filter never panics,
// only removes (never adds or reorders) bytes, and gives the same output
// however its input is split.
func FuzzArrayFilter(f *testing.F) {
	for _, s := range []string{"*0\r\n*1\r\n$4\r\nPING\r\n", "*-1\r\n", "PING\r\n", "*2\r\n$4\r\nECHO\r\n$4\r\n*0\r\n\r\n",
		"*1\r\n$99999999999999999999\r\n", "*" + string(make([]byte, 40)), "$"} {
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		whole := filterAll(in, len(in)+1)
		if split := filterAll(in, int(step)+1); !bytes.Equal(split, whole) {
			t.Fatalf("filter(%q) in chunks of %d = %q, whole = %q", in, int(step)+1, split, whole)
		}
		i := 0
		for _, b := range whole { // whole is a subsequence of in
			for i < len(in) && in[i] != b {
				i++
			}
			if i == len(in) {
				t.Fatalf("filter(%q) = %q: not a subsequence of its input", in, whole)
			}
			i++
		}
	})
}
