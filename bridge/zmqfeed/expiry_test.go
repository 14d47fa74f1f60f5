package zmqfeed

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/discovery"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/goindex/kv"
)

// testExpiry is the fixed publishers' expiry in these tests: short, so
// the tests are quick; how long an outage lasts beyond it does not matter.
const testExpiry = 300 * time.Millisecond

// expiryPlane runs a relay on two fixed publishers with testExpiry, each
// publisher storing one worker's block, and waits until both are tracked.
func expiryPlane(t *testing.T) (r *relay.Relay, a, b *pyProc, aEP string) {
	t.Helper()
	aEP, bEP := freeEndpoint(t), freeEndpoint(t)
	r = startRelay(t, newPlane(t, PlaneConfig{Publishers: []discovery.Publisher{{Endpoint: aEP}, {Endpoint: bEP}},
		PublisherExpiry: testExpiry}))
	a = startPy(t, "dynamo_pub.py", "--bind", aEP)
	b = startPy(t, "dynamo_pub.py", "--bind", bEP)
	a.do("warm", msg{"pub": pubA, "seq": 0, "payload": []any{storedMap(1, 1, 0, nil, [2]uint64{0xA1, 0x11})}})
	b.do("warm", msg{"pub": pubA + 1, "seq": 0, "payload": []any{storedMap(2, 1, 0, nil, [2]uint64{0xB1, 0x21})}})
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != 2 {
			return fmt.Errorf("tracked %d blocks, want both workers' 2", st.Producer.TrackedBlocks)
		}
		return nil
	})
	return r, a, b, aEP
}

// waitOnlyB waits until the relay holds worker 2's block alone.
func waitOnlyB(t *testing.T, r *relay.Relay) {
	t.Helper()
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != 1 {
			return fmt.Errorf("tracked %d blocks, want worker 2's 1 (worker 1's gone with its publisher)", st.Producer.TrackedBlocks)
		}
		return nil
	})
	checkWords(t, r, []kv.Event{storedKV(2, 1, 0, nil, [2]uint64{0xB1, 0x21})})
}

// TestPlane_FixedPublisherGoneForGoodIsClearedAfterItsExpiry kills one of
// two fixed publishers: once its connection has been down for the expiry,
// its worker's blocks are dropped (they used to stay until the relay
// restarted), the other's stay; a publisher started again on the endpoint
// is subscribed again and its blocks are tracked.
func TestPlane_FixedPublisherGoneForGoodIsClearedAfterItsExpiry(t *testing.T) {
	r, a, _, aEP := expiryPlane(t)
	a.kill()
	waitOnlyB(t, r)
	back := startPy(t, "dynamo_pub.py", "--bind", aEP)
	back.do("warm", msg{"pub": pubA + 2, "seq": 0, "payload": []any{storedMap(1, 2, 0, nil, [2]uint64{0xA3, 0x13})}})
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != 2 {
			return fmt.Errorf("tracked %d blocks, want worker 2's and the returned worker 1's", st.Producer.TrackedBlocks)
		}
		return nil
	})
	checkWords(t, r, []kv.Event{storedKV(2, 1, 0, nil, [2]uint64{0xB1, 0x21}), storedKV(1, 2, 0, nil, [2]uint64{0xA3, 0x13})})
}

// TestPlane_FrozenFixedPublisherIsClearedAndContinuesWhenThawed stops a
// fixed publisher's process (SIGSTOP: its connection stays open, nothing
// answers on it, as with a host gone without closing its connections):
// the ZMTP heartbeats declare the connection dead and, the expiry later,
// its worker's blocks are dropped; thawed (SIGCONT), it is connected again
// and its next event is tracked.
func TestPlane_FrozenFixedPublisherIsClearedAndContinuesWhenThawed(t *testing.T) {
	r, a, _, _ := expiryPlane(t)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP: %v", err)
	}
	waitOnlyB(t, r)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT: %v", err)
	}
	a.do("warm", msg{"pub": pubA, "seq": 1, "payload": []any{storedMap(1, 2, 0, nil, [2]uint64{0xA3, 0x13})}})
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != 2 {
			return fmt.Errorf("tracked %d blocks, want worker 2's and the thawed worker 1's new one", st.Producer.TrackedBlocks)
		}
		return nil
	})
	checkWords(t, r, []kv.Event{storedKV(2, 1, 0, nil, [2]uint64{0xB1, 0x21}), storedKV(1, 2, 0, nil, [2]uint64{0xA3, 0x13})})
}
