package zmqfeed

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/goindex/goindex/bridge/discovery"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/goindex/kv"
)

const pubA = 1<<53 - 11 // publisher ids are masked to 53 bits upstream

func newPlane(t *testing.T, cfg PlaneConfig) *Plane {
	t.Helper()
	if cfg.Scope.Namespace == "" {
		cfg.Scope = testScope
	}
	cfg.Logger = testLogger()
	p, err := NewPlane(cfg)
	if err != nil {
		t.Fatalf("NewPlane: %v", err)
	}
	return p
}

// TestPlane_LatePythonPublisherIsTrackedAndBadMessagesCounted starts the
// relay first, then a libzmq publisher (Debian's python3-zmq) on the
// endpoint it connects to: its batches, single events, a gap and a load
// sample are taken, and frames or identities that disagree are dropped and
// counted by reason. The relay's filter equals a producer fed the events.
func TestPlane_LatePythonPublisherIsTrackedAndBadMessagesCounted(t *testing.T) {
	ep := freeEndpoint(t)
	r := startRelay(t, newPlane(t, PlaneConfig{Publishers: []discovery.Publisher{{Endpoint: ep}}}))
	py := startPy(t, "dynamo_pub.py", "--bind", ep)
	py.do("warm", msg{"pub": pubA, "seq": 0, "payload": []any{storedMap(1, 1, 0, nil, [2]uint64{0xA1, 0x11}, [2]uint64{0xA2, 0x12})}})
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Intake.Events == 0 {
			return errors.New("the publisher's first message not taken yet")
		}
		return nil
	})
	steps := []msg{
		// v1.4 batch: a child run and a removal.
		{"pub": pubA, "seq": 1, "payload": []any{storedMap(1, 2, 0, ptr(0xA2), [2]uint64{0xA3, 0x13}), removedMap(1, 3, 0, 0xA1)}},
		// One event, not in a list (v1.3), after a lost message (gap 1).
		{"pub": pubA, "seq": 3, "payload": storedMap(2, 1, 1, nil, [2]uint64{0xB1, 0x21})},
		// Identity: frame publisher, envelope topic; frames: 3 parts, version 2.
		{"pub": pubA, "seq": 4, "frame_pub": pubA + 1, "payload": []any{storedMap(9, 1, 0, nil, [2]uint64{0xC1, 0x31})}},
		{"pub": pubA, "seq": 5, "env_topic": "kv_metrics", "payload": []any{storedMap(9, 1, 0, nil, [2]uint64{0xC1, 0x31})}},
		{"pub": pubA, "seq": 6, "parts": 3, "payload": []any{storedMap(9, 1, 0, nil, [2]uint64{0xC1, 0x31})}},
		{"pub": pubA, "seq": 7, "version": 2, "payload": []any{storedMap(9, 1, 0, nil, [2]uint64{0xC1, 0x31})}},
		// A load sample on the same socket (Dynamo uses another publisher id).
		{"pub": pubA + 2, "seq": 0, "topic": "kv_metrics", "payload": map[string]any{"worker_id": 1, "dp_rank": 0,
			"active_decode_blocks": nil, "active_prefill_tokens": nil, "kv_used_blocks": 55}},
		{"pub": pubA, "seq": 8, "payload": []any{storedMap(2, 2, 1, ptr(0xB1), [2]uint64{0xB2, 0x22})}},
	}
	for _, m := range steps {
		py.do("send", m)
	}
	st := waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Intake.Events < 5 || st.Intake.LoadSamples < 1 {
			return fmt.Errorf("intake %+v: want 5 events and a load sample", st.Intake)
		}
		return nil
	})
	in := st.Intake
	// Seqs 4–7 were dropped before the sequence check: 3 → 8 misses four,
	// 1 → 3 one.
	if in.Identity != 2 || in.BadFrames != 2 || in.Gaps != 5 || in.Malformed != 0 || st.Rejected != 0 {
		t.Errorf("intake = %+v, rejected %d; want 2 identity mismatches, 2 bad frames, 5 gaps, nothing malformed or rejected", in, st.Rejected)
	}
	checkWords(t, r, []kv.Event{
		storedKV(1, 1, 0, nil, [2]uint64{0xA1, 0x11}, [2]uint64{0xA2, 0x12}),
		storedKV(1, 2, 0, ptr(0xA2), [2]uint64{0xA3, 0x13}), removedKV(1, 3, 0, 0xA1),
		storedKV(2, 1, 1, nil, [2]uint64{0xB1, 0x21}),
		storedKV(2, 2, 1, ptr(0xB1), [2]uint64{0xB2, 0x22}),
	})
	if got := status(t, r).Producer.TrackedBlocks; got != 4 {
		t.Errorf("tracked blocks = %d, want 4 (A2, A3, B1, B2)", got)
	}
}

