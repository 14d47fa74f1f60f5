package harness

import (
	"math/rand/v2"
	"slices"

	"github.com/goindex/goindex/goindex/kv"
)

// Generator defaults (dynamo-compat §3.7).
const (
	// DefaultSteps is the number of generator steps per seed.
	DefaultSteps = 2000
	// DefaultDocLen caps a pool document's length in blocks (×4 for the
	// fourth document of each system).
	DefaultDocLen = 6
)

// Pool shape: 3 systems × 4 docs × 3 turns = 36 sequences.
const (
	poolSystems = 3
	poolDocs    = 4
	poolTurns   = 3
	// maxLive bounds the sequences a rank keeps for reuse and queries.
	maxLive = 6
	// rngSalt is xored into the seed before mixing it into the RNG seed.
	rngSalt = 0xD1FF
)

// hashParts domains: each kind of derived value has its own first part, so
// no two kinds can collide by construction.
const (
	partSystemLen = 1
	partDocLen    = 2
	partTurnLen   = 3
	partSystem    = 10
	partDoc       = 11
	partTurn      = 12
	partDecode    = 20
	// Decode variants 1 and 2 are shared by all ranks; a rank's private
	// variant is decodePrivate + 4·worker + dp rank.
	decodePrivate = 100
)

// GenConfig shapes a generated workload.
type GenConfig struct {
	Steps  int // generator steps; optional; default DefaultSteps
	DocLen int // document length cap in blocks; optional; default DefaultDocLen
	// ClearScope must match the index under test: the generator tracks what
	// each rank holds to start stores at the held prefix. Optional; default
	// ClearRank.
	ClearScope ClearScope
}

// seq is one token sequence as local hashes and their router chain (the
// external hashes the harness's "engines" publish).
type seq struct {
	locals, chain []uint64
}

func newSeq(locals []uint64) seq {
	return seq{locals: locals, chain: kv.AppendChain(nil, false, 0, locals)}
}

func (s seq) query() Query { return Query{Locals: s.locals, Chain: s.chain} }

// rankState is one generated rank: its member and its live sequences
// (stored or decoded recently; reused by stores, decodes and removals and
// queried after every step).
type rankState struct {
	member kv.Member
	live   []seq
}

type generator struct {
	rng        *rand.Rand
	salt       uint64
	pool       []seq
	model      *Model
	ranks      []*rankState
	nextWorker uint64
	nextEvent  uint64
	ops        []Op
}

// Generate returns the workload of dynamo-compat §3.7 for seed: 2 + seed%3
// workers with 1 + (seed/3)%2 dp ranks each, sharing a pool of
// 3 systems × 4 docs × 3 turns, and cfg.Steps random steps (40 % store, 12 %
// decode extension, 42 % removal, 3 % cleared, 2 % remove rank, 1 % remove
// worker). External hashes are the router chain of the local hashes, every
// store carries start_position, and event ids increase from 1. Each step's
// last op carries the step's queries; a step that changes nothing emits no
// op. The last op is always a checkpoint.
//
// The RNG is math/rand/v2's PCG seeded from mix(seed ^ 0xD1FF): the
// statistics of upstream's generator are reproduced, its exact stream (Rust
// fastrand) is not. Generate is deterministic in (seed, cfg).
func Generate(seed uint64, cfg GenConfig) []Op {
	if cfg.Steps <= 0 {
		cfg.Steps = DefaultSteps
	}
	if cfg.DocLen <= 0 {
		cfg.DocLen = DefaultDocLen
	}
	s := mix(seed ^ rngSalt)
	g := &generator{
		rng:   rand.New(rand.NewPCG(s, mix(s))),
		salt:  seed,
		pool:  newPool(seed, cfg.DocLen),
		model: NewModel(cfg.ClearScope),
	}
	workers := 2 + seed%3
	ranksPer := 1 + uint32(seed/3%2)
	for w := range workers {
		for r := range ranksPer {
			g.ranks = append(g.ranks, &rankState{member: kv.Member{Worker: w + 1, Rank: r}})
		}
	}
	g.nextWorker = workers + 1
	for range cfg.Steps {
		g.step()
	}
	if n := len(g.ops); n > 0 {
		g.ops[n-1].Checkpoint = true
	}
	return g.ops
}

// newPool builds the 36 shared-prefix sequences: system s, then document d
// of s, then turns 0..t of (s, d).
func newPool(salt uint64, docLen int) []seq {
	var pool []seq
	for s := range uint64(poolSystems) {
		var sys []uint64
		for i := range 1 + hashParts(partSystemLen, salt, s)%3 {
			sys = append(sys, hashParts(partSystem, salt, s, i))
		}
		for d := range uint64(poolDocs) {
			docCap := uint64(docLen)
			if d == poolDocs-1 {
				docCap *= 4
			}
			prefix := slices.Clone(sys)
			for i := range hashParts(partDocLen, salt, s, d) % (docCap + 1) {
				prefix = append(prefix, hashParts(partDoc, salt, s, d, i))
			}
			for t := range uint64(poolTurns) {
				for i := range 1 + hashParts(partTurnLen, salt, s, d, t)%3 {
					prefix = append(prefix, hashParts(partTurn, salt, s, d, t, i))
				}
				pool = append(pool, newSeq(slices.Clone(prefix)))
			}
		}
	}
	return pool
}

