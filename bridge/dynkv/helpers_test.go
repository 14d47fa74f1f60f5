package dynkv

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/kv"
)

// chainStore builds a store event of rank r whose blocks carry the local
// values locals (continuing below the chain of prefix) with external hashes
// equal to the router chain, the convention of dynamo-compat §3.5.
func chainStore(r Rank, eventID uint64, prefix, locals []uint64) Event {
	full := kv.AppendChain(nil, false, 0, append(append([]uint64{}, prefix...), locals...))
	ev := Event{Kind: KindStore, Rank: r, EventID: eventID, Parent: RootParent}
	if len(prefix) > 0 {
		ev.Parent = full[len(prefix)-1]
	}
	for i, l := range locals {
		ev.Blocks = append(ev.Blocks, Block{External: full[len(prefix)+i], Local: l})
	}
	return ev
}

func chainHash(locals ...uint64) uint64 {
	c := kv.AppendChain(nil, false, 0, locals)
	return c[len(c)-1]
}

func matched(s *Store, r Rank, locals ...uint64) uint32 {
	for _, e := range s.Match(locals, 0) {
		if e.Rank == r {
			return e.Matched
		}
	}
	return 0
}

func mustApply(t *testing.T, s *Store, ev Event, want Changed) {
	t.Helper()
	got, err := s.Apply(ev)
	if err != nil || got != want {
		t.Fatalf("Apply(%+v) = %v, %v; want %v, nil", ev, got, err, want)
	}
}

var r10, r11, r20 = Rank{1, 0}, Rank{1, 1}, Rank{2, 0}

// testBackings are the backings every semantic test runs with. The CKF
// filters are sized for 1024 blocks a rank: the cases hold a few blocks, so
// the slot occupancy α is below 1% and a fingerprint collision (≈ 8α/65535
// per position, ckf spec §7) is out of reach.
func testBackings() []Backing {
	return []Backing{{Index: IndexExact}, {Index: IndexCKF, CKFExpectedBlocks: 1024}}
}

// activeStates counts the owners with the active flag, which in ckf mode
// are exactly the CKF's tracked blocks.
func activeStates(s *Store) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, nd := range s.nodes {
		for _, o := range nd.owners {
			if o.active {
				n++
			}
		}
	}
	return n
}

// render writes a reply so that equal strings mean equal replies: +status,
// -error, :integer, $hex of a bulk string (or $nil), *[…] of an array.
func render(r reply) string {
	switch r.kind {
	case replyStatus:
		return "+" + r.str
	case replyError:
		return "-" + r.str
	case replyInt:
		return fmt.Sprintf(":%d", r.integer)
	case replyBulk:
		if r.bulk == nil {
			return "$nil"
		}
		return "$" + hex.EncodeToString(r.bulk)
	case replyArray:
		parts := make([]string, len(r.array))
		for i, a := range r.array {
			parts[i] = render(a)
		}
		return "*[" + strings.Join(parts, " ") + "]"
	}
	return "(none)"
}

// eng drives an Engine in-process at a clock the test sets, or, made by
// newLoggedEng, a Server with a log as its connections would.
type eng struct {
	t   *testing.T
	e   *Engine
	now time.Time
	srv *Server // nil: commands go to e directly
}

func newEng(t *testing.T) *eng {
	return &eng{t: t, e: NewEngine(), now: time.UnixMilli(1_000_000_000)}
}

// newLoggedEng drives a Server with a log (server commands included) that
// restart stops and starts again on its log.
func newLoggedEng(t *testing.T) *eng {
	x := &eng{t: t, now: time.UnixMilli(1_000_000_000)}
	x.open(Config{Addr: "127.0.0.1:0", LogPath: filepath.Join(t.TempDir(), "dynkv.aof")})
	return x
}

func (x *eng) open(cfg Config) {
	x.t.Helper()
	s, err := NewServer(cfg)
	if err != nil {
		x.t.Fatalf("NewServer: %v", err)
	}
	s.engine.now = func() time.Time { return x.now }
	x.srv, x.e = s, s.engine
	x.t.Cleanup(func() { s.Close() })
}

// restart closes the server (SHUTDOWN) and starts it again on its log.
func (x *eng) restart() {
	x.t.Helper()
	if err := x.srv.Close(); err != nil {
		x.t.Fatalf("Close: %v", err)
	}
	x.open(x.srv.cfg)
}

