package trace_test

import (
	"fmt"
	"strings"

	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/goindex/kv"
)

// Example replays three requests over two workers: read, partition, map ids to local hashes, serve through each worker's engine and
// collect the events an index would apply.
func Example() {
	const jsonl = `{"timestamp": 0, "input_length": 1500, "output_length": 8, "hash_ids": [0, 1, 2]}
{"timestamp": 0, "input_length": 1100, "output_length": 4, "hash_ids": [0, 1, 3]}
{"timestamp": 9, "input_length": 1400, "output_length": 2, "hash_ids": [0, 1, 2]}
`
	reqs, err := trace.ReadAll(strings.NewReader(jsonl), trace.ReaderConfig{})
	if err != nil {
		panic(err)
	}
	// trace.Stretch and trace.Duplicate would scale reqs up here.
	part, _ := trace.NewPartition(2, 42)
	mapper, _ := trace.NewMapper(trace.MapperConfig{BlockSize: 256}) // 2 blocks per id
	engines := make([]*trace.Engine, part.Workers())
	for w := range engines {
		engines[w], _ = trace.NewEngine(trace.EngineConfig{Member: kv.Member{Worker: uint64(w)}, CapacityBlocks: 8})
	}
	var events []kv.Event
	for i, r := range reqs {
		w := part.Worker(uint64(i))
		locals := mapper.AppendLocals(nil, r.HashIDs)
		var res trace.Result
		events, res = engines[w].Serve(events, locals)
		fmt.Printf("request %d → worker %d: %d blocks, %d cached, %d stored\n", i, w, res.PromptBlocks, res.CachedBlocks, res.StoredBlocks)
	}
	for _, ev := range events {
		fmt.Printf("%v %v: %d blocks, parent %v\n", ev.Member, ev.Kind, len(ev.Blocks), ev.HasParent)
	}
	// Output:
	// request 0 → worker 1: 6 blocks, 0 cached, 6 stored
	// request 1 → worker 0: 6 blocks, 0 cached, 6 stored
	// request 2 → worker 0: 6 blocks, 4 cached, 2 stored
	// 1/0 stored: 6 blocks, parent false
	// 0/0 stored: 6 blocks, parent false
	// 0/0 stored: 2 blocks, parent true
}
