package testseed

import (
	"testing"

	"github.com/goindex/goindex/internal/doccheck"
)

func TestFor_DefaultUnlessTheEnvironmentSetsOne(t *testing.T) {
	for _, c := range []struct {
		env  string
		want uint64
	}{{"", 7}, {"42", 42}, {"0x2A", 42}, {"0X2a", 42}, {"042", 42}, {"18446744073709551615", 1<<64 - 1}} {
		t.Setenv(Env, c.env)
		if got := For(t, 7); got != c.want {
			t.Errorf("For(def 7) with %s=%q = %d, want %d", Env, c.env, got, c.want)
		}
	}
}

func TestRand_ReplaysTheSeedItWasGiven(t *testing.T) {
	t.Setenv(Env, "")
	a, b := Rand(t, 11), Rand(t, 11)
	for i := range 4 {
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Fatalf("Rand(def 11) draw %d: %d and %d, want equal", i, x, y)
		}
	}
	t.Setenv(Env, "12")
	if x, y := Rand(t, 11).Uint64(), Rand(t, 12).Uint64(); x != y {
		t.Errorf("Rand(def 11) with %s=12 drew %d, Rand(def 12) drew %d; want equal", Env, x, y)
	}
}

// TestDoc_FileMapMatchesDirectory keeps doc.go's file map in step with the
// package's non-test Go files.
func TestDoc_FileMapMatchesDirectory(t *testing.T) { doccheck.FileMap(t, ".") }