// args converts strings, byte slices and integers (as decimal) to command
// arguments.
func args(vs ...any) [][]byte {
	out := make([][]byte, len(vs))
	for i, v := range vs {
		switch v := v.(type) {
		case string:
			out[i] = []byte(v)
		case []byte:
			out[i] = v
		case int:
			out[i] = []byte(fmt.Sprint(v))
		default:
			panic(fmt.Sprintf("argument %T", v))
		}
	}
	return out
}

func (x *eng) do(vs ...any) reply {
	if x.srv != nil {
		r, _ := x.srv.exec(&connState{authed: true}, args(vs...))
		return r
	}
	return x.e.ExecAt(x.now, args(vs...))
}

// want runs a command and checks its rendered reply.
func (x *eng) want(want string, vs ...any) {
	x.t.Helper()
	if got := render(x.do(vs...)); got != want {
		x.t.Errorf("%s: got %s, want %s", vs[0], got, want)
	}
}

// apply sends ev with DYNKV.APPLY to key and checks the rendered reply.
func (x *eng) apply(key string, ev Event, want string) {
	x.t.Helper()
	x.want(want, "DYNKV.APPLY", key, AppendEvent(nil, ev))
}

// match returns MATCH's entries as rank → [matched, last].
func (x *eng) match(key string, locals ...uint64) map[Rank][2]uint64 {
	x.t.Helper()
	r := x.do("DYNKV.MATCH", key, AppendMatchRequest(nil, locals))
	entries, err := DecodeMatchReply(r.bulk)
	if r.kind != replyBulk || err != nil {
		x.t.Fatalf("MATCH %v = %s (%v)", locals, render(r), err)
	}
	out := map[Rank][2]uint64{}
	for _, e := range entries {
		out[e.Rank] = [2]uint64{uint64(e.Matched), e.Last}
	}
	return out
}

// ticketOf returns an 8-byte ticket reply's value.
func (x *eng) ticketOf(vs ...any) uint64 {
	x.t.Helper()
	r := x.do(vs...)
	v, ok := be64(r.bulk)
	if r.kind != replyBulk || !ok {
		x.t.Fatalf("%s = %s, want an 8-byte ticket", vs[0], render(r))
	}
	return v
}

// ev builds an event whose blocks are (external, local) pairs: the form of
// upstream's test helper _event(kind, worker, rank, id, parent, blocks).
func ev(kind EventKind, worker uint64, rank uint32, id uint64, parent uint64, blocks ...[2]uint64) Event {
	e := Event{Kind: kind, Rank: Rank{worker, rank}, EventID: id, Parent: parent}
	for _, b := range blocks {
		if kind == KindRemove {
			e.Hashes = append(e.Hashes, b[0])
		} else {
			e.Blocks = append(e.Blocks, Block{External: b[0], Local: b[1]})
		}
	}
	return e
}

// snapshot encodes a REPLACE_RANK_IF_GENERATION dump of events.
func snapshot(events ...Event) []byte { return AppendSnapshot(nil, events) }

func u64(v uint64) []byte { return be64Bytes(v) }
func u32(v uint32) []byte { return be32Bytes(v) }

func be64Bytes(v uint64) []byte {
	return []byte{byte(v >> 56), byte(v >> 48), byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

func be32Bytes(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

// snapshotStats returns a Store's STATS triple as an array.
func snapshotStats(s *Store) [3]uint64 {
	n, r, m := s.Stats()
	return [3]uint64{n, r, m}
}

// drainGC is upstream's _drain_gc: GC calls with the budget until GC_STATS
// shows no owner-fenced tombstone, ownerless owner-fenced epoch or
// ownerless node; 16 calls in a row that reclaim nothing fail the test.
func (x *eng) drainGC(key string, budget uint32) {
	x.t.Helper()
	idle := 0
	for range 256 {
		res := x.do("DYNKV.GC", key, "CURRENT", u32(budget))
		stats := x.do("DYNKV.GC_STATS", key)
		if res.kind != replyArray || stats.kind != replyArray {
			x.t.Fatalf("GC %s, GC_STATS %s", render(res), render(stats))
		}
		if stats.array[1].integer == 0 && stats.array[3].integer == 0 && stats.array[6].integer == 0 {
			return
		}
		if idle++; res.array[1].integer != 0 {
			idle = 0
		}
		if idle >= 16 {
			x.t.Fatalf("GC does not converge: %s, GC_STATS %s", render(res), render(stats))
		}
	}
	x.t.Fatalf("GC did not converge in 256 calls: GC_STATS %s", render(x.do("DYNKV.GC_STATS", key)))
}
