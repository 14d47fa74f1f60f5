package relay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/nats-io/nats.go"
	"github.com/zeebo/xxh3"
)

// lineages returns domain 1's exact state in r: each member's mappings.
func lineages(ctx context.Context, t *testing.T, r *Relay) map[kv.Member]map[uint64]uint64 {
	t.Helper()
	out := map[kv.Member]map[uint64]uint64{}
	err := r.do(ctx, 1, func(p *pool) {
		for _, m := range p.prod.AppendMembers(nil) {
			lin := map[uint64]uint64{}
			for _, mp := range p.prod.AppendLineage(nil, m) {
				lin[mp.Source] = mp.Canonical
			}
			out[m] = lin
		}
	})
	if err != nil {
		t.Fatalf("read the pool's exact state: %v", err)
	}
	return out
}

// statusOf returns domain 1's status.
func statusOf(ctx context.Context, r *Relay) (PoolStatus, error) {
	st, err := r.Status(ctx)
	if err != nil {
		return PoolStatus{}, err
	}
	return st[0], nil
}

// publishAll publishes envelopes on the pool's endpoint subject and waits
// until the relay took events events in all.
func publishAll(ctx context.Context, t *testing.T, nc *nats.Conn, r *Relay, events uint64, envs ...[]byte) {
	t.Helper()
	subject := dynamo.EventSubject("dynamo", "backend")
	for _, e := range envs {
		if err := nc.Publish(subject, e); err != nil {
			t.Fatalf("publish event: %v", err)
		}
	}
	awaitIntake(ctx, t, r, events)
}

// awaitIntake waits until the relay took events events in all.
func awaitIntake(ctx context.Context, t *testing.T, r *Relay, events uint64) {
	t.Helper()
	relaytest.CheckFor(t, 20*time.Second, 5*time.Millisecond, func() error {
		st, err := statusOf(ctx, r)
		if err != nil {
			return err
		}
		if st.Intake.Events != events {
			return fmt.Errorf("intake events = %d, want %d", st.Intake.Events, events)
		}
		return nil
	})
}

// checkpointed runs a relay with checkpoints (restored members wait grace)
// over a NATS server of its own, feeds it events envelopes of a generator
// of workers workers, checks that its exact state is the workers', and
// stops it gracefully, which writes its checkpoint. It returns the
// connection, the config to restart with, the generator and the state.
func checkpointed(ctx context.Context, t *testing.T, seed uint64, workers, events int, grace time.Duration) (*nats.Conn, Config,
	*relaytest.Generator, map[kv.Member]map[uint64]uint64) {
	t.Helper()
	_, nc := natstest.Start(t)
	cfg := testConfig(nc)
	cfg.CheckpointDir, cfg.CheckpointGrace = t.TempDir(), grace
	run := startRelay(t, cfg)
	g := relaytest.NewGenerator(seed, workers)
	var envs [][]byte
	for range events {
		envs = append(envs, g.Next())
	}
	publishAll(ctx, t, nc, run.r, uint64(events), envs...)
	state := lineages(ctx, t, run.r)
	if !maps.EqualFunc(state, g.Held(), maps.Equal) {
		t.Fatalf("the first relay's exact state differs from the workers'")
	}
	run.stop()
	if err := <-run.done; err != nil {
		t.Fatalf("Run after graceful stop: %v", err)
	}
	return nc, cfg, g, state
}

