package kvrelay

import (
	"errors"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/kvrelay/cbi1"
	pb "github.com/goindex/goindex/bridge/kvrelay/kvrelaypb"
	"github.com/goindex/goindex/internal/testseed"
)

// Every stream rule of the contract, one frame at a time: what breaks one
// is ErrInvalid or a CBI1 error, and never reaches the lane.
func TestFollower_StepEnforcesTheStreamRules(t *testing.T) {
	p := producerOf(3, 1)
	h := header(p, 5)
	words := make([]uint64, testBuckets)
	chunk, _ := cbi1.AppendSnapshotChunk(nil, h, 0, 1, 0, words)
	delta := func(base, seq uint64) []byte {
		hd := h
		hd.Epoch = seq
		b, _ := cbi1.AppendDelta(nil, hd, base, []cbi1.Image{{Bucket: 1, Word: 9}})
		return b
	}
	msg := func(kind pb.FilterUpdateKind, base, seq uint64, payload []byte) *pb.FilterUpdate {
		return &pb.FilterUpdate{ProtocolVersion: ProtocolVersion, Relay: &pb.RelayIdentity{}, Producer: p, BaseSequence: base,
			Sequence: seq, Kind: kind, Payload: payload, ContractMarker: ContractMarker}
	}
	snap := msg(pb.FilterUpdateKind_FILTER_UPDATE_KIND_SNAPSHOT_CHUNK, 5, 5, chunk)
	otherDC := producerOf(4, 1)
	wrongDC := msg(pb.FilterUpdateKind_FILTER_UPDATE_KIND_SNAPSHOT_CHUNK, 5, 5, chunk)
	wrongDC.Producer = otherDC
	for _, c := range []struct {
		name string
		msgs []*pb.FilterUpdate
		want error
	}{
		{"delta before the snapshot", []*pb.FilterUpdate{msg(pb.FilterUpdateKind_FILTER_UPDATE_KIND_DELTA, 5, 6, delta(5, 6))}, ErrInvalid},
		{"gap", []*pb.FilterUpdate{snap, msg(pb.FilterUpdateKind_FILTER_UPDATE_KIND_DELTA, 6, 7, delta(6, 7))}, ErrInvalid},
		{"heartbeat past installed", []*pb.FilterUpdate{snap, msg(pb.FilterUpdateKind_FILTER_UPDATE_KIND_HEARTBEAT, 6, 6, nil)}, ErrInvalid},
		{"another producer", []*pb.FilterUpdate{wrongDC}, ErrInvalid},
		{"unspecified kind", []*pb.FilterUpdate{msg(pb.FilterUpdateKind_FILTER_UPDATE_KIND_UNSPECIFIED, 5, 5, chunk)}, ErrInvalid},
		{"chunk after the snapshot", []*pb.FilterUpdate{snap, snap}, ErrInvalid},
		{"payload of another sequence", []*pb.FilterUpdate{snap, msg(pb.FilterUpdateKind_FILTER_UPDATE_KIND_DELTA, 5, 6, delta(5, 7))}, ErrInvalid},
		{"corrupt payload", []*pb.FilterUpdate{msg(pb.FilterUpdateKind_FILTER_UPDATE_KIND_SNAPSHOT_CHUNK, 5, 5, append([]byte(nil), chunk[:60]...))}, cbi1.ErrChecksum},
		{"wrong marker", []*pb.FilterUpdate{{ProtocolVersion: 1, Relay: &pb.RelayIdentity{}, ContractMarker: 1}}, ErrContract},
	} {
		l := &lane{}
		f := follower{producer: p, lane: l}
		var err error
		for _, m := range c.msgs {
			if err = f.step(m); err != nil {
				break
			}
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: step = %v, want %v", c.name, err, c.want)
		}
	}
	l := &lane{}
	f := follower{producer: p, lane: l}
	for _, m := range []*pb.FilterUpdate{snap, msg(pb.FilterUpdateKind_FILTER_UPDATE_KIND_HEARTBEAT, 5, 5, nil),
		msg(pb.FilterUpdateKind_FILTER_UPDATE_KIND_DELTA, 5, 6, delta(5, 6))} {
		if err := f.step(m); err != nil {
			t.Fatalf("step(%v) = %v", m.GetKind(), err)
		}
	}
	if l.seq != 6 || l.words[1] != 9 {
		t.Errorf("lane at %d with word 1 = %d, want 6 and 9", l.seq, l.words[1])
	}
}

// refusingLane is a test lane whose installs fail while refuse is set (a
// lane the consumer cannot write), so every session ends without one, and
// whose deltas fail while refuseDeltas is, so every session ends right
// after its install.
type refusingLane struct {
	lane
	refuse, refuseDeltas atomic.Bool
}

