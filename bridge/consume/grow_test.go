package consume

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/goindex/goindex/internal/syncbuf"
)

// TestConsumer_AddingALaneKeepsTheOthersReady serves two lanes, then a
// third DC's relay answers discovery: while the consumer adds its lane, a
// reader that follows the replica path as routers do (Stale, Attach again)
// always finds lanes 0 and 1 ready and every block their workers hold,
// in every generation it maps; the two lanes install no second snapshot,
// the third converges, and afterwards all three follow new events. Before
// lanes were carried, the new generation resynced every lane and the
// reader saw the two lanes leave.
func TestConsumer_AddingALaneKeepsTheOthersReady(t *testing.T) {
	seed := relaytest.Seed(t, 17)
	_, nc := natstest.Start(t)
	first, second := startRelay(t, nc, 3, seed), startRelay(t, nc, 5, seed)
	path := filepath.Join(t.TempDir(), "replica")
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, Path: path, DiscoverFor: 200 * time.Millisecond,
		DiscoverEvery: 20 * time.Millisecond, PingEvery: 20 * time.Millisecond, Logger: logOnFailure(t)})
	if got := c.Lanes(); !slices.Equal(got, []relayproto.DCID{3, 5}) {
		t.Fatalf("discovered lanes %v, want [3 5]", got)
	}
	serving := []*dcRelay{first, second}
	for _, d := range serving {
		d.feed(t, nc, 200)
	}
	allConverged := func(want []*dcRelay) func() error {
		return func() error {
			r, err := shm.Attach(path)
			if err != nil {
				return err
			}
			defer r.Close()
			if got := len(r.Info().DCs); got != len(want) {
				return fmt.Errorf("replica file has %d lanes, want %d", got, len(want))
			}
			for i, d := range want {
				if err := converged(r, i, d); err != nil {
					return err
				}
			}
			return nil
		}
	}
	relaytest.CheckFor(t, wait, 10*time.Millisecond, allConverged(serving))
	var tracked [2][]uint64
	for i, d := range serving {
		tracked[i] = slices.Clone(d.gen.Tracked())
	}
	if len(tracked[0]) == 0 || len(tracked[1]) == 0 {
		t.Fatalf("tracked blocks %d and %d, want some in both lanes", len(tracked[0]), len(tracked[1]))
	}

	// The reader, from before the third relay starts until it has checked
	// the grown generation; a test that fails before stops it first (the
	// consumer's cleanup retires every lane, which it must not report).
	var stop, abort atomic.Bool
	var checks, generations atomic.Uint64
	var wg sync.WaitGroup
	defer func() { abort.Store(true); wg.Wait() }()
	wg.Go(func() {
		r, err := shm.Attach(path)
		if err != nil {
			t.Errorf("Attach: %v", err)
			return
		}
		defer func() { r.Close() }()
		for !abort.Load() {
			ready := r.Ready()
			if ready&0b11 != 0b11 {
				t.Errorf("generation %d: ready mask %#b, want lanes 0 and 1 ready throughout", r.Info().Generation, ready)
				return
			}
			f := r.Format()
			for lane, hs := range tracked {
				for _, h := range hs {
					if r.Table().Probe(f.Probe(h), 1<<lane) == 0 {
						t.Errorf("generation %d: lane %d's block %#x not found", r.Info().Generation, lane, h)
						return
					}
				}
			}
			checks.Add(1)
			if len(r.Info().DCs) == 3 && stop.Load() {
				return
			}
			if stale, _ := r.Stale(); stale {
				nr, err := shm.Attach(path)
				if err != nil {
					t.Errorf("Attach the new generation: %v", err)
					return
				}
				r.Close()
				r = nr
				generations.Add(1)
				continue // check the new generation at once
			}
			// A pause between checks, as a router's are: a reader spinning
			// flat out starves the relays and the consumer of a 2-core
			// machine (seen: the third lane not converged within 30 s
			// under GOMAXPROCS=1 -race, its relay's events still queued).
			time.Sleep(readerPause)
		}
	})
	relaytest.CheckFor(t, wait, time.Millisecond, func() error {
		if checks.Load() == 0 {
			return fmt.Errorf("the reader has not checked the file yet")
		}
		return nil
	})

	start := time.Now()
	third := startRelay(t, nc, 7, seed)
	third.feed(t, nc, 200)
	relaytest.CheckFor(t, wait, 10*time.Millisecond, allConverged([]*dcRelay{first, second, third}))
	t.Logf("third lane ready and converged %v after its relay started", time.Since(start).Round(time.Millisecond))
	stop.Store(true)
	wg.Wait()
	if generations.Load() == 0 {
		t.Errorf("the reader never followed the grown generation")
	}
	for _, st := range c.Status()[:2] {
		if st.Snapshots != 1 || st.Resyncs != 0 {
			t.Errorf("lane %d (DC %d) after adding a lane: %d snapshots, %d resyncs; want 1 and 0 (carried, not resynced)",
				st.Lane, st.DC, st.Snapshots, st.Resyncs)
		}
	}
	all := []*dcRelay{first, second, third}
	for _, d := range all {
		d.feed(t, nc, 200)
	}
	relaytest.CheckFor(t, wait, 10*time.Millisecond, allConverged(all))
}

