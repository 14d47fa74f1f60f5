package bench

import (
	"math/rand/v2"

	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
)

// walkTakeOneIn: a lane serves each universe request with probability
// 1/walkTakeOneIn.
const walkTakeOneIn = 2

// universe is the trace's requests copied with offset ids; request r of
// copy k is index k·len(reqs) + r. Copies share no block.
type universe struct {
	reqs      []trace.Request
	stride    uint64 // max id + 1
	blockSize int
	// halfDistinct is the distinct blocks of a random half of one copy's
	// requests: what a lane gains per copy it walks.
	halfDistinct int
	// distinct is the distinct blocks of one whole copy.
	distinct int
}

func newUniverse(reqs []trace.Request, blockSize int) *universe {
	u := &universe{reqs: reqs, stride: trace.MaxID(reqs) + 1, blockSize: blockSize}
	half, all := map[uint64]struct{}{}, map[uint64]struct{}{}
	var locals, chain []uint64
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range reqs {
		taken := rng.IntN(walkTakeOneIn) == 0
		locals = u.locals(locals[:0], i)
		chain = kv.AppendChain(chain[:0], false, 0, locals)
		for _, c := range chain {
			all[c] = struct{}{}
			if taken {
				half[c] = struct{}{}
			}
		}
	}
	u.halfDistinct, u.distinct = len(half), len(all)
	return u
}

// locals appends the local hashes of universe request i.
func (u *universe) locals(dst []uint64, i int) []uint64 {
	r := &u.reqs[i%len(u.reqs)]
	off := uint64(i/len(u.reqs)) * u.stride
	start := len(dst)
	dst = append(dst, r.HashIDs...)
	ids := dst[start:]
	for j := range ids {
		ids[j] += off
	}
	return dynamo.AppendMooncakeLocal(dst[:start], ids, u.blockSize)
}
