package ckfindex

import (
	"math/bits"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/replica"
)

// matchScratch is one goroutine's reusable search state.
type matchScratch struct {
	searcher *replica.Searcher
	chain    []uint64
	depth    []uint32
}

func (x *Index) newScratch() any {
	s, err := replica.NewSearcher(x.table, x.format, replica.SearchConfig{Mode: x.cfg.Search})
	if err != nil {
		// New already built a Searcher with this configuration.
		panic("ckfindex: " + err.Error())
	}
	return &matchScratch{searcher: s}
}

// Match appends the prefix depth of every member with a positive depth for
// the query (local block hashes from the root) to dst. It does not allocate
// once its per-goroutine scratch has grown to the longest query.
func (x *Index) Match(dst []kv.Overlap, locals []uint64) []kv.Overlap {
	if len(locals) == 0 {
		return dst
	}
	lanes := x.lanes.Load()
	s := x.scratch.Get().(*matchScratch)
	s.chain = kv.AppendChain(s.chain[:0], false, 0, locals)
	var searched uint64
	s.depth, searched = s.searcher.Search(s.depth, s.chain, lanes.used)
	for m := searched; m != 0; m &= m - 1 {
		lane := bits.TrailingZeros64(m)
		if d := s.depth[lane]; d > 0 {
			dst = append(dst, kv.Overlap{Member: lanes.member[lane], Blocks: int(d)})
		}
	}
	x.scratch.Put(s)
	return dst
}