// TestConsumer_AddingALaneResyncsALaneThatWasNotServing adds a third
// relay's lane while the second lane's relay is down (its lane retrying,
// not following a log): the first lane is carried, the second is not, and
// once its relay is back it syncs and converges again in the grown file
// (it used to stay claimed by the old core and never run again).
func TestConsumer_AddingALaneResyncsALaneThatWasNotServing(t *testing.T) {
	seed := relaytest.Seed(t, 19)
	_, nc := natstest.Start(t)
	first, second := startRelay(t, nc, 3, seed), startRelay(t, nc, 5, seed)
	path := filepath.Join(t.TempDir(), "replica")
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, Path: path, DiscoverFor: 200 * time.Millisecond,
		DiscoverEvery: 20 * time.Millisecond, PingEvery: 20 * time.Millisecond, RetryEvery: 20 * time.Millisecond,
		Logger: logOnFailure(t)})
	for _, d := range []*dcRelay{first, second} {
		d.feed(t, nc, 100)
	}
	lanesConverged := func(want ...*dcRelay) func() error {
		return func() error {
			r, err := shm.Attach(path)
			if err != nil {
				return err
			}
			defer r.Close()
			if got := len(r.Info().DCs); got != 3 && len(want) == 3 {
				return fmt.Errorf("replica file has %d lanes, want 3", got)
			}
			for i, d := range want {
				if d == nil {
					continue
				}
				if err := converged(r, i, d); err != nil {
					return err
				}
			}
			return nil
		}
	}
	relaytest.CheckFor(t, wait, 10*time.Millisecond, lanesConverged(first, second))
	second.r.Close()
	second.stop()
	// A bad frame in its log faults lane 1; with its relay down, it then
	// retries instead of following a log.
	if err := nc.Publish(relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 5}.DeltaSubject(), []byte("junk")); err != nil {
		t.Fatalf("publish a bad frame: %v", err)
	}
	relaytest.CheckFor(t, wait, 10*time.Millisecond, func() error {
		if st := c.Status()[1]; st.Resyncs == 0 || st.State == "READY" {
			return fmt.Errorf("lane 1 %s after %d resyncs, want its relay's loss seen", st.State, st.Resyncs)
		}
		return nil
	})
	third := startRelay(t, nc, 7, seed)
	third.feed(t, nc, 100)
	relaytest.CheckFor(t, wait, 10*time.Millisecond, lanesConverged(first, nil, third))
	back := startRelay(t, nc, 5, seed)
	back.feed(t, nc, 100)
	relaytest.CheckFor(t, wait, 10*time.Millisecond, lanesConverged(first, back, third))
	if st := c.Status()[0]; st.Snapshots != 1 {
		t.Errorf("lane 0 installed %d snapshots, want 1 (carried)", st.Snapshots)
	}
}

// readerPause spaces the checks of the reader that follows the replica path
// while a lane is added.
const readerPause = time.Millisecond

// logOnFailure returns a logger whose lines the test prints only if it
// fails, or always with GOINDEX_TEST_LOGS set (to read the carried lanes'
// pauses: go test -v -run AddingALane).
func logOnFailure(t *testing.T) *slog.Logger {
	logs := &syncbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("GOINDEX_TEST_LOGS") != "" {
			t.Logf("consumer logs:\n%s", logs.String())
		}
	})
	return debugLogger(logs)
}
