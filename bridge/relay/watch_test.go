package relay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/relayproto"
)

// follower applies a Watch's messages to its words, checking that deltas
// and heartbeats are contiguous from the watch's start.
type follower struct {
	words    []uint64
	seq      uint64
	id       relayproto.ProducerIdentity
	kinds    map[relayproto.FrameType]int
	drained  bool
	snapshot *relayproto.Snapshot // the last stored snapshot seen
}

func newFollower(w *Watch) *follower {
	return &follower{words: slices.Clone(w.Words), seq: w.Sequence, id: w.Identity, kinds: map[relayproto.FrameType]int{}}
}

func (f *follower) take(m relayproto.Message) error {
	f.kinds[m.Type()]++
	switch m := m.(type) {
	case *relayproto.Delta:
		if m.Identity != f.id || m.Base != f.seq || m.Sequence != m.Base+1 {
			return fmt.Errorf("delta %d→%d of incarnation %d after %d of %d", m.Base, m.Sequence, m.Identity.Incarnation, f.seq, f.id.Incarnation)
		}
		for _, im := range m.Images {
			f.words[im.Bucket] = im.Word
		}
		f.seq = m.Sequence
	case *relayproto.Heartbeat:
		if m.Sequence != f.seq {
			return fmt.Errorf("heartbeat at %d after %d", m.Sequence, f.seq)
		}
	case *relayproto.Snapshot:
		f.snapshot = m
	case *relayproto.DrainMarker:
		if m.Expected != f.seq {
			return fmt.Errorf("drain marker at %d after %d", m.Expected, f.seq)
		}
		f.drained = true
	}
	return nil
}

// drain takes every message already in w.C.
func (f *follower) drain(t *testing.T, w *Watch) {
	t.Helper()
	for {
		select {
		case m, ok := <-w.C:
			if !ok {
				return
			}
			if err := f.take(m); err != nil {
				t.Fatal(err)
			}
		default:
			return
		}
	}
}

// A watch starts from the pool's words at its last sequence, with the
// pending window published first, then sees every delta, heartbeat and
// stored snapshot in order: applying them keeps a copy byte-identical to
// the pool's words. A graceful stop ends it with the drain marker, then
// ErrClosed; the catalog moves and drops the pool.
func TestRelay_WatchFollowsThePublicationFromAConsistentStart(t *testing.T) {
	seed := relaytest.Seed(t, 11)
	rng := rand.New(rand.NewPCG(seed, 11))
	_, nc := natstest.Start(t)
	cfg := testConfig(nc)
	n, err := ckf.BucketCount(cfg.Pools[0].ExpectedBlocks)
	if err != nil {
		t.Fatal(err)
	}
	src := &staticSource{words: make([]uint64, n)}
	cfg.Pools[0].Source = src
	run := startRelay(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	queue := func(k int) {
		src.mu.Lock()
		defer src.mu.Unlock()
		for _, b := range rng.Perm(int(n))[:k] { // distinct buckets, as a producer's drain
			src.pending = append(src.pending, relayproto.Image{Bucket: uint32(b), Word: rng.Uint64()})
		}
	}
	rev0, pools, changed := run.r.Catalog()
	if len(pools) != 1 || pools[0].Domain != 1 || pools[0].DC != 3 {
		t.Fatalf("Catalog = %+v, want the pool of domain 1, dc 3", pools)
	}
	queue(5) // pending, unpublished: the watch must publish it first
	w, err := run.r.Watch(ctx, 1, 0)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Close()
	want, _ := run.r.AppendWords(ctx, nil, 1)
	if !slices.Equal(w.Words, want) || w.Sequence != 1 || w.Identity.Incarnation != pools[0].Incarnation {
		t.Fatalf("Watch started at %d (incarnation %d), words equal %v; want 1 (the pending window), %d, true",
			w.Sequence, w.Identity.Incarnation, slices.Equal(w.Words, want), pools[0].Incarnation)
	}
	f := newFollower(w)
	for i := range 40 {
		queue(1 + i%7)
		if err := run.r.Flush(ctx, 1); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		if i == 20 {
			if err := run.r.Snapshot(ctx, 1); err != nil {
				t.Fatalf("Snapshot: %v", err)
			}
		}
		f.drain(t, w)
	}
	want, _ = run.r.AppendWords(ctx, nil, 1)
	if !slices.Equal(f.words, want) || f.seq != 41 {
		t.Errorf("after 40 deltas: follower at %d, words equal %v; want 41, true", f.seq, slices.Equal(f.words, want))
	}
	if f.snapshot == nil || f.snapshot.Sequence != 22 {
		t.Errorf("stored snapshot seen: %+v, want one at sequence 22", f.snapshot)
	}
	relaytest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		f.drain(t, w)
		if f.kinds[relayproto.FrameHeartbeat] == 0 {
			return errors.New("no heartbeat yet")
		}
		if _, ok := run.r.Load(1); !ok {
			return errors.New("no load report yet")
		}
		return nil
	})

	run.stop()
	if err := <-run.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for m := range w.C {
		if err := f.take(m); err != nil {
			t.Fatal(err)
		}
	}
	if !f.drained || !errors.Is(w.Err(), ErrClosed) {
		t.Errorf("after a graceful stop: drained %v, Err %v; want true, ErrClosed", f.drained, w.Err())
	}
	select {
	case <-changed:
	default:
		t.Error("the catalog did not move when the pool stopped")
	}
	if rev, pools, _ := run.r.Catalog(); rev <= rev0 || len(pools) != 0 {
		t.Errorf("Catalog after the stop = revision %d, %d pools; want > %d, none", rev, len(pools), rev0)
	}
	if _, err := run.r.Watch(ctx, 1, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Watch of a stopped pool = %v, want ErrClosed", err)
	}
}

