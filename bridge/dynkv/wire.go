package dynkv

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Wire limits of the module's binary payloads (dynamo-compat §5b).
const (
	payloadVersion      = 1
	MaxEventBlocks      = 1 << 20 // blocks (or hashes) in one APPLY event
	MaxMatchHashes      = 1 << 16 // local hashes in one MATCH request
	MaxSelectCandidates = 16384   // candidates in one SELECT
	MaxRegisterRanks    = 1 << 16 // ranks in one REGISTER_WORKER_RANKS
	MaxSnapshotEvents   = 1 << 20 // events in one REPLACE_RANK_IF_GENERATION snapshot
	MaxLeaseMs          = 600_000 // v3 registration lease
	RootParent          = ^uint64(0)
)

// EventKind is the kind byte of an APPLY payload.
type EventKind uint8

// The event kinds of an APPLY payload.
const (
	KindStore  EventKind = 1
	KindRemove EventKind = 2
	KindClear  EventKind = 3
)

// Rank is a (worker, dp rank) pair, the unit that owns blocks.
type Rank struct {
	Worker uint64
	DPRank uint32
}

// Block is one stored block: the engine's external hash and the local hash
// of its tokens.
type Block struct {
	External uint64
	Local    uint64
}

// Event is one decoded APPLY payload.
type Event struct {
	Kind    EventKind
	Rank    Rank
	EventID uint64
	Parent  uint64   // store: parent external hash, RootParent for the root
	Blocks  []Block  // store
	Hashes  []uint64 // remove: external hashes
}

// MatchEntry is one rank's answer to a MATCH: its contiguous active run from
// depth 0 and the external hash of the last matched block.
type MatchEntry struct {
	Rank    Rank
	Matched uint32
	Last    uint64
}

// SelectCandidate is one candidate rank of a SELECT with its load.
type SelectCandidate struct {
	Rank Rank
	Load uint64
}

// reader walks a payload with exact-length checks; the first short read
// records an error and every later read returns zero.
type reader struct {
	b   []byte
	err error
}

func (r *reader) need(n int, what string) bool {
	if r.err != nil {
		return false
	}
	if len(r.b) < n {
		r.err = fmt.Errorf("truncated %s: need %d bytes, have %d", what, n, len(r.b))
		return false
	}
	return true
}

func (r *reader) u8(what string) uint8 {
	if !r.need(1, what) {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u32(what string) uint32 {
	if !r.need(4, what) {
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64(what string) uint64 {
	if !r.need(8, what) {
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// count reads a u32 count, checks it against limit and that the rest of the
// payload holds at least count × each bytes, before anything is allocated.
func (r *reader) count(what string, limit, each int) int {
	n := r.u32(what)
	if r.err != nil {
		return 0
	}
	if uint64(n) > uint64(limit) {
		r.err = fmt.Errorf("%s %d over limit %d", what, n, limit)
		return 0
	}
	if uint64(len(r.b)) < uint64(n)*uint64(each) {
		r.err = fmt.Errorf("truncated: %s %d needs %d bytes, have %d", what, n, uint64(n)*uint64(each), len(r.b))
		return 0
	}
	return int(n)
}

// hashes reads a u32 count (≤ MaxMatchHashes) and that many u64 local hashes.
func (r *reader) hashes() []uint64 {
	n := r.count("hash count", MaxMatchHashes, 8)
	if r.err != nil {
		return nil
	}
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = r.u64("local hash")
	}
	return hashes
}

func (r *reader) end(what string) error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d trailing bytes after %s", len(r.b), what)
	}
	return r.err
}

func (r *reader) version(what string, want uint8) {
	if v := r.u8(what + " version"); r.err == nil && v != want {
		r.err = fmt.Errorf("%s version %d, want %d", what, v, want)
	}
}

// DecodeEvent decodes an APPLY payload. The error (DYNKV_INVALID_EVENT) names
// the first problem; exact length is required.
func DecodeEvent(b []byte) (Event, error) {
	r := reader{b: b}
	ev, err := decodeEvent(&r)
	if err == nil {
		err = r.end("event")
	}
	if err != nil {
		return Event{}, codeErr(CodeInvalidEvent)
	}
	return ev, nil
}

func decodeEvent(r *reader) (Event, error) {
	r.version("event", payloadVersion)
	ev := Event{Kind: EventKind(r.u8("kind"))}
	ev.Rank.Worker = r.u64("worker id")
	ev.Rank.DPRank = r.u32("dp rank")
	ev.EventID = r.u64("event id")
	if r.err != nil {
		return Event{}, r.err
	}
	switch ev.Kind {
	case KindStore:
		ev.Parent = r.u64("parent")
		n := r.count("block count", MaxEventBlocks, 16)
		if r.err == nil {
			ev.Blocks = make([]Block, n)
			for i := range ev.Blocks {
				ev.Blocks[i] = Block{External: r.u64("block hash"), Local: r.u64("tokens hash")}
			}
		}
	case KindRemove:
		n := r.count("hash count", MaxEventBlocks, 8)
		if r.err == nil {
			ev.Hashes = make([]uint64, n)
			for i := range ev.Hashes {
				ev.Hashes[i] = r.u64("block hash")
			}
		}
	case KindClear:
	default:
		return Event{}, fmt.Errorf("unknown event kind %d", ev.Kind)
	}
	return ev, r.err
}

// AppendEvent appends ev's APPLY payload to dst.
func AppendEvent(dst []byte, ev Event) []byte {
	dst = append(dst, payloadVersion, byte(ev.Kind))
	dst = binary.BigEndian.AppendUint64(dst, ev.Rank.Worker)
	dst = binary.BigEndian.AppendUint32(dst, ev.Rank.DPRank)
	dst = binary.BigEndian.AppendUint64(dst, ev.EventID)
	switch ev.Kind {
	case KindStore:
		dst = binary.BigEndian.AppendUint64(dst, ev.Parent)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(ev.Blocks)))
		for _, b := range ev.Blocks {
			dst = binary.BigEndian.AppendUint64(dst, b.External)
			dst = binary.BigEndian.AppendUint64(dst, b.Local)
		}
	case KindRemove:
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(ev.Hashes)))
		for _, h := range ev.Hashes {
			dst = binary.BigEndian.AppendUint64(dst, h)
		}
	}
	return dst
}

