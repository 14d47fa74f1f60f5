package parity

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/goindex/goindex/bridge/trace"
)

// testSeed is the seed of the randomized tests; GOINDEX_SEED overrides it.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(20250801)
	if v := os.Getenv("GOINDEX_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("GOINDEX_SEED=%q: %v", v, err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (set GOINDEX_SEED to repeat)", seed)
		}
	})
	return seed
}

// loadSlice reads a shipped Mooncake slice.
func loadSlice(t *testing.T, name string) []trace.Request {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "mooncake", name))
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer f.Close()
	reqs, err := trace.ReadAll(f, trace.ReaderConfig{})
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return reqs
}

// newStudy returns a study or fails the test.
func newStudy(t *testing.T, cfg Config) *Study {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return s
}