// TestPlane_PublisherRestartWithANewIDReplacesItsBlocks kills a static
// publisher and starts another on the same endpoint with a new publisher
// id (a worker restart): libzmq reconnects, the first worker's blocks are
// cleared, and the new incarnation's blocks are tracked.
func TestPlane_PublisherRestartWithANewIDReplacesItsBlocks(t *testing.T) {
	ep := freeEndpoint(t)
	r := startRelay(t, newPlane(t, PlaneConfig{Publishers: []discovery.Publisher{{Endpoint: ep}}}))
	first := startPy(t, "dynamo_pub.py", "--bind", ep)
	first.do("warm", msg{"pub": pubA, "seq": 0, "payload": []any{storedMap(1, 1, 0, nil, [2]uint64{0xA1, 0x11}, [2]uint64{0xA2, 0x12})}})
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != 2 {
			return fmt.Errorf("tracked %d blocks, want the first incarnation's 2", st.Producer.TrackedBlocks)
		}
		return nil
	})
	first.kill()
	second := startPy(t, "dynamo_pub.py", "--bind", ep)
	second.do("warm", msg{"pub": pubA + 100, "seq": 0, "payload": []any{storedMap(1, 1, 0, nil, [2]uint64{0xD1, 0x41})}})
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != 1 || st.Intake.Events != 2 {
			return fmt.Errorf("tracked %d blocks after %d events, want only the second incarnation's 1", st.Producer.TrackedBlocks, st.Intake.Events)
		}
		return nil
	})
	checkWords(t, r, []kv.Event{storedKV(1, 1, 0, nil, [2]uint64{0xD1, 0x41})})
}

// TestPlane_BrokerModeDeduplicatesAcrossBrokers runs two XSUB/XPUB
// brokers (libzmq's proxy) with a publisher connected to both, as
// Dynamo's HA brokers run: the relay hears every message twice, takes it
// once, and counts the copies as duplicates.
func TestPlane_BrokerModeDeduplicatesAcrossBrokers(t *testing.T) {
	py := startPy(t, "dynamo_pub.py", "--brokers", "2")
	r := startRelay(t, newPlane(t, PlaneConfig{Brokers: py.Endpoints}))
	subject := testScope.Subject("kv-events")
	py.do("subscribed", msg{"topic": subject}) // through both brokers, not only the faster one
	py.do("warm", msg{"pub": pubA, "seq": 0, "frame_topic": subject, "payload": []any{storedMap(1, 1, 0, nil, [2]uint64{0xA1, 0x11})}})
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Intake.Events == 0 {
			return errors.New("no event through the brokers yet")
		}
		return nil
	})
	for seq := uint64(1); seq <= 20; seq++ {
		py.do("send", msg{"pub": pubA, "seq": seq, "frame_topic": subject, "payload": []any{storedMap(1, 1+seq, 0, ptr(0xA0+seq), [2]uint64{0xA1 + seq, 0x11 + seq})}})
	}
	// Another scope's subject under a subscribed prefix is refused.
	py.do("send", msg{"pub": pubA, "seq": 21, "frame_topic": subject + "-x", "payload": []any{storedMap(1, 99, 0, nil, [2]uint64{0xFF, 0xFF})}})
	st := waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Intake.Events != 21 || st.Intake.Duplicates < 20 {
			return fmt.Errorf("intake %+v: want 21 events once each, 20 duplicates at least", st.Intake)
		}
		return nil
	})
	if st.Intake.Gaps != 0 || st.Producer.TrackedBlocks != 21 {
		t.Errorf("through two brokers: intake %+v, tracked %d; want no gap and 21 blocks", st.Intake, st.Producer.TrackedBlocks)
	}
}

