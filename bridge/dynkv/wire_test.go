package dynkv

import (
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("hex %q: %v", s, err)
	}
	return b
}

// Golden vectors of dynamo-compat §5b.
const (
	goldenStore       = "01010000000000000001000000000000000000000001ffffffffffffffff000000020000000000000065000000000000000b0000000000000066000000000000000c"
	goldenMatchReq    = "0100000002000000000000000b000000000000000c"
	goldenMatchReply  = "0100000001000000000000000100000000000000020000000000000066"
	goldenRemove      = "01020000000000000001000000000000000000000002000000010000000000000066"
	goldenClear       = "01030000000000000001000000000000000000000003"
	goldenSelectReply = "0101000000000000000100000000000000020000000000000066"
)

var storeEvent = Event{Kind: KindStore, Rank: Rank{1, 0}, EventID: 1, Parent: RootParent,
	Blocks: []Block{{101, 11}, {102, 12}}}

func TestEvent_GoldenStoreVector(t *testing.T) {
	b := mustHex(t, goldenStore)
	if len(b) != 66 {
		t.Fatalf("golden store vector is %d bytes, want 66", len(b))
	}
	if got := AppendEvent(nil, storeEvent); !reflect.DeepEqual(got, b) {
		t.Errorf("AppendEvent(%+v) = %x, want %s", storeEvent, got, goldenStore)
	}
	ev, err := DecodeEvent(b)
	if err != nil || !reflect.DeepEqual(ev, storeEvent) {
		t.Errorf("DecodeEvent(golden) = %+v, %v; want %+v", ev, err, storeEvent)
	}
}

func TestEvent_RemoveAndClearRoundTrip(t *testing.T) {
	for _, c := range []struct {
		hex string
		ev  Event
	}{
		{goldenRemove, Event{Kind: KindRemove, Rank: Rank{1, 0}, EventID: 2, Hashes: []uint64{102}}},
		{goldenClear, Event{Kind: KindClear, Rank: Rank{1, 0}, EventID: 3}},
	} {
		b := mustHex(t, c.hex)
		if got := AppendEvent(nil, c.ev); !reflect.DeepEqual(got, b) {
			t.Errorf("AppendEvent(%+v) = %x, want %s", c.ev, got, c.hex)
		}
		if ev, err := DecodeEvent(b); err != nil || !reflect.DeepEqual(ev, c.ev) {
			t.Errorf("DecodeEvent(%s) = %+v, %v; want %+v", c.hex, ev, err, c.ev)
		}
	}
}

func TestMatch_GoldenVectors(t *testing.T) {
	if got := AppendMatchRequest(nil, []uint64{11, 12}); hex.EncodeToString(got) != goldenMatchReq {
		t.Errorf("AppendMatchRequest([11 12]) = %x, want %s", got, goldenMatchReq)
	}
	hashes, err := DecodeMatch(mustHex(t, goldenMatchReq))
	if err != nil || !reflect.DeepEqual(hashes, []uint64{11, 12}) {
		t.Errorf("DecodeMatch(golden) = %v, %v", hashes, err)
	}
	entry := MatchEntry{Rank: Rank{1, 0}, Matched: 2, Last: 102}
	if got := AppendMatchReply(nil, []MatchEntry{entry}); hex.EncodeToString(got) != goldenMatchReply {
		t.Errorf("AppendMatchReply = %x, want %s", got, goldenMatchReply)
	}
	if got := AppendSelectReply(nil, &entry); hex.EncodeToString(got) != goldenSelectReply || len(got) != 2+24 {
		t.Errorf("AppendSelectReply = %x (%d bytes), want %s (26)", got, len(got), goldenSelectReply)
	}
}

func TestDecoders_RejectMalformedPayloads(t *testing.T) {
	store := mustHex(t, goldenStore)
	cases := map[string][]byte{
		"empty":          {},
		"bad version":    append([]byte{2}, store[1:]...),
		"unknown kind":   append([]byte{1, 9}, store[2:]...),
		"truncated":      store[:len(store)-1],
		"trailing byte":  append(append([]byte{}, store...), 0),
		"count too big":  mustHex(t, "01020000000000000001000000000000000000000002ffffffff"),
		"count over cap": mustHex(t, "0102000000000000000100000000000000000000000200100001"),
	}
	for name, b := range cases {
		if _, err := DecodeEvent(b); CodeOf(err) != CodeInvalidEvent {
			t.Errorf("DecodeEvent(%s) err = %v, want %s", name, err, CodeInvalidEvent)
		}
	}
	for name, b := range map[string][]byte{
		"empty": {}, "short": {1, 0, 0, 0, 1}, "over limit": mustHex(t, "0100010001"), "trailing": append(mustHex(t, goldenMatchReq), 1),
	} {
		if _, err := DecodeMatch(b); CodeOf(err) != CodeInvalidMatch {
			t.Errorf("DecodeMatch(%s) err = %v, want %s", name, err, CodeInvalidMatch)
		}
	}
	if _, err := DecodeRegistration(AppendRegistration(nil, Registration{Version: 1, Ranks: []uint32{1, 1}})); CodeOf(err) != CodeInvalidRegistration {
		t.Errorf("DecodeRegistration(duplicate ranks) err = %v", err)
	}
	if _, err := DecodeRegistration(AppendRegistration(nil, Registration{Version: 3, OwnerNonce: 0, LeaseMs: 10})); CodeOf(err) != CodeInvalidRegistration {
		t.Errorf("DecodeRegistration(nonce 0) err = %v", err)
	}
	if _, err := DecodeRegistration(AppendRegistration(nil, Registration{Version: 3, OwnerNonce: 1, LeaseMs: MaxLeaseMs + 1})); CodeOf(err) != CodeInvalidRegistration {
		t.Errorf("DecodeRegistration(lease too long) err = %v", err)
	}
	other := storeEvent
	other.Rank = Rank{2, 0}
	if _, err := DecodeSnapshot(AppendSnapshot(nil, []Event{storeEvent, other}), Rank{1, 0}); CodeOf(err) != CodeInvalidReplace {
		t.Errorf("DecodeSnapshot(foreign rank) err = %v", err)
	}
	rm := Event{Kind: KindRemove, Rank: Rank{1, 0}, Hashes: []uint64{1}}
	if _, err := DecodeSnapshot(AppendSnapshot(nil, []Event{rm}), Rank{1, 0}); CodeOf(err) != CodeInvalidReplace {
		t.Errorf("DecodeSnapshot(remove) err = %v", err)
	}
	if _, err := DecodeSnapshot(mustHex(t, "0100000001ffffffff"), Rank{1, 0}); CodeOf(err) != CodeInvalidReplace {
		t.Errorf("DecodeSnapshot(oversized length) err = %v", err)
	}
}

