package shm

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/internal/testseed"
)

// verifyAll runs VerifySegment over every segment and returns the lanes
// found bad (and fails if any stayed busy with no writer running).
func verifyAll(t *testing.T, name string, k int, verify func(seg int, mask uint64) (bad, busy uint64)) uint64 {
	t.Helper()
	var bad uint64
	for seg := range k {
		b, busy := verify(seg, ^uint64(0))
		if busy != 0 {
			t.Fatalf("%s: segment %d busy %#x with no writer running", name, seg, busy)
		}
		bad |= b
	}
	return bad
}

// Random snapshots (whole, in chunks, out of order), deltas and clears over
// several lanes keep every lane's published and private sums equal to what
// its words sum to: neither the reader nor the writer ever finds a lane bad
// (the sums are checked against a recomputation, the exact reference).
func TestIntegrity_SumsFollowEveryWrite(t *testing.T) {
	seed := testseed.For(t, shmSeed)
	rng := rand.New(rand.NewPCG(seed, 31))
	path := filepath.Join(t.TempDir(), "replica")
	const lanes, n = 5, 256
	w := create(t, path, testLayout(lanes, n))
	r := attach(t, path)
	k := r.Segments()
	for step := range 400 {
		l := rng.IntN(lanes)
		switch op := rng.IntN(10); {
		case op < 2: // a whole snapshot in random chunks
			words := laneWords(rng.Uint64(), l, n)
			w.Table().ClearReady(l)
			for off := 0; off < n; {
				c := 1 + rng.IntN(n-off)
				w.Table().StoreWords(l, uint64(off), words[off:off+c])
				off += c
			}
			w.Table().SetReady(l)
		case op < 3: // a chunk out of order: sums stay incremental
			off := rng.IntN(n)
			w.Table().StoreWords(l, uint64(off), laneWords(rng.Uint64(), l, uint64(n-off)))
		case op < 4:
			if err := w.Table().Clear(l); err != nil {
				t.Fatal(err)
			}
		default: // a delta, repeated buckets included
			images := make([]ckf.Image, 1+rng.IntN(20))
			for i := range images {
				images[i] = ckf.Image{Bucket: uint32(rng.IntN(n)), Word: rng.Uint64() * uint64(rng.IntN(2))}
			}
			if err := w.Table().Apply(l, images); err != nil {
				t.Fatal(err)
			}
		}
		if bad := verifyAll(t, "reader", k, r.VerifySegment); bad != 0 {
			t.Fatalf("step %d: reader found lanes %#x bad after legitimate writes (GOINDEX_SEED=%d)", step, bad, seed)
		}
		if bad := verifyAll(t, "writer", k, w.VerifySegment); bad != 0 {
			t.Fatalf("step %d: writer found lanes %#x bad after legitimate writes (GOINDEX_SEED=%d)", step, bad, seed)
		}
	}
}

