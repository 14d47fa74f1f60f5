package parity

import (
	"errors"
	"fmt"
	"io"

	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/goindex/kv"
)

// TraceConfig says how ReplayTrace turns a Mooncake trace into KV events.
type TraceConfig struct {
	// Workers is the number of members (worker i, rank 0) the requests are
	// partitioned over. // optional; default: 16
	Workers int
	// Seed is the partition seed. // optional; default: 42
	Seed uint64
	// BlockSize is the KV block size in tokens (split scheme).
	// // optional; default: trace.DefaultBlockSize
	BlockSize int
	// CapacityBlocks is each worker's LRU cache. // optional; default: trace.DefaultCapacityBlocks
	CapacityBlocks int
}

// ReplayTrace serves every request on its worker's mock engine
// (bridge/trace) and applies the events the engines emit, in trace order.
// It returns each request's prompt (local hashes), the natural queries.
func (s *Study) ReplayTrace(reqs []trace.Request, cfg TraceConfig) ([][]uint64, error) {
	if cfg.Workers == 0 {
		cfg.Workers = 16
	}
	if cfg.Seed == 0 {
		cfg.Seed = 42
	}
	if cfg.Workers > s.cfg.Lanes {
		return nil, fmt.Errorf("%w: %d workers need as many lanes, the study has %d", ErrConfig, cfg.Workers, s.cfg.Lanes)
	}
	mapper, err := trace.NewMapper(trace.MapperConfig{BlockSize: cfg.BlockSize})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	part, err := trace.NewPartition(cfg.Workers, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	engines := make([]*trace.Engine, cfg.Workers)
	for w := range engines {
		if engines[w], err = trace.NewEngine(trace.EngineConfig{Member: kv.Member{Worker: uint64(w)}, CapacityBlocks: cfg.CapacityBlocks}); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	prompts := make([][]uint64, len(reqs))
	var events []kv.Event
	for i, r := range reqs {
		prompts[i] = mapper.AppendLocals(nil, r.HashIDs)
		events, _ = engines[part.Worker(uint64(i))].Serve(events[:0], prompts[i])
		for j := range events {
			if err := s.Apply(&events[j]); err != nil {
				return nil, fmt.Errorf("request %d: %w", i, err)
			}
		}
	}
	return prompts, nil
}

// logSampleSeed separates the log's query sample from the filler stream.
const logSampleSeed = 0x5A4D_504C_4553_4545

// ReplayLog applies every event of the log and returns up to samples query
// paths, a uniform sample (seeded by Config.Seed) of the stored events:
// each path is the local hashes from the root to the event's last block,
// taken when the event was applied.
func (s *Study) ReplayLog(r *LogReader, samples int) ([][]uint64, error) {
	if samples < 1 {
		return nil, fmt.Errorf("%w: %d query samples", ErrConfig, samples)
	}
	rng := s.cfg.Seed ^ logSampleSeed
	var paths [][]uint64
	stored := 0
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return paths, nil
		}
		if err != nil {
			return nil, err
		}
		if err := s.Apply(&ev); err != nil {
			return nil, fmt.Errorf("event log line %d: %w", r.Line(), err)
		}
		if ev.Kind != kv.Stored || len(ev.Blocks) == 0 {
			continue
		}
		// Reservoir sampling: the k-th stored event replaces a random
		// sample with probability samples/k.
		stored++
		slot := len(paths)
		if stored > samples {
			if slot = int(splitmix(&rng) % uint64(stored)); slot >= samples {
				continue
			}
		}
		path, ok := s.holding(ev.Member).appendPath(nil, ev.Blocks[len(ev.Blocks)-1].External)
		switch {
		case !ok:
		case slot == len(paths):
			paths = append(paths, path)
		default:
			paths[slot] = path
		}
	}
}

// splitmix advances a splitmix64 state and returns its output.
func splitmix(state *uint64) uint64 {
	*state += 0x9E3779B97F4A7C15
	z := *state
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}
