package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/dynkv"
	"github.com/goindex/goindex/internal/testseed"
	"github.com/redis/go-redis/v9"
)

// killChildEnv makes the test binary run `goindex dynkv --log $value` (the
// child process of TestDynkv_KillNineRestartsEqualToATwin).
const killChildEnv = "GOINDEX_DYNKV_KILL_CHILD"

// killChildMinSizeEnv is the child's --auto-aof-rewrite-min-size.
const killChildMinSizeEnv = "GOINDEX_DYNKV_KILL_CHILD_MIN_SIZE"

// workload draws random dynkv write commands over a small universe of keys,
// workers, ranks and block chains, so that conflicts, missing parents,
// stale tickets, retired ranks, duplicate clears and owner fences all occur.
type workload struct {
	rng      *rand.Rand
	keys     []string
	eventIDs map[string]uint64 // key/worker/rank → last event id sent
}

var (
	wlWorkers = []uint64{1, 2, 3}
	wlRanks   = []uint32{0, 1}
	wlLocals  = []uint64{11, 12, 13, 14, 15}
)

// wlExternal is the external hash of a chain of locals: a fixed function,
// so that every rank storing the same chain names the same blocks.
func wlExternal(chain []uint64) uint64 {
	h := uint64(1469598103934665603)
	for _, l := range chain {
		h = (h ^ l) * 1099511628211
	}
	return h &^ (1 << 63)
}

func (w *workload) chain() []uint64 {
	c := make([]uint64, 1+w.rng.IntN(4))
	for i := range c {
		c[i] = wlLocals[w.rng.IntN(len(wlLocals))]
	}
	return c
}

func (w *workload) eventID(key string, r dynkv.Rank) uint64 {
	k := fmt.Sprintf("%s/%d/%d", key, r.Worker, r.DPRank)
	id := w.eventIDs[k]
	switch w.rng.IntN(10) {
	case 0: // a delayed event
		if id > 0 {
			id -= uint64(1 + w.rng.IntN(int(min(id, 3))))
		}
	case 1: // a duplicate
	default:
		id++
		w.eventIDs[k] = id
	}
	return id
}

// store draws a store event: a chain below a prefix (root or the external
// hash of a random chain), sometimes with one block under a foreign hash.
func (w *workload) store(key string, r dynkv.Rank) dynkv.Event {
	prefix, tail := []uint64{}, w.chain()
	if w.rng.IntN(3) == 0 {
		prefix = w.chain()
	}
	ev := dynkv.Event{Kind: dynkv.KindStore, Rank: r, EventID: w.eventID(key, r), Parent: dynkv.RootParent}
	if len(prefix) > 0 {
		ev.Parent = wlExternal(prefix)
	}
	full := append([]uint64{}, prefix...)
	for _, l := range tail {
		full = append(full, l)
		ext := wlExternal(full)
		if w.rng.IntN(40) == 0 {
			ext = uint64(w.rng.IntN(8)) + 1 // collides with another block's edge
		}
		ev.Blocks = append(ev.Blocks, dynkv.Block{External: ext, Local: l})
	}
	return ev
}