// TestPlane_BrokerModeTakesALateCopyFromTheOtherBroker is the HA case a
// high-water mark gets wrong: broker 0 loses sequence 2 and forwards 3;
// broker 1 forwards 2 afterwards. The relay takes 2 late (it never saw
// it), counts the gap 3 opened and the late fill, and still drops real
// copies.
func TestPlane_BrokerModeTakesALateCopyFromTheOtherBroker(t *testing.T) {
	py := startPy(t, "dynamo_pub.py", "--brokers", "2")
	r := startRelay(t, newPlane(t, PlaneConfig{Brokers: py.Endpoints}))
	subject := testScope.Subject("kv-events")
	m := func(seq uint64, broker int) msg {
		out := msg{"pub": pubA, "seq": seq, "frame_topic": subject,
			"payload": []any{storedMap(1, seq, 0, nil, [2]uint64{0xB0 + seq, 0x20 + seq})}}
		if broker >= 0 {
			out["broker"] = broker
		}
		return out
	}
	events := func(n uint64, more func(relay.IntakeStats) error) func(relay.PoolStatus) error {
		return func(st relay.PoolStatus) error {
			if st.Intake.Events != n {
				return fmt.Errorf("intake %+v: want %d events", st.Intake, n)
			}
			if more != nil {
				return more(st.Intake)
			}
			return nil
		}
	}
	py.do("subscribed", msg{"topic": subject})
	py.do("send", m(0, 1))
	waitFor(t, r, events(1, nil))
	py.do("send", m(1, 0))
	waitFor(t, r, events(2, nil))
	py.do("send", m(3, 0)) // broker 0 lost 2
	waitFor(t, r, events(3, func(in relay.IntakeStats) error {
		if in.Gaps != 1 || in.Late != 0 {
			return fmt.Errorf("intake %+v after 3 through broker 0: want gaps 1 (sequence 2), late 0", in)
		}
		return nil
	}))
	py.do("send", m(2, 1)) // broker 1's copy, later
	before := waitFor(t, r, events(4, func(in relay.IntakeStats) error {
		if in.Late != 1 {
			return fmt.Errorf("intake %+v after 2 through broker 1: want it taken late", in)
		}
		return nil
	}))
	// Copies that were seen stay duplicates: 2 through broker 0, 3 through
	// broker 1, and one of 4's two copies.
	py.do("send", m(2, 0))
	py.do("send", m(3, 1))
	py.do("send", m(4, -1))
	st := waitFor(t, r, events(5, func(in relay.IntakeStats) error {
		if d := in.Duplicates - before.Intake.Duplicates; d != 3 {
			return fmt.Errorf("intake %+v: %d new duplicates, want 3", in, d)
		}
		return nil
	}))
	if in := st.Intake; in.Gaps != 1 || in.Late != 1 || st.Producer.TrackedBlocks != 5 || st.Rejected != 0 {
		t.Errorf("after a late copy: gaps %d, late %d, tracked %d, rejected %d; want 1, 1 (nothing missing), 5, 0",
			in.Gaps, in.Late, st.Producer.TrackedBlocks, st.Rejected)
	}
}