// DecodeMatch decodes a MATCH request into the query's local hashes.
func DecodeMatch(b []byte) ([]uint64, error) {
	r := reader{b: b}
	r.version("match", payloadVersion)
	hashes := r.hashes()
	if err := r.end("match request"); err != nil {
		return nil, codeErr(CodeInvalidMatch)
	}
	return hashes, nil
}

// AppendMatchRequest appends a MATCH request for hashes to dst.
func AppendMatchRequest(dst []byte, hashes []uint64) []byte {
	dst = append(dst, payloadVersion)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(hashes)))
	for _, h := range hashes {
		dst = binary.BigEndian.AppendUint64(dst, h)
	}
	return dst
}

// AppendMatchReply appends a MATCH reply holding entries to dst.
func AppendMatchReply(dst []byte, entries []MatchEntry) []byte {
	dst = append(dst, payloadVersion)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(entries)))
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint64(dst, e.Rank.Worker)
		dst = binary.BigEndian.AppendUint32(dst, e.Rank.DPRank)
		dst = binary.BigEndian.AppendUint32(dst, e.Matched)
		dst = binary.BigEndian.AppendUint64(dst, e.Last)
	}
	return dst
}

// DecodeMatchReply decodes a MATCH reply (the client's side; used by tests
// and the benchmark).
func DecodeMatchReply(b []byte) ([]MatchEntry, error) {
	r := reader{b: b}
	r.version("match reply", payloadVersion)
	n := r.count("entry count", MaxEventBlocks, 24)
	var out []MatchEntry
	if r.err == nil {
		out = make([]MatchEntry, n)
		for i := range out {
			out[i] = MatchEntry{Rank: Rank{r.u64("worker"), r.u32("rank")}, Matched: r.u32("matched"), Last: r.u64("last hash")}
		}
	}
	return out, r.end("match reply")
}

// DecodeSelect decodes a SELECT request.
func DecodeSelect(b []byte) ([]uint64, []SelectCandidate, error) {
	r := reader{b: b}
	r.version("select", payloadVersion)
	hashes := r.hashes()
	c := r.count("candidate count", MaxSelectCandidates, 20)
	var cands []SelectCandidate
	if r.err == nil {
		cands = make([]SelectCandidate, c)
		for i := range cands {
			cands[i] = SelectCandidate{Rank: Rank{r.u64("worker"), r.u32("rank")}, Load: r.u64("load")}
		}
	}
	if err := r.end("select request"); err != nil {
		return nil, nil, codeErr(CodeInvalidSelect)
	}
	return hashes, cands, nil
}

