package harness_test

import (
	"fmt"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/radix"
	"github.com/goindex/goindex/internal/harness"
)

// Example shows the lower-level pieces: generate a workload, apply it to an
// index and to the reference model, and check each op's queries.
func Example() {
	ops := harness.Generate(7, harness.GenConfig{Steps: 300})
	ix := radix.New(radix.Config{ClearScope: radix.ClearRank})
	model := harness.NewModel(harness.ClearRank)
	var counts harness.Counters
	var violations []harness.Violation
	for i := range ops {
		expect := model.Apply(&ops[i])
		if err := ops[i].Apply(ix); err != nil && expect == harness.MustApply {
			fmt.Println("unexpected error:", err)
		}
		for _, q := range ops[i].Queries {
			violations = harness.Check(ix, model, q, &counts, violations)
		}
	}
	fmt.Println("violations:", len(violations))
	fmt.Println("every check within bounds:", counts.Exact+counts.Holes == counts.MemberChecks)
	// Output:
	// violations: 0
	// every check within bounds: true
}

// ExampleModel replays the first self-check of dynamo-compat §3.6 (hash =
// chain id).
func ExampleModel() {
	m := harness.NewModel(harness.ClearRank)
	w := kv.Member{Worker: 0, Rank: 0}
	run := func(ext ...uint64) []kv.Block {
		var bs []kv.Block
		for _, e := range ext {
			bs = append(bs, kv.Block{External: e, Local: e})
		}
		return bs
	}
	m.Store(w, false, 0, run(1, 2, 3, 4))
	m.Remove(w, []uint64{2})
	fmt.Println(m.Bounds(w, []uint64{1, 2, 3, 4}))
	m.Store(w, true, 1, run(2))
	fmt.Println(m.Bounds(w, []uint64{1, 2, 3, 4}))
	fmt.Println(m.Store(w, true, 4, run(5)), m.Store(w, true, 2, run(3, 4)))
	fmt.Println(m.Bounds(w, []uint64{1, 2, 3, 4, 5}))
	// Output:
	// 1 1
	// 4 2
	// may-reject apply
	// 5 4
}