// percent returns true with probability p/100.
func (g *generator) percent(p int) bool { return g.rng.IntN(100) < p }

func (g *generator) step() {
	rk := g.ranks[g.rng.IntN(len(g.ranks))]
	first := len(g.ops)
	checkpoint := false
	switch p := g.rng.IntN(100); {
	case p < 40:
		g.store(rk)
	case p < 52:
		g.decode(rk)
	case p < 94:
		g.remove(rk)
	case p < 97:
		g.emit(kv.Event{Member: rk.member, Kind: kv.Cleared})
	case p < 99:
		g.add(Op{Kind: OpRemoveMember, Member: rk.member})
		rk.live = nil
	default:
		g.removeWorker(rk.member.Worker)
		checkpoint = true
	}
	if len(g.ops) == first {
		return
	}
	last := &g.ops[len(g.ops)-1]
	last.Checkpoint = checkpoint || g.rng.IntN(6) == 0
	last.Queries = g.queries()
}

// add applies op to the generator's model and appends it.
func (g *generator) add(op Op) {
	g.model.Apply(&op)
	g.ops = append(g.ops, op)
}

// emit numbers ev and adds it.
func (g *generator) emit(ev kv.Event) {
	g.nextEvent++
	ev.EventID = g.nextEvent
	g.add(Op{Kind: OpEvent, Event: ev})
}

// emitStore stores positions [a, b) of s for rk, below position a−1.
func (g *generator) emitStore(rk *rankState, s seq, a, b int) {
	ev := kv.Event{Member: rk.member, Kind: kv.Stored, HasStart: true, StartPosition: uint32(a)}
	if a > 0 {
		ev.HasParent, ev.Parent = true, s.chain[a-1]
	}
	ev.Blocks = make([]kv.Block, 0, b-a)
	for i := a; i < b; i++ {
		ev.Blocks = append(ev.Blocks, kv.Block{External: s.chain[i], Local: s.locals[i]})
	}
	g.emit(ev)
}

// heldPrefix returns how many leading blocks of s mem holds.
func (g *generator) heldPrefix(mem kv.Member, s seq) int {
	n := 0
	for n < len(s.chain) && g.model.Held(mem, s.chain[n]) {
		n++
	}
	return n
}

// heldPositions returns the positions of s that mem holds, ascending.
func (g *generator) heldPositions(mem kv.Member, s seq) []int {
	var pos []int
	for i, h := range s.chain {
		if g.model.Held(mem, h) {
			pos = append(pos, i)
		}
	}
	return pos
}

// addLive makes s one of rk's live sequences, evicting the oldest beyond
// maxLive.
func (rk *rankState) addLive(s seq) {
	for _, l := range rk.live {
		if len(l.chain) == len(s.chain) && l.chain[len(l.chain)-1] == s.chain[len(s.chain)-1] {
			return
		}
	}
	if len(rk.live) == maxLive {
		rk.live = slices.Delete(rk.live, 0, 1)
	}
	rk.live = append(rk.live, s)
}

// store stores the rest of a live or pool sequence from its held prefix,
// re-stores a single block into a hole, or duplicates part of a fully held
// sequence.
func (g *generator) store(rk *rankState) {
	var s seq
	if len(rk.live) > 0 && g.rng.IntN(2) == 0 {
		s = rk.live[g.rng.IntN(len(rk.live))]
	} else {
		s = g.pool[g.rng.IntN(len(g.pool))]
		rk.addLive(s)
	}
	n := len(s.chain)
	h := g.heldPrefix(rk.member, s)
	if h == n {
		if g.percent(25) {
			a := g.rng.IntN(n)
			g.emitStore(rk, s, a, a+1+g.rng.IntN(n-a))
		}
		return
	}
	hole := false
	for _, ext := range s.chain[h+1:] {
		hole = hole || g.model.Held(rk.member, ext)
	}
	if hole && g.percent(40) {
		g.emitStore(rk, s, h, h+1)
		return
	}
	if n-h > 1 && g.percent(30) {
		k := h + 1 + g.rng.IntN(n-h-1)
		g.emitStore(rk, s, h, k)
		g.emitStore(rk, s, k, n)
		return
	}
	g.emitStore(rk, s, h, n)
}