// AppendSelectRequest appends a SELECT request to dst.
func AppendSelectRequest(dst []byte, hashes []uint64, cands []SelectCandidate) []byte {
	dst = AppendMatchRequest(dst, hashes)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(cands)))
	for _, c := range cands {
		dst = binary.BigEndian.AppendUint64(dst, c.Rank.Worker)
		dst = binary.BigEndian.AppendUint32(dst, c.Rank.DPRank)
		dst = binary.BigEndian.AppendUint64(dst, c.Load)
	}
	return dst
}

// AppendSelectReply appends a SELECT reply: status 0 (no candidate) or 1 with
// the chosen entry (26 bytes of body).
func AppendSelectReply(dst []byte, chosen *MatchEntry) []byte {
	dst = append(dst, payloadVersion)
	if chosen == nil {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = binary.BigEndian.AppendUint64(dst, chosen.Rank.Worker)
	dst = binary.BigEndian.AppendUint32(dst, chosen.Rank.DPRank)
	dst = binary.BigEndian.AppendUint32(dst, chosen.Matched)
	return binary.BigEndian.AppendUint64(dst, chosen.Last)
}

// Registration is a decoded REGISTER_WORKER_RANKS payload. Version 1
// registers ranks; version 2 (the module's legacy leased form) adds an owner
// nonce and a lease; version 3 adds the expected registration token, which
// makes the registration replay-safe.
type Registration struct {
	Version            uint8
	OwnerNonce         uint64
	LeaseMs            uint64
	ExpectedGeneration uint64
	Ranks              []uint32 // sorted by DecodeRegistration
}

// Leased reports whether the registration claims the worker for an owner.
func (r Registration) Leased() bool { return r.Version == 2 || r.Version == 3 }

// DecodeRegistration decodes a REGISTER_WORKER_RANKS payload (version 1, 2
// or 3): at least one rank, at most MaxRegisterRanks, none twice, exact
// length; a leased form needs a non-zero nonce and a lease in [1,
// MaxLeaseMs]. The ranks come back sorted.
func DecodeRegistration(b []byte) (Registration, error) {
	r := reader{b: b}
	reg := Registration{Version: r.u8("registration version")}
	switch {
	case r.err != nil:
	case reg.Leased():
		reg.OwnerNonce = r.u64("owner nonce")
		reg.LeaseMs = r.u64("lease ms")
		if reg.Version == 3 {
			reg.ExpectedGeneration = r.u64("expected generation")
		}
		if r.err == nil && reg.OwnerNonce == 0 {
			r.err = fmt.Errorf("owner nonce must be non-zero")
		}
		if r.err == nil && (reg.LeaseMs < 1 || reg.LeaseMs > MaxLeaseMs) {
			r.err = fmt.Errorf("lease %d ms outside [1, %d]", reg.LeaseMs, MaxLeaseMs)
		}
	case reg.Version != 1:
		r.err = fmt.Errorf("registration version %d, want 1, 2 or 3", reg.Version)
	}
	n := r.count("rank count", MaxRegisterRanks, 4)
	if r.err == nil && n == 0 {
		r.err = fmt.Errorf("no ranks")
	}
	if r.err == nil {
		reg.Ranks = make([]uint32, n)
		for i := range reg.Ranks {
			reg.Ranks[i] = r.u32("rank")
		}
		slices.Sort(reg.Ranks)
		for i := 1; i < n && r.err == nil; i++ {
			if reg.Ranks[i] == reg.Ranks[i-1] {
				r.err = fmt.Errorf("rank %d listed twice", reg.Ranks[i])
			}
		}
	}
	if err := r.end("registration"); err != nil {
		return Registration{}, codeErr(CodeInvalidRegistration)
	}
	return reg, nil
}

// AppendRegistration appends a REGISTER_WORKER_RANKS payload to dst.
func AppendRegistration(dst []byte, reg Registration) []byte {
	dst = append(dst, reg.Version)
	if reg.Leased() {
		dst = binary.BigEndian.AppendUint64(dst, reg.OwnerNonce)
		dst = binary.BigEndian.AppendUint64(dst, reg.LeaseMs)
	}
	if reg.Version == 3 {
		dst = binary.BigEndian.AppendUint64(dst, reg.ExpectedGeneration)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(reg.Ranks)))
	for _, rk := range reg.Ranks {
		dst = binary.BigEndian.AppendUint32(dst, rk)
	}
	return dst
}

