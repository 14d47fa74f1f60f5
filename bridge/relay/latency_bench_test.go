package relay

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/goindex/goindex/bridge/natslink"
	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/rs/zerolog"
)

// BenchmarkIntake_JetStreamLatency measures how fast a pool takes one
// worker's stores (events/s) when every JetStream acknowledgement comes
// latency late (a toxiproxy link between the relay and its NATS server): a
// publication waits for its acknowledgement on the pool's goroutine, and
// the events queued meanwhile go out in the next one. Each iteration
// queues 4,000 stores of new blocks and waits until all are taken.
func BenchmarkIntake_JetStreamLatency(b *testing.B) {
	for _, latency := range []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond} {
		b.Run(fmt.Sprintf("latency=%v", latency), func(b *testing.B) {
			srv, _ := natstest.Start(b)
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			proxy := toxiproxy.NewProxy(toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()), "nats", addr,
				strings.TrimPrefix(srv.ClientURL(), "nats://"))
			if err := proxy.Start(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(proxy.Stop)
			nc, err := natslink.Connect("nats://"+addr, "relay", nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(nc.Close)
			f := newMsgFeed()
			cfg := testConfig(nc)
			cfg.LoadEvery, cfg.HeartbeatEvery = time.Second, time.Second
			cfg.Pools[0].Feeds = []Feed{f}
			run := startRelay(b, cfg)
			src := &Source{Scope: testScope, PublisherID: 0x11, ReportsGone: true, Name: "worker 1"}
			f.msgs <- planeMsg(b, src, dynamo.EventTopic, storeEnvelope(b, 1, 0x11, 1, kv.Stored, 1))
			settle(b, run.r, f)
			if latency > 0 {
				toxic := fmt.Sprintf(`{"name":"latency","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, latency.Milliseconds())
				if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
					b.Fatal(err)
				}
			}
			const n = 4000
			seq, taken := uint64(1), poolStatus(b, run.r).Intake.Events
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				msgs := make([]Message, n)
				for i := range msgs {
					seq++
					msgs[i] = planeMsg(b, src, dynamo.EventTopic, storeEnvelope(b, 1, 0x11, seq, kv.Stored, seq))
				}
				b.StartTimer()
				start := time.Now()
				go func() {
					for _, m := range msgs {
						f.msgs <- m
					}
				}()
				for taken += n; poolStatus(b, run.r).Intake.Events < taken; {
					time.Sleep(time.Millisecond)
				}
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "events/s")
		})
	}
}
