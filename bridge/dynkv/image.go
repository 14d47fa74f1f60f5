package dynkv

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// A state image is the whole state of an Engine as bytes: what a log rewrite
// (aof.go) writes in place of the commands that built it. It holds every
// key with everything its Store keeps (nodes with their owners in array
// order, rank states, worker epochs with their rank order, admission ranks,
// reservations, the counters), so that a Store restored from it answers
// every later command as the Store it was taken from; what a Store derives
// (edges, child counts, each rank's node positions and active count, the
// ranks holding blocks, the CKF projection) is rebuilt. Images are
// canonical: maps are written sorted, so equal states give equal bytes.
//
// Layout (big-endian): magic, u32 version, u32 key count, then per key in
// byte order u32 length, key, Store. Store: u64 mutations, tickets,
// registration tokens, GC floor, reservation sequence; u32 n rank states
// by (worker, rank); u32 n epochs by worker; u64 n nodes by external hash;
// u32 n admission ranks by (domain, worker, rank); u32 n reservations by
// grant order. Decoding checks every count against the bytes left and every
// reference (an owner's rank, an epoch's ranks), so a corrupt image is an
// error, never a panic or an inconsistent Store.

const (
	imageMagic   = "GIDXIMG\x00"
	imageVersion = 1
)

// Bytes each entry takes at least (bounds the counts an image may declare).
const (
	imageRankBytes        = 8 + 4 + 5*8 + 1
	imageEpochBytes       = 8 + 7*8 + 1 + 4
	imageNodeBytes        = 4*8 + 4
	imageOwnerBytes       = 8 + 4 + 8 + 8 + 1
	imageAdmissionBytes   = 4 + 1 + 8 + 4 + 4 + 8 + 4 + 8
	imageReservationBytes = 4 + 1 + 8 + 8 + 8 + 4 + 8 + 8 + 4 + 4 + 4 + 8
)

// Rank state and epoch flag bits.
const (
	rankHasDedupe = 1 << iota
	rankRetired
	rankRegistered
	rankTombstone
	rankManaged
	rankTainted
)

const (
	epochRetiredAll = 1 << iota
	epochOwnerSet
	epochManaged
	epochTainted
	epochLastExpSet
	epochPending
)

// imageWriter appends big-endian fields.
type imageWriter struct{ b []byte }

func (w *imageWriter) u8(v uint8)   { w.b = append(w.b, v) }
func (w *imageWriter) u32(v uint32) { w.b = binary.BigEndian.AppendUint32(w.b, v) }
func (w *imageWriter) u64(v uint64) { w.b = binary.BigEndian.AppendUint64(w.b, v) }
func (w *imageWriter) bytes(v []byte) {
	w.u32(uint32(len(v)))
	w.b = append(w.b, v...)
}

func flags(bits ...bool) uint8 {
	var f uint8
	for i, b := range bits {
		if b {
			f |= 1 << i
		}
	}
	return f
}

