package zmqfeed

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/goindex/goindex/bridge/discovery"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/goindex/kv"
)

// requireIPv6Loopback skips t where the machine has no IPv6 loopback.
func requireIPv6Loopback(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback on this machine (listen tcp6 [::1]:0: %v): IPv6 publishers untested", err)
	}
	l.Close()
}

// TestPlane_IPv6PublishersAreTracked binds two direct-mode publishers
// (Debian's python3-zmq) on [::1], as Dynamo binds tcp://[::]:* and
// advertises an IPv6 DYN_EVENT_PLANE_HOST, and gives the plane one
// endpoint in brackets and the other without (libzmq reads both): the
// events of each are taken. Without ZMQ_IPV6 on the SUB sockets their
// connects succeed and nothing ever arrives.
func TestPlane_IPv6PublishersAreTracked(t *testing.T) {
	requireIPv6Loopback(t)
	py := startPy(t, "dynamo_pub.py", "--bind", "tcp://[::1]:0", "--count", "2")
	bare := strings.NewReplacer("[", "", "]", "").Replace(py.Endpoints[1]) // tcp://::1:port
	r := startRelay(t, newPlane(t, PlaneConfig{Publishers: []discovery.Publisher{{Endpoint: py.Endpoints[0]}, {Endpoint: bare}}}))
	py.do("warm", []msg{
		{"pub": pubA, "seq": 0, "sock": 0, "payload": []any{storedMap(1, 1, 0, nil, [2]uint64{0xA1, 0x11})}},
		{"pub": pubA + 1, "seq": 0, "sock": 1, "payload": []any{storedMap(2, 1, 0, nil, [2]uint64{0xB1, 0x21})}},
	})
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Intake.Events != 2 {
			return fmt.Errorf("intake %+v: want the first event of both IPv6 publishers (%s, %s)", st.Intake, py.Endpoints[0], bare)
		}
		return nil
	})
	py.do("send", msg{"pub": pubA, "seq": 1, "sock": 0, "payload": []any{storedMap(1, 2, 0, ptr(0xA1), [2]uint64{0xA2, 0x12})}})
	py.do("send", msg{"pub": pubA + 1, "seq": 1, "sock": 1, "payload": []any{removedMap(2, 2, 0, 0xB1)}})
	st := waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Intake.Events != 4 {
			return fmt.Errorf("intake %+v: want 4 events", st.Intake)
		}
		return nil
	})
	if st.Intake.Gaps != 0 || st.Intake.Identity != 0 || st.Intake.BadFrames != 0 || st.Rejected != 0 {
		t.Errorf("intake %+v, rejected %d: want no gap, no identity or frame error, nothing rejected", st.Intake, st.Rejected)
	}
	checkWords(t, r, []kv.Event{
		storedKV(1, 1, 0, nil, [2]uint64{0xA1, 0x11}),
		storedKV(2, 1, 0, nil, [2]uint64{0xB1, 0x21}),
		storedKV(1, 2, 0, ptr(0xA1), [2]uint64{0xA2, 0x12}),
		removedKV(2, 2, 0, 0xB1),
	})
}

// TestEngine_IPv6EngineIsTrackedAndReplayed runs an engine publisher and
// its replay socket (Debian's python3-zmq) on [::1] and loses one batch:
// the SUB socket takes the batches and the DEALER asks the replay socket
// for the lost one, both over IPv6.
func TestEngine_IPv6EngineIsTrackedAndReplayed(t *testing.T) {
	requireIPv6Loopback(t)
	py := startPy(t, "engine_pub.py", "--bind", "tcp://[::1]:0", "--replay", "tcp://[::1]:0")
	r := startRelay(t, startEngine(t, EngineConfig{Endpoint: py.Endpoints[0], Replay: py.Endpoints[1], WorkerID: 6}))
	warmUp(t, py, r)
	ta, ua := tokens(1, 4)
	tb, ub := tokens(5, 8)
	send(py, []any{1.0, []any{[]any{"BlockStored", []any{61}, nil, ta, engineBlockSize, nil}}, 0}, false)
	before := replayedAfterFirstEvent(t, r)
	send(py, []any{1.1, []any{[]any{"BlockStored", []any{62}, 61, tb, engineBlockSize, nil}}, 0}, true) // lost
	// The next batches show the gap.
	py.do("warm", nil)
	st := waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Intake.Events != 2 {
			return fmt.Errorf("intake %+v: want 2 events, the lost one replayed", st.Intake)
		}
		return nil
	})
	if st.Intake.Replayed-before < 1 || st.Intake.Resyncs != 0 || st.Rejected != 0 {
		t.Errorf("intake %+v (%d replayed before), rejected %d: want the lost batch replayed, no resync, nothing rejected",
			st.Intake, before, st.Rejected)
	}
	checkWords(t, r, []kv.Event{
		engineStored(t, 6, 0, "", nil, []uint64{61}, ua, nil),
		engineStored(t, 6, 0, "", ptr(61), []uint64{62}, ub, nil),
	})
}

// TestCheckEndpoint_AcceptsIPv6FormsAndRefusesGarbage: IPv6 hosts in
// brackets (with a zone) and without, names and IPv4 addresses are
// accepted; what libzmq cannot connect to is ErrBadConfig naming the
// endpoint.
func TestCheckEndpoint_AcceptsIPv6FormsAndRefusesGarbage(t *testing.T) {
	for _, ep := range []string{
		"tcp://[::1]:5557", "tcp://[fe80::1%eth0]:5557", "tcp://[fd00::2]:65535", "tcp://[::ffff:10.0.0.1]:5557",
		"tcp://fd00::2:5557", "tcp://::1:5557", "tcp://127.0.0.1:5557", "tcp://worker-0.backend.svc.cluster.local:41234",
		"tcp://worker-0.svc.:1", "tcp://a_b:1", "ipc:///tmp/kv.sock",
	} {
		if err := checkEndpoint(ep); err != nil {
			t.Errorf("checkEndpoint(%q) = %v, want nil", ep, err)
		}
	}
	for _, ep := range []string{
		"", "tcp://", "ipc://", "udp://[::1]:5557", "[::1]:5557", "localhost:5557",
		"tcp://[::1]", "tcp://[::1]5557", "tcp://[::1:5557", "tcp://::1]:5557", "tcp://[fe80::1%]:5557",
		"tcp://[127.0.0.1]:5557", "tcp://[worker-0]:5557", "tcp://[::1]:", "tcp://[::1]:0", "tcp://[::1]:65536",
		"tcp://[::1]:*", "tcp://*:5557", "tcp://:5557", "tcp://worker-0", "tcp://worker-0:port", "tcp://fd00:::2:5557",
		"tcp://worker 0:5557", "tcp://a..b:1", "tcp://-a:1", "tcp://[::1]:5557/x",
	} {
		err := checkEndpoint(ep)
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), fmt.Sprintf("%q", ep)) {
			t.Errorf("checkEndpoint(%q) = %v, want ErrBadConfig naming the endpoint", ep, err)
		}
	}
}
