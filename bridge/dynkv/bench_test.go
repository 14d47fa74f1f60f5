package dynkv

import (
	"context"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkServer measures APPLY and MATCH over loopback with a pipelined
// go-redis client (64 commands per round trip), Mooncake-like 32-block chains,
// with each backing index (index=exact, index=ckf at the default size).
// `goindex bench` does not wrap it: run
// go test -run '^$' -bench BenchmarkServer ./bridge/dynkv/
func BenchmarkServer(b *testing.B) {
	for _, ix := range []Index{IndexExact, IndexCKF} {
		b.Run("index="+string(ix), func(b *testing.B) { benchServer(b, Backing{Index: ix}) })
	}
}

func benchServer(b *testing.B, backing Backing) {
	const pipeline, chain = 64, 32
	s, err := NewServer(Config{Addr: "127.0.0.1:0", Backing: backing})
	if err != nil {
		b.Fatal(err)
	}
	go s.Serve()
	defer s.Close()
	c := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Protocol: 2, DisableIdentity: true})
	defer c.Close()
	ctx := context.Background()
	locals := make([]uint64, chain)
	for i := range locals {
		locals[i] = uint64(i + 1)
	}
	event := func(i int) []byte {
		return AppendEvent(nil, chainStore(Rank{uint64(i % 16), 0}, uint64(i+1), nil, locals))
	}
	// Every rank holds the chain before any sub-benchmark, so each one
	// (the MATCH ones included) can run alone; later stores are NOOPs.
	for i := 0; i < 16; i++ {
		if err := c.Do(ctx, "DYNKV.APPLY", testKey, event(i)).Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("op=apply/pipeline=64", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i += pipeline {
			p := c.Pipeline()
			for j := 0; j < pipeline; j++ {
				p.Do(ctx, "DYNKV.APPLY", testKey, event(i+j))
			}
			if _, err := p.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
	})
	query := AppendMatchRequest(nil, locals)
	b.Run("op=match/pipeline=64", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i += pipeline {
			p := c.Pipeline()
			cmds := make([]*redis.Cmd, pipeline)
			for j := range cmds {
				cmds[j] = p.Do(ctx, "DYNKV.MATCH", testKey, query)
			}
			if _, err := p.Exec(ctx); err != nil {
				b.Fatal(err)
			}
			if r, _ := cmds[0].Text(); len(r) != 5+16*24 {
				b.Fatalf("MATCH reply %d bytes, want %d (16 ranks)", len(r), 5+16*24)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
	})
	b.Run("op=match/pipeline=1", func(b *testing.B) {
		roundTrips(b, func() error { return c.Do(ctx, "DYNKV.MATCH", testKey, query).Err() })
	})
	next := 1 << 40 // event ids past the pipelined runs'
	b.Run("op=apply/pipeline=1", func(b *testing.B) {
		roundTrips(b, func() error {
			next++
			return c.Do(ctx, "DYNKV.APPLY", testKey, event(next)).Err()
		})
	})
}

// roundTrips runs one unpipelined command b.N times and reports the
// throughput and the round-trip latency percentiles.
func roundTrips(b *testing.B, do func() error) {
	lat := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := do(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// redisServerEnv names a redis-server binary (Debian's redis-server) for
// BenchmarkEcho's side-by-side; unset, that side is skipped.
const redisServerEnv = "GOINDEX_BENCH_REDIS_SERVER"

// BenchmarkEcho puts the same pipelined client (go-redis, 64 commands a
// round trip) against goindex dynkv and, with GOINDEX_BENCH_REDIS_SERVER, a
// redis-server on loopback, with ECHO of an APPLY-sized payload (a 32-block
// store event, 538 bytes): the wire and server cost both pay per command,
// without either's index. The dynkv module needs Valkey, which Debian does
// not ship, so this is the C server side by side that can run here.
func BenchmarkEcho(b *testing.B) {
	payload := AppendEvent(nil, chainStore(Rank{1, 0}, 1, nil, make([]uint64, 32)))
	run := func(b *testing.B, addr string) {
		c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true})
		defer c.Close()
		ctx := context.Background()
		const pipeline = 64
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i += pipeline {
			p := c.Pipeline()
			for j := 0; j < pipeline; j++ {
				p.Do(ctx, "ECHO", payload)
			}
			if _, err := p.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
	}
	b.Run("server=goindex-dynkv/pipeline=64", func(b *testing.B) {
		s, err := NewServer(Config{Addr: "127.0.0.1:0"})
		if err != nil {
			b.Fatal(err)
		}
		go s.Serve()
		defer s.Close()
		run(b, s.Addr().String())
	})
	bin := os.Getenv(redisServerEnv)
	if bin == "" {
		return
	}
	b.Run("server=redis-server/pipeline=64", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", b.TempDir())
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true})
		for c.Ping(context.Background()).Err() != nil {
			time.Sleep(20 * time.Millisecond)
		}
		c.Close()
		run(b, addr)
	})
}

// BenchmarkStoreMatch times Store.Match alone (no wire) for each backing:
// 16 ranks holding the same 32-block chain, the query asking for all 32.
func BenchmarkStoreMatch(b *testing.B) {
	const ranks, chain = 16, 32
	locals := make([]uint64, chain)
	for i := range locals {
		locals[i] = uint64(i + 1)
	}
	for _, ix := range []Index{IndexExact, IndexCKF} {
		b.Run("index="+string(ix)+"/ranks=16/blocks=32", func(b *testing.B) {
			s, err := NewStoreWith(Backing{Index: ix})
			if err != nil {
				b.Fatal(err)
			}
			for r := uint64(0); r < ranks; r++ {
				if _, err := s.Apply(chainStore(Rank{r, 0}, 1, nil, locals)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			var got []MatchEntry
			for i := 0; i < b.N; i++ {
				got = s.Match(locals, 0)
			}
			if len(got) != ranks || got[0].Matched != chain {
				b.Fatalf("Match = %d entries (first %+v), want %d ranks at depth %d", len(got), got[0], ranks, chain)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "matches/s")
		})
	}
}
