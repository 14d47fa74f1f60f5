package zmqfeed

import (
	"errors"
	"net"
	"testing"

	"github.com/goindex/goindex/bridge/discovery"
	"github.com/goindex/goindex/bridge/relay"
)

// hostilePeer listens as a ZMTP 3.0 PUB with the NULL mechanism and, once
// a subscriber connects, announces a one-part message of claim bytes and
// sends nothing more: the 9 bytes that end a process whose ZMTP library
// allocates what a peer announces (go-zeromq/zmq4 v0.17.0 does).
func hostilePeer(t *testing.T, claim uint64) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			greeting := make([]byte, 64)
			greeting[0], greeting[9], greeting[10] = 0xff, 0x7f, 3
			copy(greeting[12:], "NULL")
			ready := append([]byte{5}, "READY"...)
			ready = append(ready, 11)
			ready = append(ready, "Socket-Type"...)
			ready = append(ready, 0, 0, 0, 3)
			ready = append(ready, "PUB"...)
			long := []byte{0x02}
			for i := 7; i >= 0; i-- {
				long = append(long, byte(claim>>(8*i)))
			}
			_, _ = c.Write(greeting)
			_, _ = c.Write(append([]byte{0x04, byte(len(ready))}, ready...))
			_, _ = c.Write(long)
			t.Cleanup(func() { c.Close() })
		}
	}()
	return "tcp://" + l.Addr().String()
}

// TestHostile_HugeFrameClaimIsRefusedWithoutAllocating points the relay at
// a peer announcing a 1 TiB part, next to a real publisher: libzmq's
// MAXMSGSIZE drops the peer, the process lives, and the real publisher's
// events are taken.
func TestHostile_HugeFrameClaimIsRefusedWithoutAllocating(t *testing.T) {
	bad := hostilePeer(t, 1<<40)
	good := freeEndpoint(t)
	r := startRelay(t, newPlane(t, PlaneConfig{Publishers: []discovery.Publisher{{Endpoint: bad}, {Endpoint: good}}}))
	py := startPy(t, "dynamo_pub.py", "--bind", good)
	py.do("warm", msg{"pub": pubA, "seq": 0, "payload": []any{storedMap(1, 1, 0, nil, [2]uint64{0xA1, 0x11})}})
	waitFor(t, r, func(st relay.PoolStatus) error {
		if st.Producer.TrackedBlocks != 1 {
			return errors.New("the real publisher's block not tracked yet")
		}
		return nil
	})
	// A real publisher sending one part over the limit is dropped too. The
	// warm-up above ends first, so the second relay hears only what
	// follows.
	py.do("send", msg{"pub": pubA, "seq": 0, "payload": []any{storedMap(1, 1, 0, nil, [2]uint64{0xA1, 0x11})}})
	small := newPlane(t, PlaneConfig{Publishers: []discovery.Publisher{{Endpoint: good}}, MaxMessageBytes: 4096})
	r2 := startRelay(t, small)
	big := make([]map[string]any, 0, 200)
	for i := range uint64(200) {
		big = append(big, storedMap(1, i, 0, nil, [2]uint64{0x1000 + i, i}))
	}
	py.do("warm", msg{"pub": pubA, "seq": 1, "payload": []any{storedMap(2, 1, 0, nil, [2]uint64{0xB1, 0x21})}})
	waitFor(t, r2, func(st relay.PoolStatus) error {
		if st.Intake.Events == 0 {
			return errors.New("the limited relay has not heard the publisher yet")
		}
		return nil
	})
	// Connected: the big batch goes first on the connection, a small
	// message after it; libzmq drops the connection at the big part and
	// reconnects, and the small one (repeated) arrives.
	py.do("send", msg{"pub": pubA, "seq": 2, "payload": big})
	py.do("warm", msg{"pub": pubA, "seq": 3, "payload": []any{storedMap(3, 1, 0, nil, [2]uint64{0xC1, 0x31})}})
	st := waitFor(t, r2, func(st relay.PoolStatus) error {
		if st.Intake.Events < 2 {
			return errors.New("the message after the oversized one not taken yet")
		}
		return nil
	})
	if st.Intake.Events != 2 || st.Producer.TrackedBlocks != 2 || st.Intake.Gaps != 1 {
		t.Errorf("relay with a 4 KiB part limit: intake %+v, %d blocks; want 2 events, 2 blocks and the oversized message as a gap",
			st.Intake, st.Producer.TrackedBlocks)
	}
	if got := status(t, r).Producer.TrackedBlocks; got < 1 {
		t.Errorf("first relay tracks %d blocks after the hostile peer, want its real publisher's", got)
	}
}