func TestParseBrokerURL(t *testing.T) {
	xsub, xpub, err := ParseBrokerURL("xsub=tcp://a:5555;tcp://b:5555 , xpub=tcp://a:5556;tcp://b:5556")
	if err != nil || fmt.Sprint(xsub) != "[tcp://a:5555 tcp://b:5555]" || fmt.Sprint(xpub) != "[tcp://a:5556 tcp://b:5556]" {
		t.Errorf("ParseBrokerURL = %v, %v, %v", xsub, xpub, err)
	}
	for _, bad := range []string{"", "tcp://a:1", "xsub=tcp://a:1", "xsub=tcp://a:1,xpub=", "xpub=tcp://a:1,xpub=tcp://b:1",
		"xsub=tcp://a:1,xpub=udp://b:1", "xsub=tcp://a:1,xpub=tcp://b:1,xpub=tcp://c:1"} {
		if _, _, err := ParseBrokerURL(bad); !errors.Is(err, ErrBadConfig) {
			t.Errorf("ParseBrokerURL(%q) = %v, want ErrBadConfig", bad, err)
		}
	}
}

// TestPlane_SubscribesMorePublishersThanLibzmqsDefaultSocketLimit runs 400
// direct-mode publishers (Debian's python3-zmq), more than a libzmq context
// holds at its default limit of 1023 sockets (a publisher takes three):
// every worker's block is tracked, none given up; and the subscriptions,
// idle, hold no OS thread each (their waits are in Go's poller).
func TestPlane_SubscribesMorePublishersThanLibzmqsDefaultSocketLimit(t *testing.T) {
	const n = 400
	py := startPy(t, "dynamo_pub.py", "--bind", "tcp://127.0.0.1:0", "--count", strconv.Itoa(n))
	if len(py.Endpoints) != n {
		t.Fatalf("publisher script bound %d endpoints, want %d", len(py.Endpoints), n)
	}
	pubs := make([]discovery.Publisher, n)
	warm := make([]msg, n)
	for i, ep := range py.Endpoints {
		pubs[i] = discovery.Publisher{Endpoint: ep}
		worker, hash := uint64(i+1), uint64(0x10000+i)
		warm[i] = msg{"sock": i, "pub": pubA - i, "seq": 0,
			"payload": []any{storedMap(worker, 1, 0, nil, [2]uint64{hash, hash << 8})}}
	}
	r := startRelay(t, newPlane(t, PlaneConfig{Publishers: pubs}))
	py.do("warm", warm)
	st := waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != n {
			return fmt.Errorf("tracked %d blocks, want one from each of %d publishers", st.Producer.TrackedBlocks, n)
		}
		return nil
	})
	if in := st.Intake; in.Identity != 0 || in.BadFrames != 0 || in.Gaps != 0 || in.Malformed != 0 {
		t.Errorf("intake = %+v, want nothing dropped", in)
	}
	if waitsInThePoller {
		// A wait in a libzmq poll would hold one thread per publisher. The
		// subscriptions' set-up, all at once, may leave some threads idle
		// (measured: 8 to 98 with 100 to 1,000 publishers on 2 cores).
		if th := osThreads(t); th >= n/2 {
			t.Errorf("the process runs %d OS threads with %d publishers subscribed, want fewer than %d", th, n, n/2)
		}
	}
}

