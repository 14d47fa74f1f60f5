package relay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay/relaytest"
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
// pending window published first, then sees every delta and heartbeat in
// order (a snapshot stored meanwhile is not its business): applying them
// keeps a copy byte-identical to the pool's words. A graceful stop ends it with the drain marker, then
// ErrClosed; the catalog moves and drops the pool.
func TestRelay_WatchFollowsThePublicationFromAConsistentStart(t *testing.T) {
	seed := relaytest.Seed(t, 11)
	rng := rand.New(rand.NewPCG(seed, 11))
	_, nc := natstest.Start(t)
	cfg, src := staticConfig(t, nc)
	run := startRelay(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	queue := func(k int) { src.queueRandom(rng, k) }
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
	if f.snapshot != nil {
		t.Errorf("the watch was handed the stored snapshot at %d; the log's snapshots are not the watches'", f.snapshot.Sequence)
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
	cfg, src := staticConfig(t, nc)
	cfg.HeartbeatEvery = time.Hour
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

// The watches' publication on its own: batches are cut at
// relayproto.MaxDeltaImages into contiguous deltas (the sequence moves on
// with no watch too), heartbeats come only after a quiet interval, a
// rebuild hands over the new identity's words whole, and a sequence at its
// end drops the watches and starts again from 0.
func TestWatchers_PublishContiguousDeltasAndRebuilds(t *testing.T) {
	id := relayproto.ProducerIdentity{Incarnation: 7, LayoutGeneration: 1}
	ws := &watchers{id: id}
	t0 := time.Unix(100, 0)
	images := make([]relayproto.Image, relayproto.MaxDeltaImages+5)
	for i := range images {
		images[i] = relayproto.Image{Bucket: uint32(i), Word: uint64(i) + 1}
	}
	ws.deltas(images[:3], t0) // no watch yet: only the sequence moves
	w := &watcher{ch: make(chan relayproto.Message, 16)}
	ws.list = append(ws.list, w)
	f := &follower{words: make([]uint64, len(images)), seq: ws.seq, id: id, kinds: map[relayproto.FrameType]int{}}
	ws.deltas(images, t0)
	ws.heartbeat(t0.Add(time.Second-1), time.Second) // too soon after the deltas
	ws.heartbeat(t0.Add(time.Second), time.Second)
	ws.rebuilt(relayproto.ProducerIdentity{Incarnation: 7, LayoutGeneration: 2}, func() []uint64 { return []uint64{9, 9} })
	for len(w.ch) > 0 {
		if err := f.take(<-w.ch); err != nil {
			t.Fatal(err)
		}
	}
	if f.seq != 3 || f.kinds[relayproto.FrameDelta] != 2 || f.kinds[relayproto.FrameHeartbeat] != 1 {
		t.Errorf("after %d images: at %d with %v; want sequence 3, two deltas, one heartbeat", len(images), f.seq, f.kinds)
	}
	if !slices.Equal(f.words[:len(images)], wordsOf(images)) {
		t.Error("the follower's words differ from the images published")
	}
	if s := f.snapshot; s == nil || s.Identity.LayoutGeneration != 2 || s.Sequence != 3 || !slices.Equal(s.Words, []uint64{9, 9}) {
		t.Errorf("rebuild: %+v, want generation 2's words at sequence 3", s)
	}
	ws.seq = math.MaxUint64
	ws.deltas(images[:1], t0)
	if _, open := <-w.ch; open || !errors.Is(w.err, ErrClosed) || ws.seq != 1 {
		t.Errorf("past the last sequence: watch open %v, err %v, sequence %d; want closed, ErrClosed, 1", open, w.err, ws.seq)
	}
}

func wordsOf(images []relayproto.Image) []uint64 {
	out := make([]uint64, len(images))
	for _, im := range images {
		out[im.Bucket] = im.Word
	}
	return out
}
