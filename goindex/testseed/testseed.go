package testseed

import (
	"os"
	"strconv"
	"testing"
)

// Env is the environment variable that overrides every seed For returns.
const Env = "GOINDEX_SEED"

// For returns the seed of a randomized test: GOINDEX_SEED when it is set
// (decimal, or hexadecimal with 0x), else def. A value that does not parse
// fails the test; when the test fails, For logs the seed it returned.
func For(t testing.TB, def uint64) uint64 {
	t.Helper()
	seed := def
	if s := os.Getenv(Env); s != "" {
		v, err := strconv.ParseUint(s, 0, 64)
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
