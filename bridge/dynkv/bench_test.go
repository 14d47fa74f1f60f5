package dynkv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/kv"
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

// restartCommandsEnv sets BenchmarkLogRestart's history lengths (commands,
// comma-separated); default 100000,1000000.
const restartCommandsEnv = "GOINDEX_BENCH_DYNKV_COMMANDS"

// BenchmarkLogRestart measures what a log rewrite buys a restart: a server
// with a log runs a KV-cache churn history (32 ranks store 16-block chains
// of 2,048 documents and evict their oldest after 256, so the log grows
// with every event while the state is bounded by the documents: with plain
// APPLY (mode=apply, the frontend's default) each rank keeps an inactive
// owner of every block it ever held, as the module does; with owner-leased
// workers and APPLY_OWNED (mode=owned, --router-valkey-worker-events) an
// eviction deletes them), then restarts on that log (log=history), SAVE
// rewrites it, and it restarts on the compacted log (log=compacted). ns/op
// is one restart (the log's replay); log-MB is the log's size; on
// log=compacted, rewrite-ms is SAVE's time and stall-ms the part of it
// write commands wait for (taking the image). Run:
// go test -run '^$' -bench BenchmarkLogRestart -benchtime 3x ./bridge/dynkv/
func BenchmarkLogRestart(b *testing.B) {
	sizes := []int{100_000, 1_000_000}
	if v := os.Getenv(restartCommandsEnv); v != "" {
		sizes = sizes[:0]
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("%s=%q: %v", restartCommandsEnv, v, err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, owned := range []bool{false, true} {
		for _, n := range sizes {
			mode := map[bool]string{false: "apply", true: "owned"}[owned]
			b.Run(fmt.Sprintf("mode=%s/commands=%d", mode, n), func(b *testing.B) { logRestart(b, owned, n) })
		}
	}
}

func logRestart(b *testing.B, owned bool, n int) {
	cfg := Config{Addr: "127.0.0.1:0", LogPath: filepath.Join(b.TempDir(), "dynkv.aof"), AutoRewritePercentage: -1}
	s, err := NewServer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	churnHistory(b, s, owned, n)
	stats := render(s.engine.Exec(args("DYNKV.STATS", testKey)))
	s.Close()
	restart := func(b *testing.B) {
		b.Helper()
		size := fileSize(b, cfg.LogPath)
		b.ResetTimer()
		for range b.N {
			r, err := NewServer(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if got := render(r.engine.Exec(args("DYNKV.STATS", testKey))); got != stats {
				b.Fatalf("STATS after restart %s, want %s", got, stats)
			}
			r.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(size)/(1<<20), "log-MB")
	}
	b.Run("log=history", restart)
	s, err = NewServer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	s.engine.image()
	stall := time.Since(t0)
	t0 = time.Now()
	if err := s.rewriteLog(); err != nil {
		b.Fatal(err)
	}
	rewrite := time.Since(t0)
	s.Close()
	b.Run("log=compacted", func(b *testing.B) {
		restart(b)
		b.ReportMetric(float64(rewrite.Microseconds())/1000, "rewrite-ms")
		b.ReportMetric(float64(stall.Microseconds())/1000, "stall-ms")
	})
}

// churnHistory runs n write commands of KV-cache churn through s: plain
// APPLY, or APPLY_OWNED from owner-leased workers.
func churnHistory(b *testing.B, s *Server, owned bool, n int) {
	const ranks, docs, chain, keep = 32, 2048, 16, 256
	rng := rand.New(rand.NewPCG(1, 2))
	auth := &connState{authed: true}
	run := func(vs ...any) {
		if rep, _ := s.exec(auth, args(vs...)); rep.kind == replyError {
			b.Fatalf("%s: %s", vs[0], rep.str)
		}
	}
	if owned {
		for w := uint64(1); w <= ranks/4; w++ {
			tok, _ := s.exec(auth, args("DYNKV.REGISTRATION_GENERATION", testKey, u64(w)))
			gen, _ := be64(tok.bulk)
			reg := Registration{Version: 3, OwnerNonce: 100 + w, LeaseMs: MaxLeaseMs, ExpectedGeneration: gen, Ranks: []uint32{0, 1, 2, 3}}
			run("DYNKV.REGISTER_WORKER_RANKS", testKey, u64(w), AppendRegistration(nil, reg))
		}
	}
	held := make([][]int, ranks) // per rank, the documents it holds, oldest first
	next := make([]uint64, ranks)
	doc := func(d int) []uint64 {
		locals := make([]uint64, chain)
		for i := range locals {
			locals[i] = uint64(d*chain + i + 1)
		}
		return locals
	}
	for i := 0; i < n; i++ {
		r := rng.IntN(ranks)
		rank := Rank{uint64(r/4 + 1), uint32(r % 4)}
		next[r]++
		var e Event
		if len(held[r]) >= keep {
			d := held[r][0]
			held[r] = held[r][1:]
			e = Event{Kind: KindRemove, Rank: rank, EventID: next[r], Hashes: kv.AppendChain(nil, false, 0, doc(d))}
		} else {
			d := rng.IntN(docs)
			held[r] = append(held[r], d)
			e = chainStore(rank, next[r], nil, doc(d))
		}
		if owned {
			run("DYNKV.APPLY_OWNED", testKey, u64(100+rank.Worker), AppendEvent(nil, e))
		} else {
			run("DYNKV.APPLY", testKey, AppendEvent(nil, e))
		}
	}
}

// BenchmarkStoreChurn applies, in process, 16-block stores of new blocks
// over 8 ranks with a remove after every fourth: the node-creating path
// (nodes, edges, owners, each rank's members and GC's dictionary orders).
// Run: go test -run '^$' -bench BenchmarkStoreChurn ./bridge/dynkv/
func BenchmarkStoreChurn(b *testing.B) {
	s := NewStore()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		e := Event{Kind: KindStore, Rank: Rank{uint64(i % 8), 0}, EventID: uint64(i + 1), Parent: RootParent}
		for j := range uint64(16) {
			local := j
			if j == 0 {
				local = uint64(i)*16 + 1
			}
			e.Blocks = append(e.Blocks, Block{External: uint64(i)*16 + j + 1, Local: local})
		}
		if _, err := s.Apply(e); err != nil {
			b.Fatal(err)
		}
		if i%4 == 3 {
			rm := Event{Kind: KindRemove, Rank: e.Rank, EventID: uint64(i + 2), Hashes: []uint64{e.Blocks[15].External}}
			if _, err := s.Apply(rm); err != nil {
				b.Fatal(err)
			}
		}
	}
}
