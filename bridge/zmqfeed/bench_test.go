package zmqfeed

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/discovery"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/dynamo"
	zmq "github.com/pebbe/zmq4"
)

// BenchmarkPlane_Idle subscribes a plane to N Debian python3-zmq
// publishers, waits until each has delivered a message, then reports what
// the process spends while they are silent: %cpu (of one core, over each
// 2 s window) and its OS threads. Build with -tags zmqpoll for the libzmq
// poll wait, side by side.
func BenchmarkPlane_Idle(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("publishers=%d", n), func(b *testing.B) {
			py := startPy(b, "dynamo_pub.py", "--bind", "tcp://127.0.0.1:0", "--count", fmt.Sprint(n))
			pubs := make([]discovery.Publisher, n)
			warm := make([]msg, n)
			for i, ep := range py.Endpoints {
				pubs[i] = discovery.Publisher{Endpoint: ep}
				warm[i] = msg{"sock": i, "pub": pubA - i, "seq": 0,
					"payload": []any{storedMap(uint64(i+1), 1, 0, nil, [2]uint64{uint64(i + 1), 1})}}
			}
			p, err := NewPlane(PlaneConfig{Scope: dynamo.Scope{Namespace: "dynamo", Component: "backend", Endpoint: "generate"},
				Publishers: pubs})
			if err != nil {
				b.Fatal(err)
			}
			var mu sync.Mutex
			heard := map[*relay.Source]bool{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = p.Run(ctx, func(m relay.Message) bool {
					mu.Lock()
					heard[m.Source] = true
					mu.Unlock()
					return true
				})
			}()
			defer func() { cancel(); <-done }()
			py.do("warm", warm)
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				mu.Lock()
				all := len(heard) == n
				mu.Unlock()
				if all {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("heard %d of %d publishers", len(heard), n)
				}
			}
			py.do("send", warm[0]) // ends the warm-up
			time.Sleep(500 * time.Millisecond)
			b.ResetTimer()
			var spent time.Duration
			for range b.N {
				c0 := processCPU()
				time.Sleep(2 * time.Second)
				spent += processCPU() - c0
			}
			b.ReportMetric(100*spent.Seconds()/(2*float64(b.N)), "%cpu")
			b.ReportMetric(float64(osThreads(b)), "threads")
		})
	}
}

// BenchmarkSocket_Receive reads messages of four parts (the event plane's
// shape, a 200-byte payload) from an in-process PUB socket over loopback
// TCP through a socket's read loop: the time per message, the sender's
// included.
func BenchmarkSocket_Receive(b *testing.B) {
	zctx, err := zmq.NewContext()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = zctx.Term() }()
	pub, err := zctx.NewSocket(zmq.PUB)
	if err == nil {
		err = pub.SetSndhwm(0)
	}
	if err == nil {
		err = pub.Bind("tcp://127.0.0.1:0")
	}
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = pub.Close() }()
	ep, _ := pub.GetLastEndpoint()
	sk, err := newSocket(zctx, socketConfig{kind: zmq.SUB, endpoints: []string{ep}, subscribe: []string{""},
		maxMessageBytes: DefaultMaxMessageBytes})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var want, taken atomic.Int64 // messages to take, taken so far
	want.Store(1)
	all := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- sk.readLoop(ctx, func([][]byte) bool {
			if taken.Add(1) == want.Load() {
				all <- struct{}{}
			}
			return true
		})
	}()
	defer func() { cancel(); <-done }()
	payload := make([]byte, 200)
	send := func() {
		if _, err := pub.SendMessage("kv-events", "12345678", "12345678", payload); err != nil {
			b.Fatal(err)
		}
	}
	// The subscription is made once a message goes through.
	for ready := false; !ready; {
		send()
		select {
		case <-all:
			ready = true
		case <-time.After(10 * time.Millisecond):
		}
	}
	time.Sleep(50 * time.Millisecond) // the retries' copies arrive
	want.Store(taken.Load() + int64(b.N))
	b.ResetTimer()
	for range b.N {
		send()
	}
	<-all
	b.StopTimer()
	runtime.KeepAlive(pub)
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
