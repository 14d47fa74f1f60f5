package bench

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/relayproto"
)

// synthMaxKicks bounds a synthetic insertion's kick chain, as the
// producer's default (ckf.DefaultMaxKicks) bounds a real one.
const synthMaxKicks = ckf.DefaultMaxKicks

// synthSampleEvery keeps every this-many-th inserted hash for the probes
// that check the resynced replica.
const synthSampleEvery = 1024

// synthTable is one lane's SYNTHETIC table for a RelayConfig.Synthetic
// run: the words a pool tracking resident blocks would publish,
// filled directly with random canonical hashes and no exact ownership. It
// is the pool's publish.Source: its words never change, so Drain has
// nothing to publish.
type synthTable struct {
	words    []uint64
	resident uint64   // fingerprints placed
	sample   []uint64 // some of the placed hashes
}

// AppendWords implements publish.Source.
func (t *synthTable) AppendWords(dst []uint64) []uint64 { return append(dst, t.words...) }

// Drain implements publish.Source: a synthetic table never changes.
func (t *synthTable) Drain(dst []relayproto.Image) []relayproto.Image { return dst }

// synthesize fills one table per lane (on every core) with blocks random
// canonical hashes, in the relay's format for blocks (ckf.BucketCount,
// ckf.DefaultSeed), seeded by seed and the lane.
func synthesize(lanes, blocks int, seed uint64) ([]*synthTable, error) {
	n, err := ckf.BucketCount(uint64(blocks))
	if err != nil {
		return nil, err
	}
	f, err := ckf.NewFormat(ckf.DefaultSeed, n)
	if err != nil {
		return nil, err
	}
	tables := make([]*synthTable, lanes)
	errs := make([]error, lanes)
	next := make(chan int, lanes)
	for l := range lanes {
		next <- l
	}
	close(next)
	var wg sync.WaitGroup
	for range min(lanes, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for l := range next {
				tables[l], errs[l] = synthFill(f, blocks, rand.New(rand.NewPCG(seed, uint64(l)+1)))
			}
		})
	}
	wg.Wait()
	for l, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("synthetic lane %d: %w", l, err)
		}
	}
	return tables, nil
}

// synthFill places blocks random canonical hashes into a fresh table of
// f's size the way the producer's cuckoo table does (spec §4.6): the first
// empty slot of bucket A, else of B, else a random walk of kicks that moves
// a resident fingerprint to its other bucket, undone if it finds no empty
// slot within synthMaxKicks. A hash that cannot be placed is an error: a
// real pool at that load would be omitting blocks.
func synthFill(f *ckf.Format, blocks int, rng *rand.Rand) (*synthTable, error) {
	t := &synthTable{words: make([]uint64, f.Buckets())}
	type undo struct {
		bucket uint32
		word   uint64
	}
	kicks := make([]undo, 0, synthMaxKicks)
	for i := range blocks {
		h := rng.Uint64()
		p := f.Probe(h)
		if !t.place(p.A, p.FP) && !t.place(p.B, p.FP) {
			cur, carry, placed := p.A, p.FP, false
			if rng.IntN(2) == 1 {
				cur = p.B
			}
			kicks = kicks[:0]
			for range synthMaxKicks {
				w := ckf.Bucket(t.words[cur])
				s := rng.IntN(ckf.SlotsPerBucket)
				kicks = append(kicks, undo{cur, uint64(w)})
				carry, t.words[cur] = w.Slot(s), uint64(w.WithSlot(s, carry))
				cur = f.Alt(cur, carry)
				if t.place(cur, carry) {
					placed = true
					break
				}
			}
			if !placed {
				for k := len(kicks) - 1; k >= 0; k-- {
					t.words[kicks[k].bucket] = kicks[k].word
				}
				return nil, fmt.Errorf("hash %d of %d found no slot in %d kicks (load %.3f)", i, blocks, synthMaxKicks,
					float64(t.resident)/float64(len(t.words)*ckf.SlotsPerBucket))
			}
		}
		t.resident++
		if i%synthSampleEvery == 0 {
			t.sample = append(t.sample, h)
		}
	}
	return t, nil
}

// place puts fp into bucket b's first empty slot, if it has one.
func (t *synthTable) place(b uint32, fp uint16) bool {
	w := ckf.Bucket(t.words[b])
	i := w.FirstEmpty()
	if i < 0 {
		return false
	}
	t.words[b] = uint64(w.WithSlot(i, fp))
	return true
}
