package ckf

import "testing"

func TestLaneRngSeed_MatchesSpecVectors(t *testing.T) {
	seed := laneRngSeed(DefaultSeed, 0)
	if seed != 0xC050D0A84124DB84 {
		t.Fatalf("laneRngSeed(DefaultSeed, 0) = %#x, want 0xC050D0A84124DB84", seed)
	}
	r := splitmix{state: seed}
	for i, want := range []uint64{0x8D0956E040739722, 0x116C72C2242D8178, 0x5ECB896FE0120182} {
		if got := r.next(); got != want {
			t.Errorf("next() #%d after laneRngSeed(DefaultSeed, 0) = %#x, want %#x", i+1, got, want)
		}
	}
}

func TestLaneRngSeed_DependsOnLane(t *testing.T) {
	seen := map[uint64]uint64{}
	for lane := uint64(0); lane < 64; lane++ {
		s := laneRngSeed(DefaultSeed, lane)
		if prev, dup := seen[s]; dup {
			t.Errorf("laneRngSeed(DefaultSeed, %d) = %#x, same as lane %d", lane, s, prev)
		}
		seen[s] = lane
	}
}
