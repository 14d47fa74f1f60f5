package testseed

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// Env is the environment variable that overrides every seed For returns.
const Env = "GOINDEX_SEED"

// For returns the seed of a randomized test: GOINDEX_SEED when it is set
// (decimal, a leading zero too, or hexadecimal after 0x), else def. A value that does not parse
// fails the test; when the test fails, For logs the seed it returned.
func For(t testing.TB, def uint64) uint64 {
	t.Helper()
	seed := def
	if s := os.Getenv(Env); s != "" {
		v, err := parse(s)
		if err != nil {
			t.Fatalf("%s=%q: %v", Env, s, err)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (set %s=%d to replay)", seed, Env, seed)
		}
	})
	return seed
}

// Rand returns a PCG generator seeded with For(t, def) (the second stream
// word is the seed xor the golden-ratio constant), so a randomized test
// replays from the seed it logs.
func Rand(t testing.TB, def uint64) *rand.Rand {
	t.Helper()
	s := For(t, def)
	return rand.New(rand.NewPCG(s, s^0x9E3779B97F4A7C15))
}

// parse reads a seed as decimal, or as hexadecimal after 0x or 0X; a
// leading zero is decimal (a logged seed pasted back must replay it).
func parse(s string) (uint64, error) {
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		return strconv.ParseUint(s[2:], 16, 64)
	}
	return strconv.ParseUint(s, 10, 64)
}
