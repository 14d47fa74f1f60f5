package parity

// Queries is a deterministic query set over base paths (local hashes from
// the root). Query q < len(Base) is Base[q]. Past them, query q is
// Base[q mod len(Base)] with its blocks from a random cut onward replaced
// by fresh random local hashes: a request that shares a cached prefix and
// then diverges. Every such query brings new absent blocks, so a run can
// probe far more distinct (block, lane) pairs than the trace has, which a
// stable false-positive estimate needs.
type Queries struct {
	Base  [][]uint64
	Count int    // queries; 0 means len(Base)
	Seed  uint64 // drives the cuts and the fresh blocks
}

// All yields every query in order. The yielded slice is reused: copy it to
// keep it.
func (qs Queries) All(yield func([]uint64) bool) {
	n := qs.Count
	if n == 0 {
		n = len(qs.Base)
	}
	if len(qs.Base) == 0 {
		return
	}
	var buf []uint64
	for q := range n {
		b := qs.Base[q%len(qs.Base)]
		if q < len(qs.Base) || len(b) == 0 {
			if !yield(b) {
				return
			}
			continue
		}
		// One splitmix stream per query, so each query depends only on
		// (Seed, q).
		rng := qs.Seed ^ uint64(q)*0xD1B54A32D192ED03
		cut := int(splitmix(&rng) % uint64(len(b)))
		buf = append(buf[:0], b[:cut]...)
		for range len(b) - cut {
			buf = append(buf, splitmix(&rng))
		}
		if !yield(buf) {
			return
		}
	}
}