// image returns the engine's state image. Write commands wait meanwhile;
// reads go on.
func (e *Engine) image() []byte {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.mu.RLock()
	defer e.mu.RUnlock()
	keys := make([]string, 0, len(e.stores))
	for k := range e.stores {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w := &imageWriter{b: []byte(imageMagic)}
	w.u32(imageVersion)
	w.u32(uint32(len(keys)))
	for _, k := range keys {
		w.bytes([]byte(k))
		s := e.stores[k]
		s.mu.RLock()
		s.appendImage(w)
		s.mu.RUnlock()
	}
	return w.b
}

// appendImage writes the Store (read-locked by the caller).
func (s *Store) appendImage(w *imageWriter) {
	for _, v := range []uint64{s.mutations, s.tickets, s.lifecycle, s.gcFloor, s.reservationSeq} {
		w.u64(v)
	}
	ranks := sortedValues(s.ranks, func(a, b *rankState) int { return compareRank(a.rank, b.rank) })
	w.u32(uint32(len(ranks)))
	for _, st := range ranks {
		w.u64(st.rank.Worker)
		w.u32(st.rank.DPRank)
		for _, v := range []uint64{st.lastClear, st.dedupe, st.generation, st.tombGen, st.cleanupGen} {
			w.u64(v)
		}
		w.u8(flags(st.hasDedupe, st.retired, st.registered, st.tombstone, st.managed, st.tainted))
	}
	eps := s.sortedEpochs()
	w.u32(uint32(len(eps)))
	for _, ep := range eps {
		for _, v := range []uint64{ep.worker, ep.generation, ep.lifecycle, ep.nonce, ep.expiresMs, ep.lastExp, ep.cleanupGen} {
			w.u64(v)
		}
		w.u8(flags(ep.retiredAll, ep.ownerSet, ep.managed, ep.tainted, ep.lastExpSet, ep.pending))
		w.u32(uint32(len(ep.ranks)))
		for _, st := range ep.ranks {
			w.u32(st.rank.DPRank)
		}
	}
	nodes := sortedValues(s.nodes, func(a, b *node) int { return cmp.Compare(a.hash, b.hash) })
	w.u64(uint64(len(nodes)))
	for _, n := range nodes {
		for _, v := range []uint64{n.hash, n.parent, n.local, n.canon} {
			w.u64(v)
		}
		w.u32(uint32(len(n.owners)))
		for _, o := range n.owners {
			w.u64(o.rank.rank.Worker)
			w.u32(o.rank.rank.DPRank)
			w.u64(o.eventID)
			w.u64(o.cleanupGen)
			w.u8(flags(o.active))
		}
	}
	adm := make([]admissionKey, 0, len(s.admissions))
	for k := range s.admissions {
		adm = append(adm, k)
	}
	slices.SortFunc(adm, compareAdmissionKey)
	w.u32(uint32(len(adm)))
	for _, k := range adm {
		a := s.admissions[k]
		w.bytes([]byte(k.domain))
		w.u64(k.rank.Worker)
		w.u32(k.rank.DPRank)
		w.u32(a.capacity)
		w.u64(a.incarnation)
		w.u32(a.active)
		w.u64(a.cleanupGen)
	}
	res := sortedValues(s.reservations, func(a, b *reservation) int { return cmp.Compare(a.seq, b.seq) })
	w.u32(uint32(len(res)))
	for _, r := range res {
		w.bytes([]byte(r.key.domain))
		w.u64(r.key.client)
		w.u64(r.key.request)
		w.u64(r.rank.Worker)
		w.u32(r.rank.DPRank)
		w.u64(r.incarnation)
		w.u64(r.expiresMs)
		w.u32(r.matched)
		w.u32(r.atGrant)
		w.bytes(r.raw)
		w.u64(r.seq)
	}
}

// sortedValues returns the values of m sorted by compare.
func sortedValues[K comparable, V any](m map[K]V, compare func(a, b V) int) []V {
	vs := make([]V, 0, len(m))
	for _, v := range m {
		vs = append(vs, v)
	}
	slices.SortFunc(vs, compare)
	return vs
}

func compareAdmissionKey(a, b admissionKey) int {
	return cmp.Or(cmp.Compare(a.domain, b.domain), compareRank(a.rank, b.rank))
}

// decodeImage decodes a state image into stores with backing b.
func decodeImage(img []byte, b Backing) (map[string]*Store, error) {
	if !bytes.HasPrefix(img, []byte(imageMagic)) {
		return nil, fmt.Errorf("dynkv: state image: bad magic")
	}
	r := &reader{b: img[len(imageMagic):]}
	if v := r.u32("image version"); r.err == nil && v != imageVersion {
		return nil, fmt.Errorf("dynkv: state image version %d, want %d", v, imageVersion)
	}
	n := r.count("key count", MaxKeys, 4)
	stores := make(map[string]*Store, n)
	prev := ""
	for i := range n {
		key := string(r.blob("key", MaxKeyBytes))
		if r.err != nil {
			break
		}
		if i > 0 && key <= prev {
			return nil, fmt.Errorf("dynkv: state image: key %q out of order", key)
		}
		prev = key
		s, err := NewStoreWith(b)
		if err != nil {
			return nil, err
		}
		if err := s.decodeImage(r); err != nil {
			return nil, fmt.Errorf("dynkv: state image of key %q: %w", key, err)
		}
		stores[key] = s
	}
	if err := r.end("state image"); err != nil {
		return nil, fmt.Errorf("dynkv: state image: %w", err)
	}
	return stores, nil
}

// blob reads a u32 length (at most limit) and that many bytes.
func (r *reader) blob(what string, limit int) []byte {
	n := r.count(what+" length", limit, 1)
	if r.err != nil {
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// decodeImage fills an empty Store from r.
func (s *Store) decodeImage(r *reader) error {
	for _, p := range []*uint64{&s.mutations, &s.tickets, &s.lifecycle, &s.gcFloor, &s.reservationSeq} {
		*p = r.u64("counter")
	}
	var lastRank Rank
	for i, n := 0, r.count("rank count", math.MaxInt32, imageRankBytes); i < n && r.err == nil; i++ {
		st := &rankState{rank: Rank{r.u64("worker"), r.u32("rank")}, nodes: map[*node]int{}}
		for _, p := range []*uint64{&st.lastClear, &st.dedupe, &st.generation, &st.tombGen, &st.cleanupGen} {
			*p = r.u64("rank field")
		}
		f := r.u8("rank flags")
		st.hasDedupe, st.retired, st.registered = f&rankHasDedupe != 0, f&rankRetired != 0, f&rankRegistered != 0
		st.tombstone, st.managed, st.tainted = f&rankTombstone != 0, f&rankManaged != 0, f&rankTainted != 0
		if i > 0 && compareRank(lastRank, st.rank) >= 0 {
			return fmt.Errorf("rank %v out of order", st.rank)
		}
		lastRank = st.rank
		s.ranks[st.rank] = st
	}
	inEpoch := 0
	var lastWorker uint64
	for i, n := 0, r.count("epoch count", math.MaxInt32, imageEpochBytes); i < n && r.err == nil; i++ {
		ep := &epoch{}
		for _, p := range []*uint64{&ep.worker, &ep.generation, &ep.lifecycle, &ep.nonce, &ep.expiresMs, &ep.lastExp, &ep.cleanupGen} {
			*p = r.u64("epoch field")
		}
		f := r.u8("epoch flags")
		ep.retiredAll, ep.ownerSet, ep.managed = f&epochRetiredAll != 0, f&epochOwnerSet != 0, f&epochManaged != 0
		ep.tainted, ep.lastExpSet, ep.pending = f&epochTainted != 0, f&epochLastExpSet != 0, f&epochPending != 0
		if i > 0 && ep.worker <= lastWorker {
			return fmt.Errorf("epoch of worker %d out of order", ep.worker)
		}
		lastWorker = ep.worker
		for j, m := 0, r.count("epoch rank count", math.MaxInt32, 4); j < m && r.err == nil; j++ {
			st := s.ranks[Rank{ep.worker, r.u32("epoch rank")}]
			if r.err == nil && (st == nil || slices.Contains(ep.ranks, st)) {
				return fmt.Errorf("epoch of worker %d lists a rank it has not, or twice", ep.worker)
			}
			ep.ranks = append(ep.ranks, st)
		}
		inEpoch += len(ep.ranks)
		s.epochs[ep.worker] = ep
	}
	for _, st := range s.ranks {
		if s.epochs[st.rank.Worker] != nil {
			inEpoch--
		}
	}
	if r.err == nil && inEpoch != 0 {
		return fmt.Errorf("an epoch leaves out ranks of its worker")
	}
	nodes := r.u64("node count")
	if r.err == nil && nodes > uint64(len(r.b))/imageNodeBytes {
		return fmt.Errorf("node count %d over the image's bytes", nodes)
	}
	var lastHash uint64
	for i := uint64(0); i < nodes && r.err == nil; i++ {
		n := &node{hash: r.u64("hash"), parent: r.u64("parent"), local: r.u64("local"), canon: r.u64("canon")}
		if i > 0 && n.hash <= lastHash {
			return fmt.Errorf("node %#x out of order", n.hash)
		}
		lastHash = n.hash
		if _, clash := s.edges[edge{n.parent, n.local}]; clash {
			return fmt.Errorf("node %#x repeats an edge", n.hash)
		}
		owners := r.count("owner count", math.MaxInt32, imageOwnerBytes)
		n.owners = make([]owner, 0, owners)
		for j := 0; j < owners && r.err == nil; j++ {
			st := s.ranks[Rank{r.u64("owner worker"), r.u32("owner rank")}]
			o := owner{rank: st, eventID: r.u64("event id"), cleanupGen: r.u64("owner cleanup")}
			active := r.u8("owner flags")&1 != 0
			if r.err != nil {
				break
			}
			if st == nil {
				return fmt.Errorf("node %#x has an owner of no rank", n.hash)
			}
			if _, dup := st.nodes[n]; dup {
				return fmt.Errorf("node %#x has two owners of rank %v", n.hash, st.rank)
			}
			st.nodes[n] = len(n.owners)
			n.owners = append(n.owners, o)
			if active {
				n.owners[len(n.owners)-1].active = true
				st.active++
			}
		}
		s.nodes[n.hash] = n
		s.edges[edge{n.parent, n.local}] = n
	}
	for _, n := range s.nodes {
		if p := s.nodes[n.parent]; n.parent != RootParent && p != nil {
			p.children++
		}
	}
	var lastAdm admissionKey
	for i, n := 0, r.count("admission count", math.MaxInt32, imageAdmissionBytes); i < n && r.err == nil; i++ {
		k := admissionKey{domain: string(r.blob("domain", MaxAdmissionDomainBytes)), rank: Rank{r.u64("worker"), r.u32("rank")}}
		a := &admissionRank{capacity: r.u32("capacity"), incarnation: r.u64("incarnation"), active: r.u32("active"), cleanupGen: r.u64("cleanup")}
		if i > 0 && compareAdmissionKey(lastAdm, k) >= 0 {
			return fmt.Errorf("admission rank %v out of order", k)
		}
		lastAdm = k
		s.admissions[k] = a
	}
	for i, n := 0, r.count("reservation count", math.MaxInt32, imageReservationBytes); i < n && r.err == nil; i++ {
		res := &reservation{key: reservationKey{domain: string(r.blob("domain", MaxAdmissionDomainBytes)), client: r.u64("client"), request: r.u64("request")}}
		res.rank = Rank{r.u64("worker"), r.u32("rank")}
		res.incarnation, res.expiresMs = r.u64("incarnation"), r.u64("expiry")
		res.matched, res.atGrant = r.u32("matched"), r.u32("active at grant")
		res.raw = bytes.Clone(r.blob("request", MaxRequestBytes))
		res.seq = r.u64("grant sequence")
		if r.err != nil {
			break
		}
		if _, dup := s.reservations[res.key]; dup || res.seq > s.reservationSeq {
			return fmt.Errorf("reservation %v repeated or beyond the grant sequence", res.key)
		}
		s.reservations[res.key] = res
	}
	if r.err != nil {
		return r.err
	}
	return s.rebuildDerived()
}

// rebuildDerived recomputes the ranks holding blocks and, in ckf mode, the
// projection of every active owner (in node order, so a restore is
// deterministic).
func (s *Store) rebuildDerived() error {
	for _, st := range s.ranks {
		if st.active > 0 {
			s.holding++
		}
	}
	if s.proj == nil {
		return nil
	}
	if s.holding > s.laneLimit {
		return fmt.Errorf("%d ranks hold blocks, ckf mode allows %d", s.holding, s.laneLimit)
	}
	hashes := make([]uint64, 0, len(s.nodes))
	for h := range s.nodes {
		hashes = append(hashes, h)
	}
	slices.Sort(hashes)
	for _, h := range hashes {
		n := s.nodes[h]
		for _, o := range n.owners {
			if o.active {
				s.proj.activated(o.rank.rank, n)
			}
		}
	}
	return nil
}

// restoreImage replaces every index of the engine with the image's.
func (e *Engine) restoreImage(img []byte) error {
	stores, err := decodeImage(img, e.backing)
	if err != nil {
		return err
	}
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stores = stores
	return nil
}
