package harness

import (
	"reflect"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

// TestMix_SplitMix64Vectors pins mix against splitmix64's published output:
// seeded with 0, its first two outputs are mix(γ) and mix(2γ), γ the golden
// gamma 0x9E3779B97F4A7C15.
func TestMix_SplitMix64Vectors(t *testing.T) {
	var gamma uint64 = 0x9E3779B97F4A7C15
	for _, c := range []struct{ in, want uint64 }{
		{0, 0},
		{gamma, 0xE220A8397B1DCDAF},
		{2 * gamma, 0x6E789E6AA1B965F4},
	} {
		if got := mix(c.in); got != c.want {
			t.Errorf("mix(%#x) = %#x, want %#x", c.in, got, c.want)
		}
	}
	if got, want := hashParts(), uint64(hashPartsInit); got != want {
		t.Errorf("hashParts() = %#x, want %#x", got, want)
	}
	if got, want := hashParts(7), mix(hashPartsInit^mix(7)); got != want {
		t.Errorf("hashParts(7) = %#x, want %#x", got, want)
	}
	if hashParts(1, 2) == hashParts(2, 1) {
		t.Errorf("hashParts(1, 2) == hashParts(2, 1): the fold must depend on order")
	}
}

// TestPool_ShapeAndSharedPrefixes checks 3 systems × 4 docs × 3 turns with
// §3.7's length rules and that turns extend their doc, docs their system.
func TestPool_ShapeAndSharedPrefixes(t *testing.T) {
	const salt, docLen = 5, 6
	pool := newPool(salt, docLen)
	if len(pool) != poolSystems*poolDocs*poolTurns {
		t.Fatalf("newPool(%d, %d) has %d sequences, want %d", salt, docLen, len(pool), poolSystems*poolDocs*poolTurns)
	}
	for s := range uint64(poolSystems) {
		sysLen := 1 + int(hashParts(partSystemLen, salt, s)%3)
		for d := range uint64(poolDocs) {
			docCap := uint64(docLen)
			if d == poolDocs-1 {
				docCap *= 4
			}
			docEnd := sysLen + int(hashParts(partDocLen, salt, s, d)%(docCap+1))
			end := docEnd
			for tu := range uint64(poolTurns) {
				q := pool[(s*poolDocs+d)*poolTurns+tu]
				end += 1 + int(hashParts(partTurnLen, salt, s, d, tu)%3)
				if len(q.locals) != end {
					t.Errorf("pool(s%d d%d t%d) has %d blocks, want %d", s, d, tu, len(q.locals), end)
					continue
				}
				if q.locals[0] != hashParts(partSystem, salt, s, 0) {
					t.Errorf("pool(s%d d%d t%d)[0] = %#x, want system block 0", s, d, tu, q.locals[0])
				}
				if docEnd > sysLen && q.locals[sysLen] != hashParts(partDoc, salt, s, d, 0) {
					t.Errorf("pool(s%d d%d t%d)[%d] is not doc block 0", s, d, tu, sysLen)
				}
				if !slices.Equal(q.chain, kv.AppendChain(nil, false, 0, q.locals)) {
					t.Errorf("pool(s%d d%d t%d): chain is not the router chain of its locals", s, d, tu)
				}
				if tu > 0 && !slices.Equal(pool[(s*poolDocs+d)*poolTurns+tu-1].locals, q.locals[:len(pool[(s*poolDocs+d)*poolTurns+tu-1].locals)]) {
					t.Errorf("pool(s%d d%d t%d) does not extend turn %d", s, d, tu, tu-1)
				}
			}
		}
	}
}

// TestGenerate_Deterministic checks that a seed always gives the same ops
// and different seeds different ones.
func TestGenerate_Deterministic(t *testing.T) {
	seed := testSeed(t, 11)
	a := Generate(seed, GenConfig{Steps: 300})
	b := Generate(seed, GenConfig{Steps: 300})
	if !reflect.DeepEqual(a, b) {
		t.Errorf("Generate(%d) twice gave different workloads", seed)
	}
	if c := Generate(seed+1, GenConfig{Steps: 300}); reflect.DeepEqual(a, c) {
		t.Errorf("Generate(%d) and Generate(%d) are equal", seed, seed+1)
	}
}

// TestGenerate_StreamRules checks every generated workload: engine-valid,
// event ids 1, 2, …, stores carrying start_position with external hashes
// equal to the router chain below their parent, queries with their chains,
// checkpoints after every worker removal and at the end, and the per-seed
// worker and rank counts.
func TestGenerate_StreamRules(t *testing.T) {
	base := testSeed(t, 1)
	seeds, steps := 12, 1500
	if testing.Short() {
		seeds, steps = 6, 500
	}
	for k := range uint64(seeds) {
		seed := base + k
		scope := ClearScope(seed / 2 % 2)
		ops := Generate(seed, GenConfig{Steps: steps, ClearScope: scope})
		if i := firstInvalid(ops, scope); i >= 0 {
			t.Errorf("seed %d: op %d %s is not engine-valid", seed, i, &ops[i])
		}
		if !ops[len(ops)-1].Checkpoint {
			t.Errorf("seed %d: last op is not a checkpoint", seed)
		}
		wantWorkers, wantRanks := 2+seed%3, 1+uint32(seed/3%2)
		seen := map[kv.Member]bool{}
		nextID := uint64(1)
		for i := range ops {
			op := &ops[i]
			if op.Kind == OpRemoveWorker && !op.Checkpoint {
				t.Errorf("seed %d op %d: remove worker is not a checkpoint", seed, i)
			}
			for _, q := range op.Queries {
				if len(q.Locals) == 0 || !slices.Equal(q.Chain, kv.AppendChain(nil, false, 0, q.Locals)) {
					t.Errorf("seed %d op %d: query %v has a wrong chain", seed, i, q.Locals)
				}
			}
			if op.Kind != OpEvent {
				continue
			}
			ev := &op.Event
			seen[ev.Member] = true
			if ev.EventID != nextID {
				t.Errorf("seed %d op %d: event id %d, want %d", seed, i, ev.EventID, nextID)
			}
			nextID = ev.EventID + 1
			if ev.Member.Rank >= wantRanks || ev.Member.Worker == 0 {
				t.Errorf("seed %d op %d: member %s outside %d workers × %d ranks", seed, i, ev.Member, wantWorkers, wantRanks)
			}
			if ev.Kind != kv.Stored {
				continue
			}
			if !ev.HasStart {
				t.Errorf("seed %d op %d: store without start_position", seed, i)
			}
			if ev.HasParent != (ev.StartPosition > 0) {
				t.Errorf("seed %d op %d: start %d with parent %v", seed, i, ev.StartPosition, ev.HasParent)
			}
			locals := make([]uint64, len(ev.Blocks))
			for j, b := range ev.Blocks {
				locals[j] = b.Local
			}
			chain := kv.AppendChain(nil, ev.HasParent, ev.Parent, locals)
			for j, b := range ev.Blocks {
				if b.External != chain[j] {
					t.Errorf("seed %d op %d block %d: external %#x, want router chain %#x", seed, i, j, b.External, chain[j])
				}
			}
		}
		initial := 0
		for mem := range seen {
			if mem.Worker <= wantWorkers {
				initial++
			}
		}
		if initial != int(wantWorkers)*int(wantRanks) {
			t.Errorf("seed %d: %d of the initial %d×%d members had events", seed, initial, wantWorkers, wantRanks)
		}
	}
}

// TestGenerate_StepMix checks the step mix of §3.7 statistically over many
// steps: the rare kinds by their exact shares, the others by bounds that
// allow for skipped steps and split stores.
func TestGenerate_StepMix(t *testing.T) {
	base := testSeed(t, 1)
	seeds, steps := 10, 2000
	if testing.Short() {
		seeds = 4
	}
	var stores, splits, decodes, dups, holes, removes, clears, rankRemovals, workerRemovals int
	for k := range uint64(seeds) {
		seed := base + k
		ops := Generate(seed, GenConfig{Steps: steps})
		m := NewModel(ClearRank)
		for i := range ops {
			op := &ops[i]
			switch {
			case op.Kind == OpRemoveMember:
				rankRemovals++
			case op.Kind == OpRemoveWorker:
				workerRemovals++
			case op.Event.Kind == kv.Cleared:
				clears++
			case op.Event.Kind == kv.Removed:
				removes++
			case op.Event.Kind == kv.Stored:
				ev := &op.Event
				allHeld := true
				for _, b := range ev.Blocks {
					allHeld = allHeld && m.Held(ev.Member, b.External)
				}
				dec := isDecode(seed, ev)
				switch {
				case allHeld:
					dups++
				case dec:
					decodes++
				case i+1 < len(ops) && ops[i+1].Kind == OpEvent && ops[i+1].Event.Kind == kv.Stored &&
					ops[i+1].Event.HasParent && ops[i+1].Event.Parent == ev.Blocks[len(ev.Blocks)-1].External &&
					ops[i+1].Event.Member == ev.Member && op.Queries == nil:
					splits++
				case len(ev.Blocks) == 1 && ev.HasParent && i > 0:
					holes++
				}
				stores++
			}
			m.Apply(op)
		}
	}
	total := float64(seeds * steps)
	share := func(n int) float64 { return float64(n) / total }
	within := func(name string, n int, lo, hi float64) {
		if s := share(n); s < lo || s > hi {
			t.Errorf("%s: %d of %d steps (%.3f), want %.3f..%.3f", name, n, int(total), s, lo, hi)
		}
	}
	t.Logf("per step: stores %.3f (decodes %.3f, splits %.3f, duplicates %.3f, hole re-stores %.3f), removals %.3f, cleared %.3f, remove rank %.3f, remove worker %.3f",
		share(stores), share(decodes), share(splits), share(dups), share(holes), share(removes), share(clears), share(rankRemovals), share(workerRemovals))
	within("cleared", clears, 0.02, 0.04)
	within("remove rank", rankRemovals, 0.012, 0.028)
	within("remove worker", workerRemovals, 0.005, 0.016)
	within("removals", removes, 0.25, 0.42)
	within("stores (incl. decodes, splits, duplicates)", stores, 0.30, 0.60)
	within("decode extensions", decodes, 0.03, 0.12)
	if splits == 0 || dups == 0 || holes == 0 {
		t.Errorf("split stores %d, duplicate stores %d, hole re-stores %d: want each > 0", splits, dups, holes)
	}
}

// isDecode reports whether a store is a decode extension of seed's
// workload: its first local is hashParts(partDecode, seed, parent, variant,
// 0) for a shared variant or the member's private one.
func isDecode(seed uint64, ev *kv.Event) bool {
	if !ev.HasParent || len(ev.Blocks) == 0 {
		return false
	}
	for _, v := range []uint64{1, 2, decodePrivate + 4*ev.Member.Worker + uint64(ev.Member.Rank)} {
		if hashParts(partDecode, seed, ev.Parent, v, 0) == ev.Blocks[0].Local {
			return true
		}
	}
	return false
}

// TestGenerate_QueriesCoverLiveAndStray checks that each step's queries end
// with 4 truncated pool sequences and one stray whose last block is in no
// pool sequence.
func TestGenerate_QueriesCoverLiveAndStray(t *testing.T) {
	seed := testSeed(t, 3)
	ops := Generate(seed, GenConfig{Steps: 200})
	pool := newPool(seed, DefaultDocLen)
	inPool := map[uint64]bool{}
	for _, s := range pool {
		for _, h := range s.chain {
			inPool[h] = true
		}
	}
	for i := range ops {
		qs := ops[i].Queries
		if qs == nil {
			continue
		}
		if len(qs) < 5 {
			t.Fatalf("seed %d op %d: %d queries, want ≥ 5", seed, i, len(qs))
		}
		for _, q := range qs[len(qs)-5 : len(qs)-1] {
			if !inPool[q.Chain[len(q.Chain)-1]] {
				t.Errorf("seed %d op %d: truncated query does not end in a pool block", seed, i)
			}
		}
		stray := qs[len(qs)-1]
		if inPool[stray.Chain[len(stray.Chain)-1]] || !inPool[stray.Chain[len(stray.Chain)-2]] {
			t.Errorf("seed %d op %d: stray query is not a pool sequence plus one new block", seed, i)
		}
	}
}
