package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/consume"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// injector is the consumer's transport hook: it drops, duplicates or
// reorders one delta frame of one DC, or holds every frame of one DC at a
// gate (a slow consumer).
type injector struct {
	mu     sync.Mutex
	dc     relayproto.DCID
	mode   string // "drop", "dup", "swap" or ""
	held   []byte
	hits   int
	gateDC relayproto.DCID
	gate   chan struct{}
}

func (in *injector) filter(dc relayproto.DCID, frame []byte) [][]byte {
	in.mu.Lock()
	gate := in.gate
	if dc != in.gateDC {
		gate = nil
	}
	in.mu.Unlock()
	if gate != nil {
		<-gate
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if m, _, err := wire.Decode(frame); dc != in.dc || in.mode == "" || err != nil || m.Type() != relayproto.FrameDelta {
		return [][]byte{frame}
	}
	switch in.mode {
	case "drop":
		in.mode, in.hits = "", in.hits+1
		return nil
	case "dup":
		in.mode, in.hits = "", in.hits+1
		return [][]byte{frame, frame}
	default: // swap: hold this one back, send it after the next
		if in.held == nil {
			in.held = slices.Clone(frame)
			return nil
		}
		held := in.held
		in.held, in.mode, in.hits = nil, "", in.hits+1
		return [][]byte{frame, held}
	}
}

func (in *injector) arm(dc relayproto.DCID, mode string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.dc, in.mode = dc, mode
	return in.hits
}

func (in *injector) hitCount() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.hits
}

func (in *injector) block(dc relayproto.DCID) {
	in.mu.Lock()
	in.gateDC, in.gate = dc, make(chan struct{})
	in.mu.Unlock()
}

// release opens the gate block closed (once; later calls do nothing).
func (in *injector) release() {
	in.mu.Lock()
	if in.gate != nil {
		close(in.gate)
		in.gate = nil
	}
	in.mu.Unlock()
}