// A watch that falls its buffer behind is dropped with ErrLagged; the pool
// goes on publishing and another watch starts from its current state.
func TestRelay_WatchThatFallsBehindIsDropped(t *testing.T) {
	_, nc := natstest.Start(t)
	cfg := testConfig(nc)
	cfg.HeartbeatEvery = time.Hour
	n, _ := ckf.BucketCount(cfg.Pools[0].ExpectedBlocks)
	src := &staticSource{words: make([]uint64, n)}
	cfg.Pools[0].Source = src
	run := startRelay(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	slow, err := run.r.Watch(ctx, 1, 2)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	for i := range 3 {
		src.mu.Lock()
		src.pending = append(src.pending, relayproto.Image{Bucket: uint32(i), Word: uint64(i + 1)})
		src.mu.Unlock()
		if err := run.r.Flush(ctx, 1); err != nil {
			t.Fatalf("Flush: %v", err)
		}
	}
	got := 0
	for range slow.C {
		got++
	}
	if got != 2 || !errors.Is(slow.Err(), ErrLagged) {
		t.Errorf("a watch of buffer 2 after 3 deltas: read %d, Err %v; want 2, ErrLagged", got, slow.Err())
	}
	fresh, err := run.r.Watch(ctx, 1, 0)
	if err != nil || fresh.Sequence != 3 || fresh.Words[2] != 3 {
		t.Errorf("a new watch after the drop: %v at %d; want sequence 3 with the three images", err, fresh.Sequence)
	}
	fresh.Close()
	fresh.Close()
	if _, ok := <-fresh.C; ok || !errors.Is(fresh.Err(), ErrClosed) {
		t.Errorf("a closed watch: C open or Err %v; want closed, ErrClosed", fresh.Err())
	}
	if _, err := run.r.Watch(ctx, 9, 0); !errors.Is(err, ErrUnknownPool) {
		t.Errorf("Watch(domain 9) = %v, want ErrUnknownPool", err)
	}
}