// TestRelay_CheckpointRestoresTheExactStateAcrossARestart stores events of
// five workers, stops the relay gracefully (it writes its checkpoint) and,
// while it is down, worker 1 publishes envelopes the relay never sees (a
// gap), worker 2 restarts (empty cache, new publisher id, sequence 0) and
// worker 5 restarts keeping its publisher id (sequence 0 again).
// The restarted relay's first snapshot holds the whole restored state;
// once every worker has sent its next event, workers 3 and 4 (whose next
// sequence proves continuity) hold exactly their blocks, workers 2 and 5
// exactly what they stored since their restart, and worker 1 none of its blocks from
// before the gap: the projection never keeps a block a worker may have
// dropped unseen. Before checkpoints a restarted relay started empty.
func TestRelay_CheckpointRestoresTheExactStateAcrossARestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, cfg, g, before := checkpointed(ctx, t, relaytest.Seed(t, 23), 5, 400, time.Minute)
	blocks := uint64(0)
	for _, lin := range before {
		blocks += uint64(len(lin))
	}

	for range 3 {
		g.NextOf(1) // never delivered: a gap in worker 1's sequence
	}
	g.Restart(2, true)
	g.Restart(5, false)

	run2 := startRelay(t, cfg)
	st, err := statusOf(ctx, run2.r)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if ck := st.Checkpoint; ck.RestoredMembers != 5 || ck.RestoredBlocks != blocks {
		t.Errorf("restored %d members, %d blocks; want 5, %d", ck.RestoredMembers, ck.RestoredBlocks, blocks)
	}
	if got := lineages(ctx, t, run2.r); !maps.EqualFunc(got, before, maps.Equal) {
		t.Errorf("restored exact state differs from the checkpointed one")
	}
	names := Names{Prefix: DefaultPrefix, Domain: 1, DC: 3}
	words, id, err := replay(ctx, nc, names)
	want, werr := run2.r.AppendWords(ctx, nil, 1)
	if err != nil || werr != nil || id.Incarnation != st.Incarnation || !slices.Equal(words, want) {
		t.Errorf("restarted relay's stored snapshot (incarnation %d, want %d; %v, %v) differs from its restored words", id.Incarnation, st.Incarnation, err, werr)
	}
	f := mustFormat(t, names, cfg)
	for _, lin := range before {
		for _, c := range lin {
			if !containsCanonical(f, words, c) {
				t.Fatalf("restored block %#x not in the first snapshot", c)
			}
		}
	}

	publishAll(ctx, t, nc, run2.r, 5, g.NextOf(1), g.NextOf(2), g.NextOf(3), g.NextOf(4), g.NextOf(5))
	got, truth := lineages(ctx, t, run2.r), g.Held()
	for _, w := range []uint64{2, 3, 4, 5} {
		m := kv.Member{Worker: w}
		if !maps.Equal(got[m], truth[m]) {
			t.Errorf("worker %d after the restart: %d mappings, the worker holds %d; want them equal", w, len(got[m]), len(truth[m]))
		}
	}
	m1 := kv.Member{Worker: 1}
	for src := range got[m1] {
		if _, old := before[m1][src]; old {
			t.Errorf("worker 1 (a gap) still maps block %#x from before the restart", src)
		}
		if truth[m1][src] != got[m1][src] {
			t.Errorf("worker 1 maps %#x → %#x, which it does not hold", src, got[m1][src])
		}
	}
	st, err = statusOf(ctx, run2.r)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if ck := st.Checkpoint; ck.Kept != 2 || ck.Cleared != 3 {
		t.Errorf("Checkpoint stats kept %d, cleared %d; want 2 and 3", ck.Kept, ck.Cleared)
	}
	retained := 0
	for _, w := range []uint64{3, 4} {
		retained += len(before[kv.Member{Worker: w}])
	}
	t.Logf("%d of %d blocks restored; %d kept across the restart (workers 3, 4), workers 1 (gap), 2 and 5 (restarts) cleared",
		blocks, blocks, retained)
}

// TestRelay_RestoredMembersWithoutProofAreClearedAfterTheGrace restores a
// checkpoint whose workers send nothing after the restart: their blocks
// are cleared once CheckpointGrace has passed, and published as cleared.
func TestRelay_RestoredMembersWithoutProofAreClearedAfterTheGrace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, cfg, _, _ := checkpointed(ctx, t, relaytest.Seed(t, 29), 3, 100, 300*time.Millisecond)
	run2 := startRelay(t, cfg)
	relaytest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		st, err := statusOf(ctx, run2.r)
		if err != nil {
			return err
		}
		if st.Checkpoint.RestoredMembers == 0 || st.Checkpoint.Cleared != st.Checkpoint.RestoredMembers || st.Producer.TrackedBlocks != 0 {
			return fmt.Errorf("restored %d, cleared %d, %d blocks tracked; want all cleared", st.Checkpoint.RestoredMembers,
				st.Checkpoint.Cleared, st.Producer.TrackedBlocks)
		}
		words, _, err := replay(ctx, nc, Names{Prefix: DefaultPrefix, Domain: 1, DC: 3})
		if err != nil {
			return err
		}
		if slices.ContainsFunc(words, func(w uint64) bool { return w != 0 }) {
			return errors.New("the published words still hold blocks")
		}
		return nil
	})
}

