package harness

import (
	"fmt"
	"slices"

	"github.com/goindex/goindex/goindex/kv"
)

// Counters tallies one or more runs. Every member check lands in exactly one
// of Exact, Holes, Overcounts and Undercounts.
type Counters struct {
	Ops     int // operations applied
	Queries int // queries checked against the model
	// MemberChecks counts (query, member) verdicts: every member the model
	// knows, plus every member the model does not know that scored above 0.
	MemberChecks int
	Exact        int // score == held_len (≥ reach_len)
	Holes        int // reach_len ≤ score < held_len: allowed undercount
	Overcounts   int // score > held_len
	// OvercountBlocks sums score − held_len over the overcounts.
	OvercountBlocks int
	Undercounts     int // score < reach_len
	// UndercountBlocks sums reach_len − score over the undercounts.
	UndercountBlocks int
	Rejects          int // backend errors on MayReject operations (allowed)
	ApplyErrors      int // backend errors on MustApply operations
	Malformed        int // malformed Match results
	// DetailChecks counts the detailed matches compared with Match (indexes
	// implementing DetailMatcher); DetailMismatches those that disagreed.
	DetailChecks     int
	DetailMismatches int
	// ConcurrentMatches counts the Match calls made while events were being
	// applied (concurrent readers mode); they are checked only for shape.
	ConcurrentMatches int
	Checkpoints       int // quiescent points at which bounds were checked
}

// Add adds o to c.
func (c *Counters) Add(o Counters) {
	c.Ops += o.Ops
	c.Queries += o.Queries
	c.MemberChecks += o.MemberChecks
	c.Exact += o.Exact
	c.Holes += o.Holes
	c.Overcounts += o.Overcounts
	c.OvercountBlocks += o.OvercountBlocks
	c.Undercounts += o.Undercounts
	c.UndercountBlocks += o.UndercountBlocks
	c.Rejects += o.Rejects
	c.ApplyErrors += o.ApplyErrors
	c.Malformed += o.Malformed
	c.DetailChecks += o.DetailChecks
	c.DetailMismatches += o.DetailMismatches
	c.ConcurrentMatches += o.ConcurrentMatches
	c.Checkpoints += o.Checkpoints
}

// OvercountRate returns Overcounts / MemberChecks (0 with no checks): the
// false-positive rate of a probabilistic index run with AllowOvercount.
func (c *Counters) OvercountRate() float64 {
	if c.MemberChecks == 0 {
		return 0
	}
	return float64(c.Overcounts) / float64(c.MemberChecks)
}

// String summarizes the counters on one line.
func (c *Counters) String() string {
	return fmt.Sprintf("ops %d, queries %d, member checks %d: exact %d, holes %d, overcounts %d (%d blocks, rate %.3g), undercounts %d (%d blocks); rejects %d, apply errors %d, malformed %d; details %d (%d mismatched); concurrent matches %d; checkpoints %d",
		c.Ops, c.Queries, c.MemberChecks, c.Exact, c.Holes, c.Overcounts, c.OvercountBlocks, c.OvercountRate(),
		c.Undercounts, c.UndercountBlocks, c.Rejects, c.ApplyErrors, c.Malformed, c.DetailChecks, c.DetailMismatches,
		c.ConcurrentMatches, c.Checkpoints)
}

// Detail is one member's detailed match (Dynamo's last_matched_hashes): its
// depth and its external hash of the deepest block it matched.
type Detail struct {
	Member kv.Member
	Blocks int
	Last   uint64
}

// DetailMatcher is implemented by indexes that also report detailed
// matches. Check then requires them to list exactly the members and depths
// Match reports, each with Last equal to the query's chain hash at
// Blocks−1 (dynamo-compat §3.6): true whenever external hashes are the
// router chain, as in every generated workload.
type DetailMatcher interface {
	MatchDetails(dst []Detail, locals []uint64) []Detail
}

// Check runs q against ix and judges every member's score against m's
// bounds (dynamo-compat §3.6): above held_len is an overcount, below
// reach_len an undercount, in between a hole, and equal to held_len exact; a
// member the model does not know may only score 0. If ix is a
// DetailMatcher its detailed matches are compared with Match too. It adds to
// c and appends
// every violation (with Op unset) to dst. Check only reads m, so several
// goroutines may check against one model while nothing mutates it.
func Check(ix kv.Index, m *Model, q Query, c *Counters, dst []Violation) []Violation {
	got := ix.Match(nil, q.Locals)
	c.Queries++
	dst = checkShape(got, q, c, dst)
	for _, mem := range m.Members() {
		held, reach := m.Bounds(mem, q.Chain)
		dst = judge(mem, scoreOf(got, mem), held, reach, q, c, dst)
	}
	for _, o := range got {
		if o.Blocks > 0 && !m.Known(o.Member) {
			dst = judge(o.Member, o.Blocks, 0, 0, q, c, dst)
		}
	}
	if dm, ok := ix.(DetailMatcher); ok {
		dst = checkDetails(dm.MatchDetails(nil, q.Locals), got, q, c, dst)
	}
	return dst
}

// checkDetails appends a DetailMismatch for every detailed match that
// disagrees with Match or names the wrong last hash, and for every member
// Match reports that has no detailed match.
func checkDetails(ds []Detail, got []kv.Overlap, q Query, c *Counters, dst []Violation) []Violation {
	c.DetailChecks += len(ds)
	bad := func(d Detail) {
		c.DetailMismatches++
		dst = append(dst, Violation{Kind: DetailMismatch, Member: d.Member, Query: q, Score: scoreOf(got, d.Member), Detail: d})
	}
	for _, d := range ds {
		if d.Blocks < 1 || d.Blocks > len(q.Chain) || d.Blocks != scoreOf(got, d.Member) || d.Last != q.Chain[d.Blocks-1] {
			bad(d)
		}
	}
	for _, o := range got {
		if !slices.ContainsFunc(ds, func(d Detail) bool { return d.Member == o.Member }) {
			bad(Detail{Member: o.Member})
		}
	}
	return dst
}

// checkShape appends a Malformed violation for every duplicated member and
// every depth outside 1..len(q.Locals).
func checkShape(got []kv.Overlap, q Query, c *Counters, dst []Violation) []Violation {
	for i, o := range got {
		bad := o.Blocks <= 0 || o.Blocks > len(q.Locals)
		for _, p := range got[:i] {
			bad = bad || p.Member == o.Member
		}
		if bad {
			c.Malformed++
			dst = append(dst, Violation{Kind: Malformed, Member: o.Member, Query: q, Score: o.Blocks})
		}
	}
	return dst
}

// scoreOf returns the first depth reported for mem, 0 if none.
func scoreOf(got []kv.Overlap, mem kv.Member) int {
	for _, o := range got {
		if o.Member == mem {
			return o.Blocks
		}
	}
	return 0
}

func judge(mem kv.Member, score, held, reach int, q Query, c *Counters, dst []Violation) []Violation {
	c.MemberChecks++
	v := Violation{Member: mem, Query: q, Score: score, Held: held, Reach: reach}
	switch {
	case score > held:
		c.Overcounts++
		c.OvercountBlocks += score - held
		v.Kind = Overcount
	case score < reach:
		c.Undercounts++
		c.UndercountBlocks += reach - score
		v.Kind = Undercount
	case score < held:
		c.Holes++
		return dst
	default:
		c.Exact++
		return dst
	}
	return append(dst, v)
}
