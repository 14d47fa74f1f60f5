package sim_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/goindex/goindex/bridge/sim"
	"github.com/goindex/goindex/bridge/trace"
)

// Example replays a tiny trace on two DCs 200 ms apart under two policies:
// the same long prompt, sent twice. The first one is prefilled at home;
// once its blocks are cached there, ttft keeps the second one home too,
// while round-robin sends it across the WAN to a cold DC.
func Example() {
	grid, err := sim.ReadGrid(strings.NewReader("dc,home,far\nhome,0,200\nfar,200,0\n"))
	if err != nil {
		panic(err)
	}
	prompt := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	reqs := []trace.Request{
		{TimestampMs: 0, InputLength: 4096, OutputLength: 10, HashIDs: prompt},
		{TimestampMs: 1, InputLength: 4096, OutputLength: 10, HashIDs: prompt},
	}
	w, err := sim.NewWorkload(reqs, 512)
	if err != nil {
		panic(err)
	}
	rep, err := sim.Run(context.Background(), sim.Config{
		Grid: grid, RouterSite: "home", Concurrency: 1, RTTJitter: -1,
		Warmup:   -1, // count both requests (the default leaves the first out)
		Policies: []sim.Policy{sim.RoundRobin, sim.TTFT},
	}, w)
	if err != nil {
		panic(err)
	}
	for _, r := range rep.Results {
		fmt.Printf("%s: %d WAN hop(s), hit rate %.0f%%, TTFT p99 %.0f ms\n", r.Policy, r.WANHops, 100*r.HitRate, r.TTFTp99Ms)
	}
	// Output:
	// round-robin: 1 WAN hop(s), hit rate 0%, TTFT p99 473 ms
	// ttft: 0 WAN hop(s), hit rate 50%, TTFT p99 273 ms
}
