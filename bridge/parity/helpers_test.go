package parity

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/goindex/goindex/bridge/trace"
)

// paritySeed is the randomized tests' default seed (testseed.For).
const paritySeed = 20250801

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