func (l *refusingLane) Install(p *pb.ProducerIdentity, seq uint64, words []uint64) error {
	if l.refuse.Load() {
		return errors.New("test lane: install refused")
	}
	return l.lane.Install(p, seq, words)
}

func (l *refusingLane) Apply(base, seq uint64, images []cbi1.Image) error {
	if l.refuseDeltas.Load() {
		return errors.New("test lane: delta refused")
	}
	return l.lane.Apply(base, seq, images)
}

func (l *refusingLane) sessions() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.retired)
}

// retries records what Follow's OnRetry reports.
type retries struct {
	mu      sync.Mutex
	failing []int
	waits   []time.Duration
}

func (r *retries) note(_ error, failing int, wait time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing, r.waits = append(r.failing, failing), append(r.waits, wait)
}

func (r *retries) since(i int) ([]int, []time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.failing[i:]), slices.Clone(r.waits[i:])
}

// Sessions that install no snapshot back off: over a second, retrying from
// 1 ms, Follow starts a logarithmic number of them where it used to start
// one every millisecond. One that served its install for MaxRetry starts
// the backoff over: the wait after it is 1 ms again.
func TestFollow_BacksOffWhileSessionsInstallNothingAndStartsOverAfterOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.For(t, 29), 3))
	m := newModel(3)
	conn := serve(t, m)
	l := &refusingLane{}
	l.refuse.Store(true)
	var r retries
	const first, most, window = time.Millisecond, 2 * time.Second, time.Second
	started := time.Now()
	stop := follow(t, conn, FollowConfig{SubscriberID: "test", DCID: 3, Lane: l, Retry: first, MaxRetry: most, OnRetry: r.note})
	defer stop()
	<-time.After(window) // what is counted is the sessions within it
	n, elapsed := l.sessions(), time.Since(started)
	// Each wait is at least half its step: k waits take (2^k − 1)·first/2.
	if most := bits.Len64(uint64(2*elapsed/first)) + 1; n == 0 || n > most {
		t.Errorf("Follow(Retry %v) with every install refused for %v: %d sessions, want 1 to %d (backing off)", first, elapsed, n, most)
	}

	l.refuse.Store(false)
	waitFor(t, "the lane installs once installs are taken", func() bool { return l.converged(m) })
	<-time.After(most) // served for MaxRetry
	before, _ := r.since(0)
	m.mu.Lock()
	m.gapOnce = true
	m.mu.Unlock()
	m.publish(rng, 3) // a lost delta ends the session that installed
	var failing []int
	var waits []time.Duration
	waitFor(t, "the session that served to end", func() bool {
		failing, waits = r.since(len(before))
		return len(waits) > 0
	})
	if failing[0] != 1 || waits[0] > first {
		t.Errorf("after a session that served for %v: %d in a row, wait %v; want 1 and at most %v (started over)", most, failing[0], waits[0], first)
	}
}

// Sessions that fail right after their install (every delta refused)
// never serve for MaxRetry, so the wait keeps doubling: Follow does not
// fetch a snapshot every Retry.
func TestFollow_BacksOffWhileEverySessionFailsAfterItsInstall(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.For(t, 31), 3))
	m := newModel(3)
	conn := serve(t, m)
	l := &refusingLane{}
	l.refuseDeltas.Store(true)
	var r retries
	const first = time.Millisecond
	stop := follow(t, conn, FollowConfig{SubscriberID: "test", DCID: 3, Lane: l, Retry: first, MaxRetry: time.Hour, OnRetry: r.note})
	defer stop()
	done := make(chan struct{})
	defer close(done)
	go func() { // a delta every millisecond: each session's install is followed by one at once
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				m.publish(rng, 1)
			}
		}
	}()
	const sessions = 6
	var failing []int
	var waits []time.Duration
	waitFor(t, "six sessions ended", func() bool {
		failing, waits = r.since(0)
		return len(waits) >= sessions
	})
	l.mu.Lock()
	installs := l.lane.installs
	l.mu.Unlock()
	if installs < sessions {
		t.Fatalf("%d installs in %d sessions: the sessions did not install", installs, len(waits))
	}
	// The k-th wait in a row is at least half of 2^(k-1) ms.
	if got, want := waits[sessions-1], first<<(sessions-1)/2; failing[sessions-1] != sessions || got < want {
		t.Errorf("sessions failing right after their install: %v in a row, waits %v; the %dth %v, want %d in a row and at least %v",
			failing, waits, sessions, got, sessions, want)
	}
}