func (w *workload) rank() dynkv.Rank {
	return dynkv.Rank{Worker: wlWorkers[w.rng.IntN(len(wlWorkers))], DPRank: wlRanks[w.rng.IntN(len(wlRanks))]}
}

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// next returns one command. read answers the live server's tickets (the
// generation a REPLACE or a v3 registration quotes), as a client would
// have read them.
func (w *workload) next(read func(args ...any) []byte) []any {
	key := w.keys[w.rng.IntN(len(w.keys))]
	r := w.rank()
	switch n := w.rng.IntN(100); {
	case n < 40:
		return []any{"DYNKV.APPLY", key, dynkv.AppendEvent(nil, w.store(key, r))}
	case n < 52:
		var hashes []uint64
		for range 1 + w.rng.IntN(3) {
			hashes = append(hashes, wlExternal(w.chain()))
		}
		ev := dynkv.Event{Kind: dynkv.KindRemove, Rank: r, EventID: w.eventID(key, r), Hashes: hashes}
		return []any{"DYNKV.APPLY", key, dynkv.AppendEvent(nil, ev)}
	case n < 57:
		ev := dynkv.Event{Kind: dynkv.KindClear, Rank: r, EventID: w.eventID(key, r)}
		return []any{"DYNKV.APPLY", key, dynkv.AppendEvent(nil, ev)}
	case n < 61:
		return []any{"DYNKV.REMOVE_WORKER", key, be64(r.Worker), be32(r.DPRank)}
	case n < 67:
		return []any{"DYNKV.RESET_WORKER", key, be64(r.Worker), be32(r.DPRank)}
	case n < 69:
		return []any{"DYNKV.REMOVE_WORKER_ALL", key, be64(r.Worker)}
	case n < 77:
		gen := read("DYNKV.RANK_GENERATION", key, be64(r.Worker), be32(r.DPRank))
		if w.rng.IntN(4) == 0 && len(gen) == 8 {
			gen = be64(binary.BigEndian.Uint64(gen) + 1)
		}
		var events []dynkv.Event
		for range w.rng.IntN(3) {
			ev := w.store(key, r)
			ev.Parent = dynkv.RootParent
			events = append(events, ev)
		}
		return []any{"DYNKV.REPLACE_RANK_IF_GENERATION", key, be64(r.Worker), be32(r.DPRank), gen, dynkv.AppendSnapshot(nil, events)}
	case n < 81:
		return []any{"DYNKV.REGISTER_WORKER", key, be64(r.Worker), be32(r.DPRank)}
	case n < 85:
		reg := dynkv.Registration{Version: 1, Ranks: []uint32{r.DPRank}}
		return []any{"DYNKV.REGISTER_WORKER_RANKS", key, be64(r.Worker), dynkv.AppendRegistration(nil, reg)}
	case n < 90:
		gen := read("DYNKV.REGISTRATION_GENERATION", key, be64(r.Worker))
		exp := uint64(0)
		if len(gen) == 8 {
			exp = binary.BigEndian.Uint64(gen)
		}
		reg := dynkv.Registration{Version: 3, OwnerNonce: 100 + r.Worker + uint64(w.rng.IntN(2)), LeaseMs: dynkv.MaxLeaseMs, ExpectedGeneration: exp, Ranks: []uint32{r.DPRank}}
		// The child and the twin take the lease's expiry from their own
		// clocks: a re-registration extends (and counts as a mutation)
		// only if the millisecond moved since the last one. A 2 ms pause
		// makes it move on both sides, so they agree.
		time.Sleep(2 * time.Millisecond)
		return []any{"DYNKV.REGISTER_WORKER_RANKS", key, be64(r.Worker), dynkv.AppendRegistration(nil, reg)}
	case n < 95:
		return []any{"DYNKV.APPLY_OWNED", key, be64(100 + r.Worker + uint64(w.rng.IntN(2))), dynkv.AppendEvent(nil, w.store(key, r))}
	case n < 97:
		p := dynkv.LeasePayload{Worker: r.Worker, OwnerNonce: 100 + r.Worker + uint64(w.rng.IntN(2))}
		return []any{"DYNKV.UNREGISTER_WORKER", key, dynkv.AppendLease(nil, p, false)}
	case n < 99:
		return []any{"DYNKV.GC", key, "CURRENT", be32(uint32(1 + w.rng.IntN(8)))}
	default:
		return []any{"DYNKV.BARRIER", key}
	}
}

// signature reads every observable of a server's state over the wire:
// per key STATS, every rank's ticket, every worker's registration token and
// MATCH of every chain of up to three locals.
func signature(ctx context.Context, c *redis.Client, keys []string) string {
	var b strings.Builder
	do := func(args ...any) {
		v, err := c.Do(ctx, args...).Result()
		fmt.Fprintf(&b, "%v %q %v\n", args[0], v, err)
	}
	for _, key := range keys {
		do("DYNKV.STATS", key)
		do("DYNKV.GC_STATS", key)
		do("DYNKV.LIFECYCLE_STATS", key)
		for _, wk := range append(wlWorkers, 9) {
			do("DYNKV.REGISTRATION_GENERATION", key, be64(wk))
			for _, rk := range wlRanks {
				do("DYNKV.RANK_GENERATION", key, be64(wk), be32(rk))
			}
		}
		for _, a := range wlLocals {
			for _, bb := range wlLocals {
				for _, c3 := range wlLocals {
					do("DYNKV.MATCH", key, dynkv.AppendMatchRequest(nil, []uint64{a, bb, c3}))
				}
			}
		}
	}
	return b.String()
}