// decode extends a fully held live sequence by 1–3 blocks, shared with
// every rank (variants 1, 2) or private to this one.
func (g *generator) decode(rk *rankState) {
	var full []int
	for i, s := range rk.live {
		if g.heldPrefix(rk.member, s) == len(s.chain) {
			full = append(full, i)
		}
	}
	if len(full) == 0 {
		return
	}
	li := full[g.rng.IntN(len(full))]
	s := rk.live[li]
	tail := s.chain[len(s.chain)-1]
	variant := uint64(1 + g.rng.IntN(3))
	if variant == 3 {
		variant = decodePrivate + 4*rk.member.Worker + uint64(rk.member.Rank)
	}
	count := 1 + g.rng.IntN(3)
	ext := make([]uint64, count)
	for i := range ext {
		ext[i] = hashParts(partDecode, g.salt, tail, variant, uint64(i))
	}
	grown := seq{
		locals: append(slices.Clone(s.locals), ext...),
		chain:  kv.AppendChain(slices.Clone(s.chain), true, tail, ext),
	}
	rk.live[li] = grown
	g.emitStore(rk, grown, len(s.chain), len(grown.chain))
}

// remove removes held blocks of one live sequence: a tail run of the held
// prefix, a head run of the held positions, a single block or a random
// subset, in reversed, original or shuffled order, sometimes with held tail
// blocks of another live sequence. Every named block is held.
func (g *generator) remove(rk *rankState) {
	var cands []int
	for i, s := range rk.live {
		if len(g.heldPositions(rk.member, s)) > 0 {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return
	}
	li := cands[g.rng.IntN(len(cands))]
	s := rk.live[li]
	held := g.heldPositions(rk.member, s)
	h := g.heldPrefix(rk.member, s)
	var pos []int
	switch p := g.rng.IntN(100); {
	case p < 35 && h > 0: // a tail run of the held prefix
		for i := h - 1 - g.rng.IntN(min(4, h)); i < h; i++ {
			pos = append(pos, i)
		}
	case p < 35, p >= 50 && p < 70: // one block (also when no prefix is held)
		pos = []int{held[g.rng.IntN(len(held))]}
	case p < 50: // a head run of the held positions
		pos = held[:1+g.rng.IntN(min(4, len(held)))]
	default: // a random subset
		pick := slices.Clone(held)
		g.rng.Shuffle(len(pick), func(i, j int) { pick[i], pick[j] = pick[j], pick[i] })
		pos = pick[:1+g.rng.IntN(min(5, len(held)))]
		slices.Sort(pos)
	}
	hashes := make([]uint64, len(pos))
	for i, p := range pos {
		hashes[i] = s.chain[p]
	}
	switch g.rng.IntN(3) {
	case 0:
		slices.Reverse(hashes)
	case 1:
		g.rng.Shuffle(len(hashes), func(i, j int) { hashes[i], hashes[j] = hashes[j], hashes[i] })
	}
	if len(rk.live) > 1 && g.percent(15) {
		oi := g.rng.IntN(len(rk.live) - 1)
		if oi >= li {
			oi++
		}
		other := rk.live[oi].chain
		for _, ext := range other[max(0, len(other)-1-g.rng.IntN(3)):] {
			if g.model.Held(rk.member, ext) && !slices.Contains(hashes, ext) {
				hashes = append(hashes, ext)
			}
		}
	}
	g.emit(kv.Event{Member: rk.member, Kind: kv.Removed, Removed: hashes})
}

// removeWorker removes a worker; half the time it returns under the same
// id, otherwise a fresh id replaces it. Either way its ranks start empty.
func (g *generator) removeWorker(worker uint64) {
	g.add(Op{Kind: OpRemoveWorker, Worker: worker})
	fresh := uint64(0) // worker ids start at 1
	if g.rng.IntN(2) == 0 {
		fresh = g.nextWorker
		g.nextWorker++
	}
	for _, rk := range g.ranks {
		if rk.member.Worker == worker {
			if fresh != 0 {
				rk.member.Worker = fresh
			}
			rk.live = nil
		}
	}
}

// queries returns the checks after a step: every live sequence of every
// rank, 4 pool sequences truncated to a random length ≥ 1, and one stray
// (a pool sequence plus one random block).
func (g *generator) queries() []Query {
	var qs []Query
	for _, rk := range g.ranks {
		for _, s := range rk.live {
			qs = append(qs, s.query())
		}
	}
	for range 4 {
		s := g.pool[g.rng.IntN(len(g.pool))]
		n := 1 + g.rng.IntN(len(s.chain))
		qs = append(qs, Query{Locals: s.locals[:n:n], Chain: s.chain[:n:n]})
	}
	s := g.pool[g.rng.IntN(len(g.pool))]
	stray := g.rng.Uint64()
	qs = append(qs, Query{
		Locals: append(slices.Clone(s.locals), stray),
		Chain:  append(slices.Clone(s.chain), kv.ChainHash(s.chain[len(s.chain)-1], stray)),
	})
	return qs
}