func TestE2E_LanesConvergeThroughEveryFault(t *testing.T) {
	seed := relaytest.Seed(t, 2026)
	names := defaultSites
	if os.Getenv("GOINDEX_E2E_FULL") != "" {
		_, all := rttMatrix(t)
		names = slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == routerSite })
	}
	// The last site keeps a small delta log, so a slow consumer can fall
	// past its retention.
	small := names[len(names)-1]
	top := newTopology(t, seed, names, map[string]int64{small: 48 << 10})
	in := &injector{}
	rp := &replica{path: filepath.Join(top.dir, "replica")}
	t.Cleanup(func() {
		if rp.r != nil {
			rp.r.Close()
		}
	})
	cons := top.startConsumer(rp.path, in.filter)

	feedAll := func(n int) {
		for _, s := range top.sites {
			top.feed(s, n)
		}
	}
	// untouched checks that lanes other than the faulted one kept their
	// subscription: no new snapshot, no fault.
	untouched := func(step string, faulted int, before []consume.LaneStatus) {
		t.Helper()
		after := cons.c.Status()
		for i := range after {
			if i == faulted {
				continue
			}
			if after[i].Snapshots != before[i].Snapshots || after[i].Faults != before[i].Faults {
				t.Errorf("%s on lane %d disturbed lane %d (%s): snapshots %d → %d, faults %d → %d", step, faulted, i,
					top.sites[i].name, before[i].Snapshots, after[i].Snapshots, before[i].Faults, after[i].Faults)
			}
		}
	}

	feedAll(300)
	top.settle(t, rp, "warm-up")

	t.Run("DroppedDuplicatedReorderedDeltas", func(t *testing.T) {
		s := top.sites[0]
		for _, mode := range []string{"drop", "dup", "swap"} {
			before := cons.c.Status()
			hits := in.arm(s.id, mode)
			for in.hitCount() == hits {
				feedAll(16)
				for _, o := range top.sites {
					top.ingested(t, o)
				}
				settleOr := func() error {
					if in.hitCount() != hits {
						return nil
					}
					return top.converged(rp)
				}
				relaytest.CheckFor(t, wait, pollStep, settleOr)
			}
			top.settle(t, rp, mode)
			after := cons.c.Status()
			if faulted := after[0].Faults > before[0].Faults; faulted != (mode != "dup") {
				t.Errorf("%s delta at %s: lane faults %d → %d, want a fault only when not a duplicate", mode, s.name, before[0].Faults, after[0].Faults)
			}
			untouched(mode, 0, before)
		}
	})

	t.Run("RelayKilledAndRestarted", func(t *testing.T) {
		s := top.sites[1]
		before := cons.c.Status()
		old := before[1].Incarnation
		s.current().Close()
		<-s.done
		top.startRelay(t, s)
		s.gen.Forget() // the new relay starts with no exact state
		feedAll(200)
		top.settle(t, rp, "relay restart")
		if st := cons.c.Status()[1]; st.Incarnation == old || st.Snapshots <= before[1].Snapshots {
			t.Errorf("lane 1 after the relay restart: incarnation %d (was %d), snapshots %d (were %d); want a new identity and a re-snapshot",
				st.Incarnation, old, st.Snapshots, before[1].Snapshots)
		}
		untouched("relay restart", 1, before)
	})

	t.Run("NATSServerRestarted", func(t *testing.T) {
		s := top.sites[2]
		before := cons.c.Status()
		if err := s.srv.Restart(); err != nil {
			t.Fatalf("restart %s: %v", s.name, err)
		}
		top.waitPing(t, s)
		feedAll(200)
		top.settle(t, rp, "nats restart")
		untouched("nats restart", 2, before)
	})

	t.Run("SlowConsumerCatchesUpFromTheLog", func(t *testing.T) {
		s := top.sites[len(top.sites)-1]
		lane := len(top.sites) - 1
		before := cons.c.Status()
		in.block(s.id)
		defer in.release() // a failed step must not leave the lane blocked
		top.feed(s, 60)
		// The other lanes keep converging while this one is stalled.
		for _, o := range top.sites[:lane] {
			top.feed(o, 100)
		}
		for _, o := range top.sites {
			top.ingested(t, o)
		}
		relaytest.CheckFor(t, wait, pollStep, func() error {
			err := top.converged(rp)
			if err == nil {
				return fmt.Errorf("lane %d converged while its ingestor was blocked", lane)
			}
			for i := range lane {
				if want := fmt.Sprintf("lane %d ", i); len(err.Error()) >= len(want) && err.Error()[:len(want)] == want {
					return err
				}
			}
			return nil
		})
		in.release()
		top.settle(t, rp, "slow consumer")
		after := cons.c.Status()[lane]
		if after.Snapshots != before[lane].Snapshots || after.Faults != before[lane].Faults {
			t.Errorf("slow lane %d: snapshots %d → %d, faults %d → %d; want a catch-up from the log without a re-snapshot",
				lane, before[lane].Snapshots, after.Snapshots, before[lane].Faults, after.Faults)
		}
	})

	t.Run("SlowConsumerPastRetentionReSnapshots", func(t *testing.T) {
		s := top.sites[len(top.sites)-1]
		lane := len(top.sites) - 1
		before := cons.c.Status()
		js, err := jetstream.New(s.relayNC)
		if err != nil {
			t.Fatalf("jetstream: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		stream, err := js.Stream(ctx, relay.Names{Prefix: relay.DefaultPrefix, Domain: domain, DC: s.id}.Stream())
		if err != nil {
			t.Fatalf("delta log of %s: %v", s.name, err)
		}
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatalf("delta log info: %v", err)
		}
		// Whatever the lane has not pulled yet is past this position.
		gone := info.State.LastSeq + pullMessages + 1
		in.block(s.id)
		defer in.release() // a failed step must not leave the lane blocked
		// Publish until the 48 KiB log has dropped everything the stalled
		// lane still needs, at the relay's pace: a batch more only once it
		// took the last one (publishing ahead of a slow relay would queue
		// far more events than the log needs, and fill the filter). Each
		// batch moves the log on, or the relay published nothing for a
		// whole wait.
		last, moved := info.State.LastSeq, time.Now()
		for info.State.FirstSeq <= gone {
			top.feed(s, 100)
			top.ingested(t, s)
			c, cancel := context.WithTimeout(context.Background(), wait)
			err := s.current().Flush(c, domain)
			if err == nil {
				info, err = stream.Info(c)
			}
			cancel()
			if err != nil {
				t.Fatalf("flush %s and read its log's state: %v", s.name, err)
			}
			if info.State.LastSeq > last {
				last, moved = info.State.LastSeq, time.Now()
			} else if time.Since(moved) > wait {
				t.Fatalf("log of %s stays at %d (starts at %d, want past %d)", s.name, last, info.State.FirstSeq, gone)
			}
		}
		in.release()
		top.settle(t, rp, "past retention")
		if after := cons.c.Status()[lane]; after.Snapshots <= before[lane].Snapshots {
			t.Errorf("lane %d past retention: snapshots %d → %d, want a re-snapshot", lane, before[lane].Snapshots, after.Snapshots)
		}
		untouched("past retention", lane, before)
	})

	t.Run("ConsumerRestartedCold", func(t *testing.T) {
		cons.stop()
		if err := cons.wait(); err != nil {
			t.Fatalf("consumer Run: %v", err)
		}
		feedAll(100)
		cons = top.startConsumer(rp.path, in.filter)
		top.settle(t, rp, "cold restart")
		r, err := rp.reader()
		if err != nil {
			t.Fatalf("reader: %v", err)
		}
		if g := r.Info().Generation; g != 2 {
			t.Errorf("replica generation after a cold restart = %d, want 2", g)
		}
		for i, st := range cons.c.Status() {
			if st.Snapshots != 1 {
				t.Errorf("cold lane %d: %d snapshots, want 1", i, st.Snapshots)
			}
		}
	})

	t.Run("GracefulDrain", func(t *testing.T) {
		feedAll(50)
		top.settle(t, rp, "before the drain") // every event reached its relay
		for _, s := range top.sites {
			s.cancel()
		}
		for _, s := range top.sites {
			if err := <-s.done; err != nil {
				t.Errorf("relay %s: %v", s.name, err)
			}
		}
		relaytest.CheckFor(t, wait, pollStep, func() error {
			for i, st := range cons.c.Status() {
				if !st.Drained {
					return fmt.Errorf("lane %d (%s) has not acknowledged a drain marker: %+v", i, top.sites[i].name, st)
				}
			}
			return nil
		})
		top.settle(t, rp, "drained")
		r, _ := rp.reader()
		for i := range top.sites {
			if li := r.Lane(i); li.RTT <= 0 || li.Load.At.IsZero() {
				t.Errorf("lane %d record: RTT %v, load at %v; want both measured", i, li.RTT, li.Load.At)
			} else if min := top.sites[i].rtt; li.RTT < min {
				t.Errorf("lane %d (%s) RTT %v is below the injected %v", i, top.sites[i].name, li.RTT, min)
			}
		}
	})

	// After every fault and the drain, the real libgoindex.so (in a child
	// process) attaches the consumer's replica and finds every tracked
	// block at no less than its exact depth in every lane.
	t.Run("LibraryProbesTheReplica", func(t *testing.T) {
		bin, env := libraryHost(t, t.TempDir())
		top.settle(t, rp, "before the library probes")
		top.probeThroughLibrary(t, rp, bin, env)
	})
}