// TestDynkv_KillNineRestartsEqualToATwin runs `goindex dynkv --log` as a
// child process and an in-memory twin server, sends both the same random
// write commands (rejected ones included) and compares every reply; at
// random points it kills the child with SIGKILL, restarts it on its log and
// compares every observable of the state with the twin's, which never
// stopped: zero differences allowed. The log is rewritten all along: the
// child starts with a small --auto-aof-rewrite-min-size (a rewrite each time
// the log doubles), the workload sends SAVE, BGSAVE and BGREWRITEAOF at
// random points, and after half of those the child is killed at once, so
// that kills land in the middle of rewrites (a kill that leaves the
// rewrite's temporary file behind is counted, and logged). Six rounds run
// seeds GOINDEX_SEED (default 1) to GOINDEX_SEED+5; a failing round names
// its seed.
func TestDynkv_KillNineRestartsEqualToATwin(t *testing.T) {
	if path := os.Getenv(killChildEnv); path != "" {
		err := runDynkv(context.Background(), []string{"--listen", "127.0.0.1:0", "--log", path,
			"--auto-aof-rewrite-min-size", os.Getenv(killChildMinSizeEnv)}, os.Stdout, os.Stderr)
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	seed := testseed.For(t, 1)
	for round := range uint64(6) {
		t.Run(fmt.Sprintf("seed=%d", seed+round), func(t *testing.T) { killNineRound(t, seed+round) })
	}
}

// killNineRound is one run of TestDynkv_KillNineRestartsEqualToATwin.
func killNineRound(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))
	logPath := filepath.Join(t.TempDir(), "dynkv.aof")
	ctx := context.Background()
	addrLine := regexp.MustCompile(`serving on (\S+)`)
	minSize := []string{"2kb", "8kb", "32kb"}[seed%3]
	start := func() (*exec.Cmd, *redis.Client) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestDynkv_KillNineRestartsEqualToATwin$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+logPath, killChildMinSizeEnv+"="+minSize)
		errPipe, err := cmd.StderrPipe()
		if err != nil {
			t.Fatalf("child stderr: %v", err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start child goindex dynkv: %v", err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		lines := bufio.NewScanner(errPipe)
		for lines.Scan() {
			if strings.Contains(lines.Text(), "warning") {
				t.Errorf("child: %s", lines.Text())
			}
			if m := addrLine.FindStringSubmatch(lines.Text()); m != nil {
				go func() {
					for lines.Scan() {
					}
				}()
				c := redis.NewClient(&redis.Options{Addr: m[1], Protocol: 2, DisableIdentity: true, MaxRetries: -1})
				t.Cleanup(func() { c.Close() })
				return cmd, c
			}
		}
		t.Fatalf("child goindex dynkv printed no address (%v)", lines.Err())
		return nil, nil
	}
	twinSrv, err := dynkv.NewServer(dynkv.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("twin NewServer: %v", err)
	}
	go twinSrv.Serve()
	t.Cleanup(func() { twinSrv.Close() })
	twin := redis.NewClient(&redis.Options{Addr: twinSrv.Addr().String(), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { twin.Close() })

	w := &workload{rng: rng, keys: []string{"dynamo:kv-router:a", "dynamo:kv-router:b"}, eventIDs: map[string]uint64{}}
	cmd, child := start()
	const commands, kills = 1500, 8
	killAt := map[int]bool{}
	for len(killAt) < kills {
		killAt[1+rng.IntN(commands-1)] = true
	}
	replyDiffs, rewrites, midRewrite := 0, 0, 0
	kill := func(when string) {
		t.Helper()
		if err := cmd.Process.Kill(); err != nil {
			t.Fatalf("SIGKILL the child: %v", err)
		}
		cmd.Wait()
		child.Close()
		if _, err := os.Stat(logPath + ".rewrite"); err == nil {
			midRewrite++
		}
		cmd, child = start()
		if g, wnt := signature(ctx, child, w.keys), signature(ctx, twin, w.keys); g != wnt {
			t.Fatalf("after SIGKILL %s and restart, state differs from the twin:\n%s", when, firstDiff(g, wnt))
		}
	}
	for i := range commands {
		read := func(args ...any) []byte {
			s, _ := child.Do(ctx, args...).Text()
			return []byte(s)
		}
		args := w.next(read)
		got, gotErr := child.Do(ctx, args...).Result()
		want, wantErr := twin.Do(ctx, args...).Result()
		if fmt.Sprintf("%q %v", got, gotErr) != fmt.Sprintf("%q %v", want, wantErr) {
			if replyDiffs++; replyDiffs <= 5 {
				t.Errorf("command %d %v: child %q %v, twin %q %v", i, args[0], got, gotErr, want, wantErr)
			}
		}
		if rng.IntN(60) == 0 {
			// A rewrite asked for; the twin keeps no log. Half the time
			// the child is killed at once, while it likely still runs.
			persist := []string{"SAVE", "BGSAVE", "BGREWRITEAOF"}[rng.IntN(3)]
			if err := child.Do(ctx, persist).Err(); err != nil && !strings.Contains(err.Error(), "in progress") {
				t.Fatalf("command %d %s: %v", i, persist, err)
			}
			rewrites++
			if rng.IntN(2) == 0 {
				kill(fmt.Sprintf("right after %s at command %d", persist, i))
			}
		}
		if killAt[i] {
			kill(fmt.Sprintf("at command %d", i))
		}
	}
	t.Logf("%d rewrites asked for (and automatic ones, min size %s); %d kills found a rewrite's temporary file", rewrites, minSize, midRewrite)
	if g, wnt := signature(ctx, child, w.keys), signature(ctx, twin, w.keys); g != wnt {
		t.Errorf("at the end, state differs from the twin:\n%s", firstDiff(g, wnt))
	}
	if replyDiffs > 0 {
		t.Errorf("%d of %d replies differ between the child and the twin", replyDiffs, commands)
	}
}

// firstDiff returns the first line where two signatures differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n  child: %s\n  twin:  %s", i, g[i], w[i])
		}
	}
	return fmt.Sprintf("%d lines vs %d", len(g), len(w))
}