// TestPlane_PublisherPastTheSocketLimitIsSubscribedOnceSocketsFree gives
// the plane room for two publishers' sockets and discovers three: the
// third cannot be subscribed, is tried again, and is subscribed once the
// first one's record goes and its sockets are freed; its worker's block
// is then tracked, the departed one's dropped.
func TestPlane_PublisherPastTheSocketLimitIsSubscribedOnceSocketsFree(t *testing.T) {
	py := startPy(t, "dynamo_pub.py", "--bind", "tcp://127.0.0.1:0", "--count", "3")
	disc := &testDiscovery{updates: make(chan discovery.Update)}
	r := startRelay(t, newPlane(t, PlaneConfig{Discovery: disc, MaxSockets: 6}))
	pubs := make([]discovery.Publisher, 3)
	warm := make([]msg, 3)
	for i, ep := range py.Endpoints {
		pubs[i] = discovery.Publisher{Key: ep, Endpoint: ep, PublisherID: uint64(pubA - i)}
		hash := uint64(0x20000 + i)
		warm[i] = msg{"sock": i, "pub": pubA - i, "seq": 0,
			"payload": []any{storedMap(uint64(i+1), 1, 0, nil, [2]uint64{hash, hash << 8})}}
	}
	py.do("warm", warm)
	// The first two take the six sockets before the third is discovered.
	disc.updates <- discovery.Update{Publisher: pubs[0]}
	disc.updates <- discovery.Update{Publisher: pubs[1]}
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != 2 {
			return fmt.Errorf("tracked %d blocks, want the first two publishers' 2", st.Producer.TrackedBlocks)
		}
		return nil
	})
	disc.updates <- discovery.Update{Publisher: pubs[2]}
	disc.updates <- discovery.Update{Publisher: pubs[0], Gone: true}
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != 2 || st.Intake.Events != 3 {
			return fmt.Errorf("tracked %d blocks after %d events, want the second and third publishers' 2 after 3",
				st.Producer.TrackedBlocks, st.Intake.Events)
		}
		return nil
	})
}

// testDiscovery hands a plane the updates a test sends it.
type testDiscovery struct{ updates chan discovery.Update }

func (d *testDiscovery) Watch(ctx context.Context, fn func(discovery.Update)) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-d.updates:
			fn(u)
		}
	}
}

func (d *testDiscovery) Health() error  { return nil }
func (d *testDiscovery) String() string { return "test discovery" }

// TestPlane_BurstsWithPausesAreDeliveredWhole sends four publishers'
// messages one at a time, with pauses of up to a millisecond between some
// of them, so that each subscription goes idle and is woken thousands of
// times: every message is taken (a missed wake-up would leave the rest
// queued), none counted as a gap.
func TestPlane_BurstsWithPausesAreDeliveredWhole(t *testing.T) {
	const pubs, each = 4, 1500
	py := startPy(t, "dynamo_pub.py", "--bind", "tcp://127.0.0.1:0", "--count", strconv.Itoa(pubs))
	fixed := make([]discovery.Publisher, pubs)
	for i, ep := range py.Endpoints {
		fixed[i] = discovery.Publisher{Endpoint: ep}
	}
	r := startRelay(t, newPlane(t, PlaneConfig{Publishers: fixed}))
	// The subscriptions are made once the first message of each arrives
	// (a PUB socket drops what it sends before a subscriber connects).
	first := make([]msg, pubs)
	for i := range first {
		first[i] = msg{"sock": i, "pub": pubA - i, "seq": 0,
			"payload": []any{storedMap(uint64(i+1), 1, 0, nil, [2]uint64{uint64(0x30000 + i), 1})}}
	}
	py.do("warm", first)
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != pubs {
			return fmt.Errorf("tracked %d blocks, want one from each of %d publishers", st.Producer.TrackedBlocks, pubs)
		}
		return nil
	})
	var burst []msg
	for seq := 1; seq <= each; seq++ {
		for i := range pubs {
			hash := uint64(0x30000 + seq*pubs + i)
			burst = append(burst, msg{"sock": i, "pub": pubA - i, "seq": seq,
				"payload": []any{storedMap(uint64(i+1), 1, 0, nil, [2]uint64{hash, hash << 8})}})
		}
	}
	py.do("burst", burst)
	st := waitFor(t, r, func(st relay.PoolStatus) error {
		if want := uint64(pubs * (each + 1)); st.Producer.TrackedBlocks != want {
			return fmt.Errorf("tracked %d blocks, want %d", st.Producer.TrackedBlocks, want)
		}
		return nil
	})
	if in := st.Intake; in.Gaps != 0 || in.BadFrames != 0 || in.Malformed != 0 || in.Identity != 0 {
		t.Errorf("intake = %+v, want nothing lost or dropped", in)
	}
}
