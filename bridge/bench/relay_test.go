package bench

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
)

func TestRelay_SmallRunReportsEveryPhase(t *testing.T) {
	cfg := RelayConfig{Lanes: 2, Blocks: 3000, SteadyEvents: 200, Samples: 5, Seed: 1}
	rep, err := Relay(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Relay(%+v): %v", cfg, err)
	}
	if rep.Synthetic || rep.Steady == nil || rep.Visible == nil || rep.Apply == nil {
		t.Fatalf("Relay(%+v) = %+v: want an event-fed run with steady, visible and apply", cfg, rep)
	}
	if rep.Lanes != 2 || rep.Resync.ResidentBlocks != 6000 || rep.Resync.WireBytes == 0 || rep.Steady.Frames == 0 ||
		rep.Visible.Samples != 5 || rep.Visible.P50Ms <= 0 || rep.Encoding.CompactBytesPerBlock >= rep.Encoding.DenseBytesPerBlock {
		t.Errorf("Relay report %+v: want 2 lanes, 6000 resident blocks, wire bytes, steady frames, 5 samples, compact < dense", rep)
	}
	// The consumer-side apply time: one per delta of the steady and visible
	// phases (the benchmark checks the count against the lane's), ordered
	// percentiles, at least one image a delta.
	if a := rep.Apply; a.Frames < int(rep.Steady.Frames) || a.ImagesPerFrame < 1 || a.P50Us <= 0 || a.P50Us > a.P99Us || a.P99Us > a.MaxUs {
		t.Errorf("Relay apply %+v: want at least the %d steady deltas, ≥ 1 image each, 0 < p50 ≤ p99 ≤ max", a, rep.Steady.Frames)
	}
	var out bytes.Buffer
	if err := rep.Print(&out); err != nil || !strings.Contains(out.String(), "steady (lane 0)") || !strings.Contains(out.String(), "machine") {
		t.Errorf("Print = %v:\n%s\nwant the steady and machine lines", err, out.String())
	}
}

// TestRelay_SyntheticRunResyncsTheTablesAndSaysSo runs a synthetic relay
// benchmark: tables filled directly, stored by real relays and resynced by
// a real consumer (the benchmark itself checks every lane byte for byte and
// by probes of sampled hashes). The report must say it is synthetic, carry
// only the phases that ran, and give a synthetic lane the encoding an
// event-fed lane of the same load has.
func TestRelay_SyntheticRunResyncsTheTablesAndSaysSo(t *testing.T) {
	rep, err := Relay(context.Background(), RelayConfig{Synthetic: true, Lanes: 2, Blocks: 3000, Seed: 1})
	if err != nil {
		t.Fatalf("Relay(synthetic): %v", err)
	}
	if !rep.Synthetic || rep.Resync.ResidentBlocks != 6000 || rep.Resync.WireBytes == 0 || rep.Steady != nil || rep.Visible != nil || rep.Apply != nil {
		t.Errorf("Relay(synthetic) = %+v: want synthetic, 6000 resident blocks, wire bytes, no steady/visible/apply", rep)
	}
	if want := 6000.0 / (2 * 1024 * 4); rep.Buckets != 1024 || rep.LoadFactor != want {
		t.Errorf("Relay(synthetic): %d buckets at load %g, want 1024 at %g (3000 blocks a lane)", rep.Buckets, rep.LoadFactor, want)
	}
	if e := rep.Encoding; e.CompactBytesPerBlock < 2 || e.CompactBytesPerBlock >= e.DenseBytesPerBlock ||
		e.FloorBytesPerBlock < 1.9 || e.FloorBytesPerBlock >= e.CompactBytesPerBlock {
		t.Errorf("Relay(synthetic) encoding %+v: want 1.9 ≤ floor < compact < dense, 2 ≤ compact", rep.Encoding)
	}
	if runtime.GOOS == "linux" && rep.Resync.CPUSeconds <= 0 {
		t.Errorf("Relay(synthetic) resync: %v s of CPU, want the process's CPU time over the resync", rep.Resync.CPUSeconds)
	}
	var out bytes.Buffer
	if err := rep.Print(&out); err != nil {
		t.Fatalf("Print: %v", err)
	}
	if text := out.String(); !strings.Contains(text, "SYNTHETIC") || strings.Contains(text, "steady") || strings.Contains(text, "apply") {
		t.Errorf("synthetic report %q: want it marked SYNTHETIC, without steady or apply lines", text)
	}
}

func TestRelay_RefusesBadConfigs(t *testing.T) {
	for _, cfg := range []RelayConfig{
		{Lanes: 0, Blocks: 10},
		{Lanes: MaxRelayLanes + 1, Blocks: 10},
		{Lanes: 1, Blocks: 0},
		{Lanes: 1, Blocks: MaxRelayBlocks + 1},
		{Lanes: 1, Blocks: 10, RunBlocks: -1},
		{Lanes: 1, Blocks: 10, Samples: -1},
	} {
		if _, err := Relay(context.Background(), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("Relay(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
}