// TestDecodeCheckpoint_RefusesDamageAndOtherVersions round-trips a
// checkpoint and checks that a flipped byte, a cut file, another version,
// trailing bytes and counts past the end are refused with ErrCheckpoint
// (ErrCheckpointVersion for the version) before any publisher is handed on.
func TestDecodeCheckpoint_RefusesDamageAndOtherVersions(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/ckpt"
	// What a writer killed mid-write left: the next write reuses it.
	if err := os.WriteFile(path+".tmp", []byte("torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	pubs := []checkpointPublisher{
		{ID: 7, Sequence: 41, Members: []checkpointMember{{Member: kv.Member{Worker: 1, Rank: 2},
			Mappings: []ckf.Mapping{{Source: 10, Canonical: 100}, {Source: 11, Canonical: 101}}}}},
		{ID: 9, Sequence: 0, Members: []checkpointMember{{Member: kv.Member{Worker: 3}}, {Member: kv.Member{Worker: 4},
			Mappings: []ckf.Mapping{{Source: 12, Canonical: 102}}}}},
	}
	h := checkpointHeader{Domain: 1, DC: 3, Seed: 5, Buckets: 64, Written: time.Unix(1700000000, 0), Publishers: 2}
	if _, err := writeCheckpoint(path, func(cw *checkpointWriter) {
		cw.header(&h)
		for _, p := range pubs {
			cw.publisher(p.ID, p.Sequence, uint32(len(p.Members)))
			for _, m := range p.Members {
				cw.member(m.Member, m.Mappings)
			}
		}
	}); err != nil {
		t.Fatalf("writeCheckpoint: %v", err)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 1 || ents[0].Name() != "ckpt" {
		t.Errorf("checkpoint dir after a write holds %v (%v), want only ckpt (no temporary left behind)", ents, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	var got []checkpointPublisher
	var gotH checkpointHeader
	decode := func(b []byte) error {
		got = nil
		return decodeCheckpoint(b, func(h *checkpointHeader) error { gotH = *h; return nil },
			func(p *checkpointPublisher) error { got = append(got, *p); return nil })
	}
	if err := decode(b); err != nil {
		t.Fatalf("decodeCheckpoint(written file): %v", err)
	}
	if gotH != h || len(got) != 2 || got[0].ID != 7 || got[0].Sequence != 41 || !slices.Equal(got[0].Members[0].Mappings, pubs[0].Members[0].Mappings) ||
		got[1].Members[1].Member.Worker != 4 || len(got[1].Members[0].Mappings) != 0 || got[0].Members[0].Member.Rank != 2 {
		t.Errorf("decodeCheckpoint = %+v %+v, want the written header and records", gotH, got)
	}
	resum := func(b []byte) []byte {
		b = slices.Clone(b)
		body := b[:len(b)-checkpointSumBytes]
		binary.LittleEndian.PutUint64(b[len(body):], xxh3Sum(body))
		return b
	}
	flipped := slices.Clone(b)
	flipped[70] ^= 1
	version := slices.Clone(b)
	binary.LittleEndian.PutUint32(version[8:], CheckpointVersion+1)
	manyMembers := slices.Clone(b)
	binary.LittleEndian.PutUint32(manyMembers[checkpointHeaderBytes+16:], 1<<30)
	trailing := resum(append(slices.Clone(b[:len(b)-checkpointSumBytes]), 0, 0, 0, 0, 0, 0, 0, 0, 0))
	for name, c := range map[string]struct {
		b    []byte
		want error
	}{
		"flipped byte":     {flipped, ErrCheckpoint},
		"cut":              {b[:len(b)-3], ErrCheckpoint},
		"empty":            {nil, ErrCheckpoint},
		"other version":    {version, ErrCheckpointVersion},
		"members too many": {resum(manyMembers), ErrCheckpoint},
		"trailing bytes":   {trailing, ErrCheckpoint},
	} {
		if err := decode(c.b); !errors.Is(err, c.want) {
			t.Errorf("decodeCheckpoint(%s) = %v, want %v", name, err, c.want)
		}
	}
}

// mustFormat returns the addressing format of cfg's first pool.
func mustFormat(t *testing.T, _ Names, cfg Config) *ckf.Format {
	t.Helper()
	p := cfg.Pools[0]
	n, err := ckf.BucketCount(p.ExpectedBlocks)
	if err != nil {
		t.Fatalf("BucketCount: %v", err)
	}
	seed := p.Seed
	if seed == 0 {
		seed = ckf.DefaultSeed
	}
	f, err := ckf.NewFormat(seed, n)
	if err != nil {
		t.Fatalf("NewFormat: %v", err)
	}
	return f
}

// containsCanonical reports whether words (a pool's filter) hold c's
// fingerprint in either of its buckets.
func containsCanonical(f *ckf.Format, words []uint64, c uint64) bool {
	p := f.Probe(c)
	return ckf.Contains(words[p.A], p.FP) || ckf.Contains(words[p.B], p.FP)
}

// xxh3Sum is the checkpoint's checksum of body.
func xxh3Sum(body []byte) uint64 { return xxh3.Hash(body) }

// planeFeed delivers the envelopes sent on it as Dynamo ZMQ event-plane
// messages of one source (direct mode, any publisher id).
type planeFeed struct {
	envs chan []byte
	src  *Source
}

func newPlaneFeed() *planeFeed {
	return &planeFeed{envs: make(chan []byte, 1024), src: &Source{Name: "test plane",
		Scope: dynamo.Scope{Namespace: "dynamo", Component: "backend", Endpoint: dynamo.DefaultEndpoint}}}
}

func (f *planeFeed) String() string { return f.src.Name }

func (f *planeFeed) Run(ctx context.Context, deliver func(Message) bool) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-f.envs:
			env, err := dynamo.DecodeEnvelope(b)
			if err != nil {
				return err
			}
			framed := append(binary.BigEndian.AppendUint32([]byte{1}, uint32(len(b))), b...)
			frames := [][]byte{[]byte(dynamo.EventTopic), binary.BigEndian.AppendUint64(nil, env.PublisherID),
				binary.BigEndian.AppendUint64(nil, env.Sequence), framed}
			if !deliver(Message{Kind: KindPlane, Frames: frames, Source: f.src}) {
				return nil
			}
		}
	}
}

// TestRelay_CheckpointProvesContinuityOnTheZMQEventPlane is the restart
// over Dynamo's ZMQ event plane (a Feed): the publisher ids and sequences
// come from the plane's frames, and a worker whose next message carries
// the next sequence keeps its restored blocks exactly while one with a gap
// is cleared.
func TestRelay_CheckpointProvesContinuityOnTheZMQEventPlane(t *testing.T) {
	seed := relaytest.Seed(t, 31)
	_, nc := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	start := func() (*running, *planeFeed) {
		cfg := testConfig(nc)
		cfg.CheckpointDir, cfg.CheckpointGrace = dir, time.Minute
		feed := newPlaneFeed()
		cfg.Pools[0].Feeds = []Feed{feed}
		return startRelay(t, cfg), feed
	}
	send := func(r *Relay, feed *planeFeed, events uint64, envs ...[]byte) {
		for _, e := range envs {
			feed.envs <- e
		}
		awaitIntake(ctx, t, r, events)
	}
	run, feed := start()
	g := relaytest.NewGenerator(seed, 3)
	var envs [][]byte
	for range 150 {
		envs = append(envs, g.Next())
	}
	send(run.r, feed, 150, envs...)
	before := lineages(ctx, t, run.r)
	run.stop()
	if err := <-run.done; err != nil {
		t.Fatalf("Run after graceful stop: %v", err)
	}
	g.NextOf(1) // never delivered: a gap
	run2, feed2 := start()
	if got := lineages(ctx, t, run2.r); !maps.EqualFunc(got, before, maps.Equal) {
		t.Errorf("restored exact state differs from the checkpointed one")
	}
	send(run2.r, feed2, 3, g.NextOf(1), g.NextOf(2), g.NextOf(3))
	got, truth := lineages(ctx, t, run2.r), g.Held()
	for _, w := range []uint64{2, 3} {
		if m := (kv.Member{Worker: w}); !maps.Equal(got[m], truth[m]) {
			t.Errorf("worker %d after the restart: %d mappings, the worker holds %d; want them equal", w, len(got[m]), len(truth[m]))
		}
	}
	for src := range got[kv.Member{Worker: 1}] {
		if _, old := before[kv.Member{Worker: 1}][src]; old {
			t.Errorf("worker 1 (a gap) still maps block %#x from before the restart", src)
		}
	}
	if st, err := statusOf(ctx, run2.r); err != nil || st.Checkpoint.Kept != 2 || st.Checkpoint.Cleared != 1 {
		t.Errorf("Checkpoint stats %+v (%v), want 2 kept and 1 cleared", st.Checkpoint, err)
	}
}
