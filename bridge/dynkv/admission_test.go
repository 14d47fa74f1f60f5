package dynkv

import (
	"encoding/binary"
	"testing"
	"time"
)

// reserveRequest encodes a SELECT_RESERVE payload (upstream's
// _reserve_request).
func reserveRequest(domain string, client, request, leaseMs uint64, hashes []uint64, cands ...[3]uint64) []byte {
	b := []byte{1}
	b = binary.BigEndian.AppendUint32(b, uint32(len(domain)))
	b = append(b, domain...)
	b = binary.BigEndian.AppendUint64(b, client)
	b = binary.BigEndian.AppendUint64(b, request)
	b = binary.BigEndian.AppendUint64(b, leaseMs)
	b = binary.BigEndian.AppendUint32(b, uint32(len(hashes)))
	for _, h := range hashes {
		b = binary.BigEndian.AppendUint64(b, h)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(cands)))
	for _, c := range cands {
		b = binary.BigEndian.AppendUint64(b, c[0])
		b = binary.BigEndian.AppendUint32(b, uint32(c[1]))
		b = binary.BigEndian.AppendUint32(b, uint32(c[2]))
	}
	return b
}

// grant is a decoded reservation reply.
type grant struct {
	client, request, worker uint64
	rank                    uint32
	expires                 uint64
	matched, active         uint32
}

func (x *eng) reserve(key string, payload []byte) (raw string, g *grant) {
	x.t.Helper()
	r := x.do("DYNKV.SELECT_RESERVE", key, payload)
	raw = render(r)
	if r.kind != replyBulk {
		return raw, nil
	}
	b := r.bulk
	if len(b) == 2 && b[0] == 1 && b[1] == admissionNoCapacity {
		return raw, nil
	}
	if len(b) != 2+8+8+8+4+8+4+4 || b[1] != admissionReserved {
		x.t.Fatalf("SELECT_RESERVE reply %x", b)
	}
	b = b[2:]
	g = &grant{client: binary.BigEndian.Uint64(b), request: binary.BigEndian.Uint64(b[8:]), worker: binary.BigEndian.Uint64(b[16:]),
		rank: binary.BigEndian.Uint32(b[24:]), expires: binary.BigEndian.Uint64(b[28:]), matched: binary.BigEndian.Uint32(b[36:]),
		active: binary.BigEndian.Uint32(b[40:])}
	return raw, g
}