// Random bytes written over part of the bucket region (behind the
// writer's back) are found in exactly the lanes whose words changed, by
// the reader and the writer alike; a whole snapshot of such a lane heals
// it and counts a seal. Scribbled sums are flagged by readers until the
// writer's own verification publishes its copy again.
func TestIntegrity_CorruptionIsFoundAndHealedBySnapshots(t *testing.T) {
	seed := testseed.For(t, shmSeed)
	rng := rand.New(rand.NewPCG(seed, 32))
	path := filepath.Join(t.TempDir(), "replica")
	const lanes, n = 13, 1 << 14
	w := filled(t, path, lanes, n)
	r := attach(t, path)
	k := r.Segments()
	if bad := verifyAll(t, "reader", k, r.VerifySegment); bad != 0 {
		t.Fatalf("fresh file: lanes %#x bad", bad)
	}
	before := make([][]uint64, lanes)
	for l := range lanes {
		before[l] = r.Table().AppendLane(nil, l)
	}
	// 256 KiB of random bytes into the bucket region.
	info := r.Info()
	junk := make([]byte, 256<<10)
	for i := range junk {
		junk[i] = byte(rng.Uint32())
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(junk, int64(info.HeaderBytes)+int64(rng.IntN(int(info.RegionBytes)-len(junk)))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var want uint64
	for l := range lanes {
		after := r.Table().AppendLane(nil, l)
		for b := range after {
			if after[b] != before[l][b] {
				want |= 1 << l
				break
			}
		}
	}
	if want == 0 {
		t.Fatalf("the random bytes changed no lane's words")
	}
	if bad := verifyAll(t, "reader", k, r.VerifySegment); bad != want {
		t.Errorf("reader: lanes %#x bad, want exactly the changed ones %#x (GOINDEX_SEED=%d)", bad, want, seed)
	}
	if bad := verifyAll(t, "writer", k, w.VerifySegment); bad != want {
		t.Errorf("writer: lanes %#x bad, want %#x", bad, want)
	}
	for l := range lanes {
		if want&(1<<l) == 0 {
			continue
		}
		seals := r.Seals(l)
		if err := w.Table().Install(l, before[l]); err != nil {
			t.Fatal(err)
		}
		if r.Seals(l) != seals+1 {
			t.Errorf("lane %d: Seals() = %d after a whole snapshot, want %d", l, r.Seals(l), seals+1)
		}
	}
	if bad := verifyAll(t, "reader", k, r.VerifySegment); bad != 0 {
		t.Errorf("after healing snapshots: reader lanes %#x bad", bad)
	}

	// Scribble on lane 6's published sums: the words are right, the sums
	// wrong; the reader flags the lane until the writer republishes.
	blk := w.m.integrity(6)
	atomic.StoreUint64(&blk[iwSums+3], 12345)
	if bad := verifyAll(t, "reader", k, r.VerifySegment); bad != 1<<6 {
		t.Errorf("scribbled sums: reader lanes %#x bad, want lane 6", bad)
	}
	if bad := verifyAll(t, "writer", k, w.VerifySegment); bad != 0 {
		t.Errorf("scribbled sums: writer lanes %#x bad, want none (its own copy is whole)", bad)
	}
	if bad := verifyAll(t, "reader", k, r.VerifySegment); bad != 0 {
		t.Errorf("after the writer republished: reader lanes %#x bad", bad)
	}
}

// A verifier running while the lanes' writers apply deltas never finds a
// lane bad: the version word tells it when it read a lane mid-write (busy).
// A version left odd (a write that faulted, a scribble) is taken over by
// the next write after lockPatience.
func TestIntegrity_VerifierConcurrentWithWritersSeesNoFalseDamage(t *testing.T) {
	seed := testseed.For(t, shmSeed)
	path := filepath.Join(t.TempDir(), "replica")
	const lanes, n = 4, 1 << 10
	w := filled(t, path, lanes, n)
	r := attach(t, path)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for l := range lanes {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(l)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				images := []ckf.Image{{Bucket: uint32(rng.IntN(n)), Word: rng.Uint64()}, {Bucket: uint32(rng.IntN(n)), Word: rng.Uint64()}}
				if err := w.Table().Apply(l, images); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var checked, busy int
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		for seg := range r.Segments() {
			b, y := r.VerifySegment(seg, ^uint64(0))
			if b != 0 {
				t.Fatalf("segment %d: lanes %#x bad while only legitimate deltas landed (GOINDEX_SEED=%d)", seg, b, seed)
			}
			checked++
			if y != 0 {
				busy++
			}
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d segment checks, %d with a lane busy", checked, busy)

	blk := w.m.integrity(2)
	atomic.StoreUint64(&blk[iwVersion], atomic.LoadUint64(&blk[iwVersion])|1)
	start := time.Now()
	if err := w.Table().Apply(2, []ckf.Image{{Bucket: 1, Word: 7}}); err != nil {
		t.Fatal(err)
	}
	if v := atomic.LoadUint64(&blk[iwVersion]); v%2 != 0 || time.Since(start) < lockPatience {
		t.Errorf("a write after a stuck odd version: version %d after %v, want even after lockPatience", v, time.Since(start))
	}
	if bad := verifyAll(t, "reader", r.Segments(), r.VerifySegment); bad != 0 {
		t.Errorf("after the take-over: lanes %#x bad", bad)
	}
}

// A snapshot abandoned half-way (its words stored in order, the sums left
// for it) has its lane summed anew by the next write or SetReady, so no
// verifier ever flags the lane; while it arrives the lane is not
// verifiable (busy), not bad.
func TestIntegrity_AbandonedSnapshotIsSummedAnew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replica")
	const lanes, n = 2, 256
	w := filled(t, path, lanes, n)
	r := attach(t, path)
	words := laneWords(7, 1, n)
	w.Table().StoreWords(1, 0, words[:100]) // a snapshot starts in order...
	if bad, busy := r.VerifySegment(0, 1<<1); bad != 0 || busy != 1<<1 {
		t.Errorf("mid-snapshot: VerifySegment = bad %#x busy %#x, want lane 1 busy", bad, busy)
	}
	for _, c := range []struct {
		name string
		do   func()
	}{
		{"a delta", func() { _ = w.Table().Apply(1, []ckf.Image{{Bucket: 3, Word: 5}}) }},
		{"SetReady", func() { w.Table().SetReady(1) }},
		{"a chunk out of order", func() { w.Table().StoreWords(1, 200, words[200:210]) }},
	} {
		w.Table().StoreWords(1, 0, words[:100]) // ...and is abandoned by:
		c.do()
		if bad := verifyAll(t, c.name, r.Segments(), r.VerifySegment); bad != 0 {
			t.Errorf("after a snapshot abandoned by %s: reader lanes %#x bad", c.name, bad)
		}
		if bad := verifyAll(t, c.name, r.Segments(), w.VerifySegment); bad != 0 {
			t.Errorf("after a snapshot abandoned by %s: writer lanes %#x bad", c.name, bad)
		}
	}
}

// Junk over the region's header line (the ready mask, which no lane's sums
// cover) is undone by the writer's RepairReady: lanes that lost their bit
// get it back, a lane that is not ready loses the one it gained.
func TestWriter_RepairReadyRestoresTheMask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replica")
	w := filled(t, path, 4, 64)
	w.Table().ClearReady(3)
	r := attach(t, path)
	if got := w.RepairReady(); got != 0 || r.Ready() != 0b0111 {
		t.Fatalf("before the damage: RepairReady() = %#x, Ready() = %#x; want 0 and 0b0111", got, r.Ready())
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 8)
	junk[0] = 0b1010 // lanes 1 and 3: 0 and 2 lose their bit, 3 gains one
	junk[7] = 0xff   // and bits past the last lane
	if _, err := f.WriteAt(junk, int64(r.Info().HeaderBytes)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := w.RepairReady(); got != 0b1101 || r.Ready() != 0b0111 {
		t.Errorf("after the damage: RepairReady() = %#b, Ready() = %#b; want lanes 0, 2, 3 wrong and 0b0111 restored", got, r.Ready())
	}
	if got := w.RepairReady(); got != 0 {
		t.Errorf("a second RepairReady() = %#b, want 0", got)
	}
}