func TestRegistrationAndSelect_RoundTrip(t *testing.T) {
	for _, reg := range []Registration{
		{Version: 1, Ranks: []uint32{0, 3, 7}},
		{Version: 3, OwnerNonce: 9, LeaseMs: 5000, ExpectedGeneration: 4, Ranks: []uint32{1}},
	} {
		got, err := DecodeRegistration(AppendRegistration(nil, reg))
		if err != nil || !reflect.DeepEqual(got, reg) {
			t.Errorf("registration round trip %+v = %+v, %v", reg, got, err)
		}
	}
	hashes := []uint64{1, 2, 3}
	cands := []SelectCandidate{{Rank{1, 0}, 5}, {Rank{2, 1}, 0}}
	h, c, err := DecodeSelect(AppendSelectRequest(nil, hashes, cands))
	if err != nil || !reflect.DeepEqual(h, hashes) || !reflect.DeepEqual(c, cands) {
		t.Errorf("select round trip = %v %v %v", h, c, err)
	}
}

func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{goldenStore, goldenRemove, goldenClear} {
		f.Add(mustHex(f, s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeEvent(b)
		if err != nil {
			return
		}
		if got := AppendEvent(nil, ev); !reflect.DeepEqual(got, b) {
			t.Fatalf("decoded %x then re-encoded %x", b, got)
		}
	})
}

func FuzzDecodeRequests(f *testing.F) {
	f.Add(mustHex(f, goldenMatchReq))
	f.Add(AppendSelectRequest(nil, []uint64{1}, []SelectCandidate{{Rank{1, 0}, 2}}))
	f.Add(AppendRegistration(nil, Registration{Version: 3, OwnerNonce: 1, LeaseMs: 1, Ranks: []uint32{0}}))
	f.Add(AppendSnapshot(nil, []Event{storeEvent}))
	f.Fuzz(func(t *testing.T, b []byte) {
		DecodeMatch(b)
		DecodeSelect(b)
		DecodeRegistration(b)
		DecodeLease(b, true)
		DecodeLease(b, false)
		DecodeSnapshot(b, Rank{1, 0})
		decodeRecord(b)
	})
}

// FuzzEngine runs command sequences decoded from the input (a command name
// picked by the first byte, then length-prefixed arguments) through one
// Engine at a clock that moves: no input may panic it, and every reply is
// a well-formed value (errors name the module's codes or ERR).
func FuzzEngine(f *testing.F) {
	f.Add([]byte{0, 5, 'k', 'e', 'y', '0', 0})
	store := mustHex(f, goldenStore)
	f.Add(append([]byte{0, 3, 'k', 'e', 'y', byte(len(store))}, store...))
	f.Add([]byte{7, 1, 'k', 8, 0, 0, 0, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 12, 1, 'k', 7, 'C', 'U', 'R', 'R', 'E', 'N', 'T', 4, 0, 0, 0, 9})
	names := CommandNames()
	names = append(names, "DEL", "FLUSHALL")
	f.Fuzz(func(t *testing.T, b []byte) {
		e := NewEngine()
		now := time.UnixMilli(1_000_000)
		e.now = func() time.Time { return now }
		for len(b) > 0 {
			name := names[int(b[0])%len(names)]
			b = b[1:]
			args := [][]byte{[]byte(name)}
			for len(b) > 0 && len(args) < 7 {
				n := int(b[0])
				b = b[1:]
				if n == 0 {
					break
				}
				n = min(n, len(b))
				args = append(args, b[:n])
				b = b[n:]
			}
			r := e.Exec(args)
			if r.kind == replyError && !strings.HasPrefix(r.str, "DYNKV_") && !strings.HasPrefix(r.str, "ERR ") {
				t.Fatalf("%s: error %q is neither a module code nor ERR", name, r.str)
			}
			now = now.Add(37 * time.Millisecond)
		}
	})
}
