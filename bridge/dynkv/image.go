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
// order, rank states with their members in order, worker epochs with their
// lists in order, admission ranks, reservations, the counters, GC's cursor
// and cleanup partitions), so that a Store restored from it answers every
// later command as the Store it was taken from; what a Store derives
// (edges, child counts, positions, counts of a rank's active owners,
// admission ranks and reservations, the ranks holding blocks, dictionary
// orders, the CKF projection) is rebuilt. Images are canonical: maps are
// written sorted, so equal states give equal bytes. An image of another
// version is refused (version 1, without the orders GC follows, was written
// only by a development build).
//
// Layout (big-endian): magic, u32 version, u32 key count, then per key in
// byte order u32 length, key, Store. Store: u64 mutations, tickets,
// registration tokens, GC floor, reservation sequence; the GC cursor; u32 n
// rank states by (worker, rank); u32 n epochs by worker, each with its
// ranks in epoch order; u64 n nodes by external hash, each with its owners
// in array order; each rank's members in order; u32 n admission ranks in
// dictionary order; u32 n reservations by grant order; each epoch's
// admission ranks and reservations in epoch order. Decoding checks every
// count against the bytes left and every reference (an owner's rank, a
// member, an epoch's lists), so a corrupt image is an
// error, never a panic or an inconsistent Store.

const (
	imageMagic   = "GIDXIMG\x00"
	imageVersion = 2
)