func identity(domain string, client, request uint64, tail ...uint64) []byte {
	b := []byte{1}
	b = binary.BigEndian.AppendUint32(b, uint32(len(domain)))
	b = append(b, domain...)
	b = binary.BigEndian.AppendUint64(b, client)
	b = binary.BigEndian.AppendUint64(b, request)
	for _, v := range tail {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

const noCapacity = "$0100"

// TestModule_Admission is admission_helpers.py: registration gates
// admission, a stale candidate does not poison a healthy one, the module
// owns per-domain capacities, retries return the original grant, releases
// and renewals are fenced by the lease's expiry, expired leases are reaped
// by the next admission write, and removal, reset, replacement and
// worker-wide removal revoke live reservations.
func TestModule_Admission(t *testing.T) {
	x := newEng(t)
	const k, domain = "admission-index", "prefill"
	q := []uint64{81, 82}
	cands := [][3]uint64{{810, 0, 2}, {811, 0, 1}}
	x.want("+OK", "DYNKV.REGISTER_WORKER", k, u64(810), u32(0))
	x.want("+OK", "DYNKV.REGISTER_WORKER", k, u64(811), u32(0))
	x.apply(k, ev(KindStore, 812, 0, 1, root, [2]uint64{8101, 81}, [2]uint64{8102, 82}), "+OK")
	for _, w := range []uint64{810, 811} {
		x.apply(k, ev(KindStore, w, 0, 1, root, [2]uint64{8101, 81}, [2]uint64{8102, 82}), "+OK")
	}
	gate := reserveRequest("registration-gate", 901, 902, 60_000, q, [3]uint64{812, 0, 1})
	if raw, g := x.reserve(k, gate); g != nil || raw != noCapacity {
		t.Fatalf("reserve of an unregistered rank = %s", raw)
	}
	x.want("+OK", "DYNKV.REGISTER_WORKER", k, u64(812), u32(0))
	_, g := x.reserve(k, gate)
	if g == nil {
		t.Fatalf("reserve after registration: no grant")
	}
	x.want("$0101", "DYNKV.RELEASE", k, identity("registration-gate", 901, 902, g.expires))
	if _, g := x.reserve(k, reserveRequest("stale-candidate", 903, 904, 60_000, q, [3]uint64{999, 0, 1}, [3]uint64{810, 0, 2})); g == nil || g.worker != 810 {
		t.Errorf("a stale candidate poisoned a healthy one: %+v", g)
	} else {
		x.want("$0101", "DYNKV.RELEASE", k, identity("stale-candidate", 903, 904, g.expires))
	}
	x.want("-DYNKV_ADMIT_APPLY_INTERNAL_ONLY", "DYNKV.ADMIT_APPLY", k, "not-internal")

	var admitted []*grant
	var raws []string
	for slot := uint64(0); slot < 3; slot++ {
		raw, g := x.reserve(k, reserveRequest(domain, 1000+slot, 2000+slot, 60_000, q, cands...))
		if g == nil || g.matched != 2 {
			t.Fatalf("reserve %d = %s", slot, raw)
		}
		admitted, raws = append(admitted, g), append(raws, raw)
	}
	// Equal prefixes: the lower reservation count wins, then the lower rank.
	if a, b, c := admitted[0], admitted[1], admitted[2]; a.worker != 810 || a.active != 1 || b.worker != 811 || b.active != 1 || c.worker != 810 || c.active != 2 {
		t.Errorf("grants %+v %+v %+v, want 810 (1), 811 (1), 810 (2)", a, b, c)
	}
	x.want(":3", "DYNKV.ADMISSION_STATS", k)
	for _, bad := range [][3]uint64{{810, 0, 3}, {810, 0, 0}} {
		x.want("-DYNKV_INVALID_CANDIDATE", "DYNKV.SELECT_RESERVE", k, reserveRequest(domain, 1010, 2010, 60_000, q, bad))
	}
	if raw, g := x.reserve(k, reserveRequest(domain, 1010, 2010, 60_000, q, [3]uint64{999, 0, 1})); g != nil || raw != noCapacity {
		t.Errorf("unknown candidate = %s", raw)
	}
	x.want("-DYNKV_INVALID_CANDIDATE", "DYNKV.SELECT_RESERVE", k, reserveRequest("max-capacity", 1011, 2011, 60_000, q, [3]uint64{810, 0, 1<<32 - 1}))
	full := reserveRequest(domain, 1004, 2004, 60_000, q, cands...)
	if raw, g := x.reserve(k, full); g != nil || raw != noCapacity {
		t.Errorf("reserve at capacity = %s", raw)
	}
	if raw, _ := x.reserve(k, reserveRequest(domain, 1000, 2000, 60_000, q, cands...)); raw != raws[0] {
		t.Errorf("retried reserve = %s, want the original %s", raw, raws[0])
	}
	x.want(":3", "DYNKV.ADMISSION_STATS", k)
	x.want("-DYNKV_REQUEST_CONFLICT", "DYNKV.SELECT_RESERVE", k, reserveRequest(domain, 1000, 2000, 59_999, q, cands...))
	first := admitted[0]
	x.want("$0101", "DYNKV.RELEASE", k, identity(domain, first.client, first.request, first.expires))
	x.want("$0100", "DYNKV.RELEASE", k, identity(domain, first.client, first.request, first.expires))
	x.want(":2", "DYNKV.ADMISSION_STATS", k)
	_, repl := x.reserve(k, full)
	if repl == nil {
		t.Fatalf("reserve after a release: no grant")
	}
	x.now = x.now.Add(time.Second)
	renew := x.do("DYNKV.RENEW", k, identity(domain, repl.client, repl.request, repl.expires, 90_000))
	if render(renew) == render(reservationReply(nil)) || renew.kind != replyBulk {
		t.Fatalf("RENEW = %s", render(renew))
	}
	x.want(render(renew), "DYNKV.RENEW", k, identity(domain, repl.client, repl.request, repl.expires, 90_000))
	x.want("-DYNKV_RESERVATION_EXPIRED", "DYNKV.RELEASE", k, identity(domain, repl.client, repl.request, repl.expires))
	renewedExpiry := binary.BigEndian.Uint64(renew.bulk[30:])
	for _, g := range admitted[1:] {
		x.want("$0101", "DYNKV.RELEASE", k, identity(domain, g.client, g.request, g.expires))
	}
	x.want("$0101", "DYNKV.RELEASE", k, identity(domain, repl.client, repl.request, renewedExpiry))
	x.want(":0", "DYNKV.ADMISSION_STATS", k)

	// Capacity and load are per domain.
	_, pre := x.reserve(k, reserveRequest(domain, 3000, 4000, 60_000, q, cands...))
	_, dec := x.reserve(k, reserveRequest("decode", 3000, 4000, 60_000, q, cands...))
	if pre == nil || dec == nil || pre.worker != 810 || dec.worker != 810 || pre.active != 1 || dec.active != 1 {
		t.Errorf("per-domain grants %+v %+v, want both 810 with 1 active", pre, dec)
	}
	x.want("$0101", "DYNKV.RELEASE", k, identity(domain, 3000, 4000, pre.expires))
	x.want("$0101", "DYNKV.RELEASE", k, identity("decode", 3000, 4000, dec.expires))

	// An expired lease is reaped by the next admission write.
	_, short := x.reserve(k, reserveRequest(domain, 5000, 6000, 20, q, cands...))
	x.now = x.now.Add(60 * time.Millisecond)
	_, trigger := x.reserve(k, reserveRequest(domain, 5001, 6001, 60_000, q, cands...))
	if short == nil || trigger == nil {
		t.Fatalf("short lease %+v, trigger %+v", short, trigger)
	}
	x.want(":1", "DYNKV.ADMISSION_STATS", k)
	x.want("$0100", "DYNKV.RELEASE", k, identity(domain, short.client, short.request, short.expires))
	x.want("$0101", "DYNKV.RELEASE", k, identity(domain, trigger.client, trigger.request, trigger.expires))

	// An exact retry survives the retirement of an unrelated candidate.
	retry := reserveRequest(domain, 6100, 6200, 60_000, q, cands...)
	retryRaw, rg := x.reserve(k, retry)
	x.want("+OK", "DYNKV.REMOVE_WORKER", k, u64(811), u32(0))
	if raw, _ := x.reserve(k, retry); raw != retryRaw {
		t.Errorf("retry after an unrelated retirement = %s, want %s", raw, retryRaw)
	}
	x.want("+OK", "DYNKV.RESET_WORKER", k, u64(811), u32(0))
	x.want("+OK", "DYNKV.REGISTER_WORKER", k, u64(811), u32(0))
	x.want("$0101", "DYNKV.RELEASE", k, identity(domain, rg.client, rg.request, rg.expires))

	// Removal, reset, replacement and worker-wide removal revoke.
	_, active := x.reserve(k, reserveRequest(domain, 7000, 8000, 60_000, q, cands...))
	x.want("+OK", "DYNKV.REMOVE_WORKER", k, u64(active.worker), u32(active.rank))
	x.want(":0", "DYNKV.ADMISSION_STATS", k)
	if raw, g := x.reserve(k, reserveRequest(domain, 7001, 8001, 60_000, q, [3]uint64{active.worker, 0, 2})); g != nil {
		t.Errorf("reserve of a retired rank = %s", raw)
	}
	x.want("-DYNKV_WORKER_RETIRED", "DYNKV.REGISTER_WORKER", k, u64(active.worker), u32(active.rank))
	x.want("+OK", "DYNKV.RESET_WORKER", k, u64(active.worker), u32(active.rank))
	x.want("+OK", "DYNKV.REGISTER_WORKER", k, u64(active.worker), u32(active.rank))
	capacity := uint64(1)
	if active.worker == 810 {
		capacity = 2
	}
	if _, g := x.reserve(k, reserveRequest("reset-domain", 7100, 8100, 60_000, q, [3]uint64{active.worker, 0, capacity})); g == nil {
		t.Fatalf("reserve after reset: no grant")
	}
	x.want("+OK", "DYNKV.RESET_WORKER", k, u64(active.worker), u32(active.rank))
	x.want(":0", "DYNKV.ADMISSION_STATS", k)
	if _, g := x.reserve(k, reserveRequest("replace-domain", 7150, 8150, 60_000, q, [3]uint64{active.worker, 0, capacity})); g == nil {
		t.Fatalf("reserve before replacement: no grant")
	}
	gen := x.ticketOf("DYNKV.RANK_GENERATION", k, u64(active.worker), u32(0))
	if next := x.ticketOf("DYNKV.REPLACE_RANK_IF_GENERATION", k, u64(active.worker), u32(0), u64(gen),
		snapshot(ev(KindStore, active.worker, 0, 1, root, [2]uint64{8101, 81}, [2]uint64{8102, 82}))); next <= gen {
		t.Errorf("replacement ticket %d, want above %d", next, gen)
	}
	x.want(":0", "DYNKV.ADMISSION_STATS", k)
	if _, g := x.reserve(k, reserveRequest("all-retire", 7200, 8200, 60_000, q, [3]uint64{811, 0, 1})); g == nil {
		t.Fatalf("reserve before REMOVE_WORKER_ALL: no grant")
	}
	x.want("+OK", "DYNKV.REMOVE_WORKER_ALL", k, u64(811))
	x.want(":0", "DYNKV.ADMISSION_STATS", k)
	x.want("-DYNKV_WORKER_RETIRED", "DYNKV.REGISTER_WORKER", k, u64(811), u32(7))
}

// TestModule_CrashedOwnerIsReapedByAdmission is leases.py's crash: an owner
// stops renewing; MATCH skips it once its lease lapses, and the next
// SELECT_RESERVE ends the lease inline (revoking its reservation), so a
// successor registers without waiting for GC.
func TestModule_CrashedOwnerIsReapedByAdmission(t *testing.T) {
	x := newEng(t)
	const k, live, cw, co = "worker-owner-lease-index", 940, 941, 20001
	if got := x.leased(k, live, 10003, 10_000, 0, 1); got != "+OK" {
		t.Fatalf("live owner = %s", got)
	}
	if got := x.leased(k, cw, co, 80, 3); got != "+OK" {
		t.Fatalf("short lease = %s", got)
	}
	x.want("+OK", "DYNKV.APPLY_OWNED", k, u64(co), AppendEvent(nil, ev(KindStore, cw, 3, 50, root, [2]uint64{9411, 51})))
	if _, g := x.reserve(k, reserveRequest("crash-expiry", 1, 1, 60_000, nil, [3]uint64{cw, 3, 1})); g == nil {
		t.Fatalf("reservation of the crashing owner's rank: no grant")
	}
	x.now = x.now.Add(120 * time.Millisecond)
	wantMatch(t, x, k, []uint64{51}, map[Rank][2]uint64{})
	x.want("*[:1 :0 :1]", "DYNKV.LIFECYCLE_STATS", k)
	x.want(":1", "DYNKV.ADMISSION_STATS", k)
	if raw, g := x.reserve(k, reserveRequest("crash-expiry", 2, 2, 60_000, nil, [3]uint64{cw, 3, 1})); g != nil || raw != noCapacity {
		t.Errorf("reserve after the lease lapsed = %s, want no capacity", raw)
	}
	x.want(":0", "DYNKV.ADMISSION_STATS", k)
	if gen := x.ticketOf("DYNKV.RANK_GENERATION", k, u64(cw), u32(3)); gen == 0 {
		t.Errorf("rank ticket after the inline lease end = 0")
	}
	x.want("*[:1 :1 :1]", "DYNKV.LIFECYCLE_STATS", k)
	if got := x.leased(k, cw, 20002, 10_000, 3); got != "+OK" {
		t.Fatalf("crash successor = %s, want +OK without GC", got)
	}
	x.want("+OK", "DYNKV.APPLY_OWNED", k, u64(20002), AppendEvent(nil, ev(KindStore, cw, 3, 1, root, [2]uint64{9411, 51})))
	wantMatch(t, x, k, []uint64{51}, map[Rank][2]uint64{{cw, 3}: {1, 9411}})
	x.want("-DYNKV_STALE_WORKER_OWNER", "DYNKV.RENEW_WORKER_LEASE", k, lease(cw, co, 5000))
}

// TestModule_AdmissionExpiryOrder is admission_expiry.py: a renewal moves a
// reservation past a longer one, the next admission write reaps only the
// one that expired, releases hit any reservation, and an expiry storm is
// drained 64 reservations per admission write.
func TestModule_AdmissionExpiryOrder(t *testing.T) {
	x := newEng(t)
	const k, domain, w = "admission-expiry-heap-index", "prefill", 920
	cand := [3]uint64{w, 0, 16}
	x.want("+OK", "DYNKV.REGISTER_WORKER", k, u64(w), u32(0))
	_, first := x.reserve(k, reserveRequest(domain, 1, 1, 80, nil, cand))
	_, renewed := x.reserve(k, reserveRequest(domain, 2, 2, 100, nil, cand))
	_, long := x.reserve(k, reserveRequest(domain, 3, 3, 500, nil, cand))
	if first == nil || renewed == nil || long == nil {
		t.Fatalf("grants %+v %+v %+v", first, renewed, long)
	}
	x.want(":3", "DYNKV.ADMISSION_STATS", k)
	x.now = x.now.Add(30 * time.Millisecond)
	r := x.do("DYNKV.RENEW", k, identity(domain, 2, 2, renewed.expires, 900))
	if r.kind != replyBulk || len(r.bulk) != 46 {
		t.Fatalf("RENEW = %s", render(r))
	}
	renewedExpiry := binary.BigEndian.Uint64(r.bulk[30:])
	x.now = x.now.Add(100 * time.Millisecond)
	if _, trigger := x.reserve(k, reserveRequest(domain, 4, 4, 1000, nil, cand)); trigger == nil {
		t.Fatalf("trigger: no grant")
	} else {
		x.want(":3", "DYNKV.ADMISSION_STATS", k)
		x.want("$0100", "DYNKV.RELEASE", k, identity(domain, 1, 1, first.expires))
		x.want("$0101", "DYNKV.RELEASE", k, identity(domain, 3, 3, long.expires))
		x.want("$0101", "DYNKV.RELEASE", k, identity(domain, 2, 2, renewedExpiry))
		x.want("$0101", "DYNKV.RELEASE", k, identity(domain, 4, 4, trigger.expires))
	}
	x.want(":0", "DYNKV.ADMISSION_STATS", k)

	const bk, bw, burst = "admission-expiry-burst", 921, 512
	x.want("+OK", "DYNKV.REGISTER_WORKER", bk, u64(bw), u32(0))
	for n := uint64(0); n < burst; n++ {
		if _, g := x.reserve(bk, reserveRequest(domain, 10_000+n, 20_000+n, 1000, nil, [3]uint64{bw, 0, 1024})); g == nil {
			t.Fatalf("burst reservation %d: no grant", n)
		}
	}
	x.now = x.now.Add(1050 * time.Millisecond)
	if _, g := x.reserve(bk, reserveRequest(domain, 30_000, 40_000, 60_000, nil, [3]uint64{bw, 0, 1024})); g == nil {
		t.Fatalf("reservation after the storm: no grant")
	}
	x.want(render(integer(burst-64+1)), "DYNKV.ADMISSION_STATS", bk)
}
