package sim

import (
	"math"
	"testing"
)

// TestWorker_HandComputedTimelines runs three requests through one worker
// (RTT 0, 10 tokens/ms prefill, 5 ms per decoded token, two clients) and
// checks every TTFT and end-to-end latency against timelines worked out by
// hand (times from the first send).
//
//	r0: 1000 tokens, ids [1 2], 3 output tokens
//	r1:  500 tokens, ids [3],   1 output token
//	r2: 1400 tokens, ids [1 2 4], 2 output tokens (sent when r0 completes)
func TestWorker_HandComputedTimelines(t *testing.T) {
	w := handTrace(t, "1000 3 1,2", "500 1 3", "1400 2 1,2,4")
	cases := []struct {
		name      string
		batch, kv int
		ttft, e2e [3]float64
		hit2      int
		busyMs    float64
	}{
		{
			// r0 prefills 0→100 and decodes 2 tokens to 110; r1 queues FIFO
			// behind it (100→150); r2 is sent at 110 and finds r0's two
			// blocks cached: 1400 − 1024 = 376 tokens, 150→187.6, +5 ms.
			name: "fifo", batch: 64, kv: 1024,
			ttft: [3]float64{100, 150, 77.6}, e2e: [3]float64{110, 150, 82.6}, hit2: 1024, busyMs: 192.6,
		},
		{
			// One sequence at a time: r1 is admitted when r0's decode ends
			// at 110 (→160), r2 when r1 ends at 160: 160 + 37.6 = 197.6.
			name: "batch limit 1", batch: 1, kv: 1024,
			ttft: [3]float64{100, 160, 87.6}, e2e: [3]float64{110, 160, 92.6}, hit2: 1024, busyMs: 202.6,
		},
		{
			// Two KV blocks: r1 (one block) does not fit beside r0 (two)
			// until r0 ends, as with batch limit 1; and storing r1 evicts
			// r0's leaf block 2, so r2 hits only block 1: 888 tokens,
			// 160→248.8.
			name: "kv capacity 2", batch: 64, kv: 2,
			ttft: [3]float64{100, 160, 138.8}, e2e: [3]float64{110, 160, 143.8}, hit2: 512, busyMs: 253.8,
		},
	}
	for _, c := range cases {
		cfg := quiet(lineGrid(0))
		cfg.WorkersPerDC, cfg.BatchLimit, cfg.KVBlocksPerWorker = 1, c.batch, c.kv
		cfg.PrefillTokensPerMs, cfg.DecodeMsPerToken, cfg.Concurrency = 10, 5, 2
		s := simulate(t, cfg, w, SingleDC, nil)
		for i := range 3 {
			st := &s.reqs[i]
			if got := st.ttftMs(); math.Abs(got-c.ttft[i]) > 1e-9 {
				t.Errorf("%s: r%d TTFT = %v ms, want %v", c.name, i, got, c.ttft[i])
			}
			if got := st.doneMs - st.sentMs; math.Abs(got-c.e2e[i]) > 1e-9 {
				t.Errorf("%s: r%d e2e = %v ms, want %v", c.name, i, got, c.e2e[i])
			}
		}
		if got := s.reqs[2].hitTokens; got != c.hit2 {
			t.Errorf("%s: r2 hit = %d tokens, want %d", c.name, got, c.hit2)
		}
		res := s.result(0)
		if busy := res.PerDC[0].BusyS * 1000; math.Abs(busy-c.busyMs) > 1e-6 {
			t.Errorf("%s: busy = %v ms, want %v", c.name, busy, c.busyMs)
		}
		if want := float64(c.hit2) / 2900; math.Abs(res.HitRate-want) > 1e-12 {
			t.Errorf("%s: hit rate = %v, want %v", c.name, res.HitRate, want)
		}
	}
}

// TestWorker_FullyCachedPromptStillComputesOneToken checks the hit cap: a
// prompt whose every block is cached still prefills its last token.
func TestWorker_FullyCachedPromptStillComputesOneToken(t *testing.T) {
	w := handTrace(t, "1024 1 7,8", "1024 1 7,8")
	cfg := quiet(lineGrid(0))
	cfg.WorkersPerDC, cfg.Concurrency, cfg.PrefillTokensPerMs = 1, 1, 8
	s := simulate(t, cfg, w, SingleDC, nil)
	st := &s.reqs[1]
	if st.hitBlocks != 2 || st.hitTokens != 1023 || st.uncached != 1 {
		t.Errorf("second request: hit %d blocks = %d tokens, %d uncached; want 2 = 1023, 1", st.hitBlocks, st.hitTokens, st.uncached)
	}
	if got := st.ttftMs(); math.Abs(got-1.0/8) > 1e-9 {
		t.Errorf("second request TTFT = %v ms, want 0.125 (one token at 8 tokens/ms)", got)
	}
}