// Bytes each entry takes at least (bounds the counts an image may declare).
const (
	imageRankBytes        = 8 + 4 + 6*8 + 4 + 1
	imageEpochBytes       = 7*8 + 1 + 4 + 4 + 4
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
	size := len(imageMagic) + 8
	for k, s := range e.stores {
		s.mu.RLock()
		size += len(k) + s.imageSize()
		s.mu.RUnlock()
	}
	w := &imageWriter{b: append(make([]byte, 0, size), imageMagic...)}
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

// imageSize is about the bytes of the Store's image, to allocate it once.
func (s *Store) imageSize() int {
	size := 128 + len(s.nodes)*imageNodeBytes + len(s.ranks)*(imageRankBytes+4) + len(s.epochs)*imageEpochBytes +
		len(s.admissions)*(imageAdmissionBytes+32) + len(s.reservations)*(imageReservationBytes+256)
	for _, st := range s.ranks {
		size += len(st.members) * (imageOwnerBytes + 12)
	}
	return size
}

// appendImage writes the Store (read-locked by the caller).
func (s *Store) appendImage(w *imageWriter) {
	for _, v := range []uint64{s.mutations, s.tickets, s.lifecycle, s.gcFloor, s.reservationSeq} {
		w.u64(v)
	}
	w.u8(s.gcPhase)
	w.u8(flags(s.gcCursor.set))
	w.u64(s.gcCursor.rank.Worker)
	w.u32(s.gcCursor.rank.DPRank)
	w.admissionKey(s.gcCursor.admission)
	w.u64(s.gcCursor.hash)
	ranks := sortedValues(s.ranks, func(a, b *rankState) int { return compareRank(a.rank, b.rank) })
	w.u32(uint32(len(ranks)))
	for _, st := range ranks {
		w.u64(st.rank.Worker)
		w.u32(st.rank.DPRank)
		for _, v := range []uint64{st.lastClear, st.dedupe, st.generation, st.tombGen, st.cleanupGen, st.cleanupNodeGen} {
			w.u64(v)
		}
		w.u32(uint32(st.cleanupNodesLeft))
		w.u8(flags(st.hasDedupe, st.retired, st.registered, st.tombstone, st.managed, st.tainted))
	}
	eps := sortedValues(s.epochs, func(a, b *epoch) int { return cmp.Compare(a.worker, b.worker) })
	w.u32(uint32(len(eps)))
	for _, ep := range eps {
		for _, v := range []uint64{ep.worker, ep.generation, ep.lifecycle, ep.nonce, ep.expiresMs, ep.lastExp, ep.cleanupGen} {
			w.u64(v)
		}
		w.u8(flags(ep.retiredAll, ep.ownerSet, ep.managed, ep.tainted, ep.lastExpSet, ep.pending))
		w.u32(uint32(ep.cleanupRanksLeft))
		w.u32(uint32(ep.cleanupAdmissionsLeft))
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
	for _, st := range ranks {
		w.u32(uint32(len(st.members)))
		for _, m := range st.members {
			w.u64(m.n.hash)
			w.u32(uint32(m.owner))
		}
	}
	adm := sortedValues(s.admissions, func(a, b *admissionRank) int { return compareAdmissionKey(a.key, b.key) })
	w.u32(uint32(len(adm)))
	for _, a := range adm {
		w.admissionKey(a.key)
		w.u32(a.capacity)
		w.u64(a.incarnation)
		w.u32(a.active)
		w.u64(a.cleanupGen)
	}
	res := sortedValues(s.reservations, func(a, b *reservation) int { return cmp.Compare(a.seq, b.seq) })
	w.u32(uint32(len(res)))
	for _, r := range res {
		w.reservationKey(r.key)
		w.u64(r.rank.Worker)
		w.u32(r.rank.DPRank)
		w.u64(r.incarnation)
		w.u64(r.expiresMs)
		w.u32(r.matched)
		w.u32(r.atGrant)
		w.bytes(r.raw)
		w.u64(r.seq)
	}
	for _, ep := range eps {
		w.u32(uint32(len(ep.admissions)))
		for _, a := range ep.admissions {
			w.admissionKey(a.key)
		}
		w.u32(uint32(len(ep.reservations)))
		for _, r := range ep.reservations {
			w.reservationKey(r.key)
		}
	}
}

func (w *imageWriter) admissionKey(k admissionKey) {
	w.bytes([]byte(k.domain))
	w.u64(k.rank.Worker)
	w.u32(k.rank.DPRank)
}

func (w *imageWriter) reservationKey(k reservationKey) {
	w.bytes([]byte(k.domain))
	w.u64(k.client)
	w.u64(k.request)
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

func (r *reader) admissionKey() admissionKey {
	return admissionKey{domain: string(r.blob("domain", MaxAdmissionDomainBytes)), rank: Rank{r.u64("worker"), r.u32("rank")}}
}

func (r *reader) reservationKey() reservationKey {
	return reservationKey{domain: string(r.blob("domain", MaxAdmissionDomainBytes)), client: r.u64("client"), request: r.u64("request")}
}

// decodeImage fills an empty Store from r.
func (s *Store) decodeImage(r *reader) error {
	for _, p := range []*uint64{&s.mutations, &s.tickets, &s.lifecycle, &s.gcFloor, &s.reservationSeq} {
		*p = r.u64("counter")
	}
	s.gcPhase = r.u8("GC phase")
	s.gcCursor = gcKey{set: r.u8("GC cursor")&1 != 0, rank: Rank{r.u64("cursor worker"), r.u32("cursor rank")}}
	s.gcCursor.admission, s.gcCursor.hash = r.admissionKey(), r.u64("cursor hash")
	if r.err == nil && s.gcPhase >= gcPhases {
		return fmt.Errorf("GC phase %d", s.gcPhase)
	}
	var ranks []*rankState
	for i, n := 0, r.count("rank count", math.MaxInt32, imageRankBytes); i < n && r.err == nil; i++ {
		st := &rankState{rank: Rank{r.u64("worker"), r.u32("rank")}, nodes: map[*node]int{}, epochIdx: -1}
		for _, p := range []*uint64{&st.lastClear, &st.dedupe, &st.generation, &st.tombGen, &st.cleanupGen, &st.cleanupNodeGen} {
			*p = r.u64("rank field")
		}
		st.cleanupNodesLeft = int(r.u32("cleanup nodes left"))
		f := r.u8("rank flags")
		st.hasDedupe, st.retired, st.registered = f&rankHasDedupe != 0, f&rankRetired != 0, f&rankRegistered != 0
		st.tombstone, st.managed, st.tainted = f&rankTombstone != 0, f&rankManaged != 0, f&rankTainted != 0
		if i > 0 && compareRank(ranks[i-1].rank, st.rank) >= 0 {
			return fmt.Errorf("rank %v out of order", st.rank)
		}
		ranks = append(ranks, st)
		s.ranks[st.rank] = st
	}
	var eps []*epoch
	for i, n := 0, r.count("epoch count", math.MaxInt32, imageEpochBytes); i < n && r.err == nil; i++ {
		ep := &epoch{}
		for _, p := range []*uint64{&ep.worker, &ep.generation, &ep.lifecycle, &ep.nonce, &ep.expiresMs, &ep.lastExp, &ep.cleanupGen} {
			*p = r.u64("epoch field")
		}
		f := r.u8("epoch flags")
		ep.retiredAll, ep.ownerSet, ep.managed = f&epochRetiredAll != 0, f&epochOwnerSet != 0, f&epochManaged != 0
		ep.tainted, ep.lastExpSet, ep.pending = f&epochTainted != 0, f&epochLastExpSet != 0, f&epochPending != 0
		ep.cleanupRanksLeft, ep.cleanupAdmissionsLeft = int(r.u32("cleanup ranks left")), int(r.u32("cleanup admissions left"))
		if i > 0 && ep.worker <= eps[i-1].worker {
			return fmt.Errorf("epoch of worker %d out of order", ep.worker)
		}
		for j, m := 0, r.count("epoch rank count", math.MaxInt32, 4); j < m && r.err == nil; j++ {
			st := s.ranks[Rank{ep.worker, r.u32("epoch rank")}]
			if r.err != nil {
				break
			}
			if st == nil || st.epochIdx >= 0 {
				return fmt.Errorf("epoch of worker %d lists a rank it has not, or twice", ep.worker)
			}
			ep.ranks = listAdd(ep.ranks, st)
		}
		eps = append(eps, ep)
		s.epochs[ep.worker] = ep
	}
	for _, st := range ranks {
		if (s.epochs[st.rank.Worker] != nil) != (st.epochIdx >= 0) {
			return fmt.Errorf("rank %v is not in its worker's epoch", st.rank)
		}
	}
	if err := s.decodeNodes(r, ranks); err != nil {
		return err
	}
	var prevAdm admissionKey
	for i, n := 0, r.count("admission count", math.MaxInt32, imageAdmissionBytes); i < n && r.err == nil; i++ {
		a := &admissionRank{key: r.admissionKey(), capacity: r.u32("capacity"), incarnation: r.u64("incarnation"), active: r.u32("active"), cleanupGen: r.u64("cleanup"), epochIdx: -1}
		if i > 0 && compareAdmissionKey(prevAdm, a.key) >= 0 {
			return fmt.Errorf("admission rank %v out of order", a.key)
		}
		prevAdm = a.key
		s.admissions[a.key] = a
		s.admissionOrder.add(a.key)
		if st := s.ranks[a.key.rank]; st != nil {
			st.admissionCount++
		}
	}
	for i, n := 0, r.count("reservation count", math.MaxInt32, imageReservationBytes); i < n && r.err == nil; i++ {
		res := &reservation{key: r.reservationKey(), rank: Rank{r.u64("worker"), r.u32("rank")}, epochIdx: -1}
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
		if st := s.ranks[res.rank]; st != nil {
			st.reservationCount++
		}
	}
	for _, ep := range eps {
		for j, m := 0, r.count("epoch admission count", math.MaxInt32, 17); j < m && r.err == nil; j++ {
			a := s.admissions[r.admissionKey()]
			if r.err != nil {
				break
			}
			if a == nil || a.key.rank.Worker != ep.worker || a.epochIdx >= 0 {
				return fmt.Errorf("epoch of worker %d lists an admission rank it has not, or twice", ep.worker)
			}
			ep.admissions = listAdd(ep.admissions, a)
		}
		for j, m := 0, r.count("epoch reservation count", math.MaxInt32, 21); j < m && r.err == nil; j++ {
			res := s.reservations[r.reservationKey()]
			if r.err != nil {
				break
			}
			if res == nil || res.rank.Worker != ep.worker || res.epochIdx >= 0 {
				return fmt.Errorf("epoch of worker %d lists a reservation it has not, or twice", ep.worker)
			}
			ep.reservations = listAdd(ep.reservations, res)
		}
		if ep.cleanupRanksLeft > len(ep.ranks) || ep.cleanupAdmissionsLeft > len(ep.admissions) {
			return fmt.Errorf("epoch of worker %d: cleanup partitions beyond its lists", ep.worker)
		}
	}
	if r.err != nil {
		return r.err
	}
	for _, a := range s.admissions {
		if s.epochs[a.key.rank.Worker] != nil && a.epochIdx < 0 {
			return fmt.Errorf("admission rank %v is not in its worker's epoch", a.key)
		}
	}
	for _, res := range s.reservations {
		if s.epochs[res.rank.Worker] != nil && res.epochIdx < 0 {
			return fmt.Errorf("reservation %v is not in its worker's epoch", res.key)
		}
	}
	for _, st := range ranks {
		s.rankOrder.add(st.rank)
	}
	for _, ep := range eps {
		s.epochOrder.add(ep.worker)
	}
	return s.rebuildDerived()
}

// decodeNodes reads the nodes with their owners and then each rank's
// members (ranks in the image's order).
func (s *Store) decodeNodes(r *reader, ranks []*rankState) error {
	nodes := r.u64("node count")
	if r.err == nil && nodes > uint64(len(r.b))/imageNodeBytes {
		return fmt.Errorf("node count %d over the image's bytes", nodes)
	}
	s.nodes, s.edges = make(map[uint64]*node, nodes), make(map[edge]*node, nodes)
	owned := map[*rankState]int{} // owners of each rank, which its members must list
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
			o := owner{rank: st, eventID: r.u64("event id"), cleanupGen: r.u64("owner cleanup"), active: r.u8("owner flags")&1 != 0}
			if r.err != nil {
				break
			}
			if st == nil {
				return fmt.Errorf("node %#x has an owner of no rank", n.hash)
			}
			owned[st]++
			n.owners = append(n.owners, o)
			if o.active {
				st.active++
			}
		}
		s.nodes[n.hash] = n
		s.edges[edge{n.parent, n.local}] = n
		s.nodeOrder.add(n.hash)
	}
	for _, n := range s.nodes {
		if p := s.nodes[n.parent]; n.parent != RootParent && p != nil {
			p.children++
		}
	}
	// Each rank lists every node it owns once, with the owner's position:
	// as many members as it has owners, each naming one of them, none
	// twice (so a node with two owners of one rank is refused too).
	for _, st := range ranks {
		m := r.count("member count", math.MaxInt32, 12)
		st.nodes, st.members = make(map[*node]int, m), make([]ownedNode, 0, m)
		for j := 0; j < m && r.err == nil; j++ {
			n, oi := s.nodes[r.u64("member")], int(r.u32("owner position"))
			if r.err != nil {
				break
			}
			if n == nil || oi >= len(n.owners) || n.owners[oi].rank != st {
				return fmt.Errorf("rank %v lists a member it does not own", st.rank)
			}
			if _, dup := st.nodes[n]; dup {
				return fmt.Errorf("rank %v lists node %#x twice", st.rank, n.hash)
			}
			st.addMember(n, oi)
		}
		if r.err == nil && (len(st.members) != owned[st] || st.cleanupNodesLeft > len(st.members)) {
			return fmt.Errorf("rank %v: members do not match its owners", st.rank)
		}
	}
	return r.err
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
