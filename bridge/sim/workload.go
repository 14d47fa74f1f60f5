package sim

import (
	"fmt"
	"slices"

	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/goindex/kv"
)

// Request is one trace request prepared for simulation: its lengths, its
// prompt's Dynamo local block hashes (the engines' and in-DC routers' view)
// and their sequence-hash chain (the canonical hashes the CKF replica is
// probed with).
type Request struct {
	ArrivalMs    float64 // trace timestamp, ms from trace start
	InputTokens  int
	OutputTokens int
	Locals       []uint64
	Seqs         []uint64
}

// Workload is a trace ready to replay: every request hashed once through
// the real hashing path, shared read-only by every policy's run.
type Workload struct {
	BlockSize int
	Requests  []Request
}

// NewWorkload hashes reqs (trace order kept) for KV blocks of blockSize
// tokens with the trace package's split mapping (an id's 512 tokens become
// 512/blockSize blocks). Input lengths of 0 count as one token, so every
// request has a first token to compute.
func NewWorkload(reqs []trace.Request, blockSize int) (*Workload, error) {
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%w: no requests", ErrWorkload)
	}
	m, err := trace.NewMapper(trace.MapperConfig{BlockSize: blockSize})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWorkload, err)
	}
	w := &Workload{BlockSize: m.BlockSize(), Requests: make([]Request, len(reqs))}
	for i, r := range reqs {
		if len(r.HashIDs) == 0 {
			return nil, fmt.Errorf("%w: request %d has no hash ids", ErrWorkload, i)
		}
		locals := m.AppendLocals(nil, r.HashIDs)
		w.Requests[i] = Request{
			ArrivalMs:    float64(r.TimestampMs),
			InputTokens:  max(r.InputLength, 1),
			OutputTokens: r.OutputLength,
			Locals:       locals,
			Seqs:         kv.AppendChain(make([]uint64, 0, len(locals)), false, 0, locals),
		}
	}
	return w, nil
}

// totalBlocks is the KV blocks a request holds when its decode ends: its
// prompt blocks plus the blocks of its generated tokens.
func (r *Request) totalBlocks(blockSize int) int {
	return max(len(r.Locals), (r.InputTokens+r.OutputTokens+blockSize-1)/blockSize)
}

// Ideal is a reference point for a workload's TTFT: every prompt hits the
// longest prefix any earlier request of the trace had (an infinite cache
// shared by every DC), nothing queues and the RTT is 0, so a request's TTFT
// is only the prefill of what no earlier request computed (at least one
// token) at the configured rate. No policy of the model gets close to it:
// real caches are finite and split across DCs, and concurrent requests
// reorder the trace slightly (so it is not a strict bound).
type Ideal struct {
	HitRate   float64 `json:"hit_rate"`
	TTFTp50Ms float64 `json:"ttft_p50_ms"`
	TTFTp95Ms float64 `json:"ttft_p95_ms"`
	TTFTp99Ms float64 `json:"ttft_p99_ms"`
}

// ideal computes w's Ideal at tokensPerMs of prefill over the requests
// after the first warm (which still fill the cache).
func ideal(w *Workload, tokensPerMs float64, warm int) Ideal {
	seen := make(map[uint64]struct{})
	ttft := make([]float64, 0, len(w.Requests))
	var hit, prompt float64
	for i := range w.Requests {
		r := &w.Requests[i]
		k := 0
		for k < len(r.Seqs) {
			if _, ok := seen[r.Seqs[k]]; !ok {
				break
			}
			k++
		}
		for _, h := range r.Seqs[k:] {
			seen[h] = struct{}{}
		}
		if i < warm {
			continue // warms the cache, not counted
		}
		cached := min(k*w.BlockSize, r.InputTokens-1)
		hit += float64(cached)
		prompt += float64(r.InputTokens)
		ttft = append(ttft, float64(r.InputTokens-cached)/tokensPerMs)
	}
	slices.Sort(ttft)
	return Ideal{HitRate: ratio(hit, prompt), TTFTp50Ms: percentile(ttft, 50), TTFTp95Ms: percentile(ttft, 95), TTFTp99Ms: percentile(ttft, 99)}
}