// LeasePayload is a decoded RENEW_WORKER_LEASE / UNREGISTER_WORKER payload.
type LeasePayload struct {
	Worker     uint64
	OwnerNonce uint64
	LeaseMs    uint64 // RENEW_WORKER_LEASE only
}

// DecodeLease decodes u8 1, u64 worker, u64 non-zero nonce and, when
// withLease (RENEW_WORKER_LEASE), u64 lease_ms in [1, MaxLeaseMs]; exact
// length (DYNKV_INVALID_WORKER_LEASE).
func DecodeLease(b []byte, withLease bool) (LeasePayload, error) {
	r := reader{b: b}
	r.version("lease", payloadVersion)
	p := LeasePayload{Worker: r.u64("worker"), OwnerNonce: r.u64("owner nonce")}
	if r.err == nil && p.OwnerNonce == 0 {
		r.err = fmt.Errorf("owner nonce must be non-zero")
	}
	if withLease {
		p.LeaseMs = r.u64("lease ms")
		if r.err == nil && (p.LeaseMs < 1 || p.LeaseMs > MaxLeaseMs) {
			r.err = fmt.Errorf("lease %d ms outside [1, %d]", p.LeaseMs, MaxLeaseMs)
		}
	}
	if err := r.end("lease payload"); err != nil {
		return LeasePayload{}, codeErr(CodeInvalidWorkerLease)
	}
	return p, nil
}

// AppendLease appends a RENEW_WORKER_LEASE (withLease) or UNREGISTER_WORKER
// payload to dst.
func AppendLease(dst []byte, p LeasePayload, withLease bool) []byte {
	dst = append(dst, payloadVersion)
	dst = binary.BigEndian.AppendUint64(dst, p.Worker)
	dst = binary.BigEndian.AppendUint64(dst, p.OwnerNonce)
	if withLease {
		dst = binary.BigEndian.AppendUint64(dst, p.LeaseMs)
	}
	return dst
}

// DecodeSnapshot decodes a REPLACE_RANK_IF_GENERATION snapshot: u8 1, u32
// n ≤ MaxSnapshotEvents, n × (u32 len ≠ 0, APPLY event), exact length. Each
// event must be a store of exactly rank (DYNKV_INVALID_REPLACE).
func DecodeSnapshot(b []byte, rank Rank) ([]Event, error) {
	r := reader{b: b}
	r.version("snapshot", payloadVersion)
	n := r.count("event count", MaxSnapshotEvents, 4)
	var events []Event
	for i := 0; i < n && r.err == nil; i++ {
		size := r.u32("event length")
		if r.err == nil && (size == 0 || uint64(size) > uint64(len(r.b))) {
			r.err = fmt.Errorf("event %d: length %d of the %d bytes left", i, size, len(r.b))
		}
		if r.err != nil {
			break
		}
		ev, err := DecodeEvent(r.b[:size])
		r.b = r.b[size:]
		switch {
		case err != nil:
			r.err = fmt.Errorf("event %d: %v", i, err)
		case ev.Kind != KindStore:
			r.err = fmt.Errorf("event %d: kind %d, want store", i, ev.Kind)
		case ev.Rank != rank:
			r.err = fmt.Errorf("event %d: rank %d/%d, want %d/%d", i, ev.Rank.Worker, ev.Rank.DPRank, rank.Worker, rank.DPRank)
		}
		events = append(events, ev)
	}
	if err := r.end("snapshot"); err != nil {
		return nil, codeErr(CodeInvalidReplace)
	}
	return events, nil
}

// AppendSnapshot appends a REPLACE_RANK_IF_GENERATION snapshot of events.
func AppendSnapshot(dst []byte, events []Event) []byte {
	dst = append(dst, payloadVersion)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(events)))
	for _, ev := range events {
		body := AppendEvent(nil, ev)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
		dst = append(dst, body...)
	}
	return dst
}

// be64 and be32 read exact-width big-endian command arguments.
func be64(b []byte) (uint64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}

func be32(b []byte) (uint32, bool) {
	if len(b) != 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(b), true
}
