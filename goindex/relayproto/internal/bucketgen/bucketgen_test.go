package bucketgen

import (
	"math/rand/v2"
	"testing"

	"github.com/goindex/goindex/internal/doccheck"
)

func TestAtLoad_OccupiesSlotsAtTheLoadWithNonZeroFingerprints(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, load := range []float64{0, 0.5, 1} {
		words := AtLoad(rng, 4096, load)
		occupied := 0
		for _, w := range words {
			for s := range 4 {
				if uint16(w>>(16*s)) != 0 {
					occupied++
				}
			}
		}
		if got := float64(occupied) / (4 * 4096); got < load-0.03 || got > load+0.03 {
			t.Errorf("AtLoad(4096, load %.1f) occupies %.3f of the slots", load, got)
		}
	}
	if w := Word(rng); w == 0 && Word(rng) == 0 && Word(rng) == 0 {
		t.Errorf("Word returned three empty buckets in a row")
	}
}

// TestDoc_FileMapMatchesDirectory keeps doc.go's file map in step with the
// package's non-test Go files.
func TestDoc_FileMapMatchesDirectory(t *testing.T) { doccheck.FileMap(t, ".") }
