package dynkv

import (
	"cmp"
	"slices"
	"strings"
)

// The module keeps its objects in ordered dictionaries (Valkey's rax,
// ordered by key bytes) and in per-object arrays whose positions it swaps.
// Which object a budget-limited GC reaches, and in which order a command
// visits a worker's objects, follow those orders, so the Store keeps them:
//
//   - keyOrder keeps the keys of a Store map in the module's dictionary
//     order, for GC's resumable cursor: nodes by external hash, rank states
//     by (worker, rank), epochs by worker, admission ranks by (domain
//     length, domain, worker, rank). The keys are big-endian in the
//     module, so these orders are numeric.
//   - A rank's members are the module's worker->nodes: each node it owns,
//     appended when its owner is created and swap-removed when the owner
//     goes.
//   - An epoch's ranks, admission ranks and reservations are the module's
//     worker_states, admission_rank_states and reservation_states: appended
//     when created (or, when the epoch is created, gathered in dictionary
//     order) and swap-removed when deleted.

// keyOrder keeps the keys of a map in an order for ordered scans, at O(1)
// per insertion: new keys wait in pending and are merged, and keys since
// deleted from the map dropped, when a scan needs the order (or when pending
// outgrows the map, so its memory stays bounded).
type keyOrder[K comparable] struct {
	sorted  []K
	pending []K
	compare func(a, b K) int
	live    func(K) bool // the key is in the map
	size    func() int   // the map's length
}

// add records a key just inserted into the map.
func (o *keyOrder[K]) add(k K) {
	o.pending = append(o.pending, k)
	if len(o.pending) > 2*o.size()+1024 {
		o.settle()
	}
}

// settle merges pending into sorted and drops keys no longer in the map.
func (o *keyOrder[K]) settle() {
	if len(o.pending) == 0 && len(o.sorted) <= 2*o.size()+64 {
		return
	}
	slices.SortFunc(o.pending, o.compare)
	merged := make([]K, 0, o.size())
	i, j := 0, 0
	for i < len(o.sorted) || j < len(o.pending) {
		var k K
		switch {
		case j == len(o.pending) || (i < len(o.sorted) && o.compare(o.sorted[i], o.pending[j]) <= 0):
			k = o.sorted[i]
			i++
		default:
			k = o.pending[j]
			j++
		}
		if o.live(k) && (len(merged) == 0 || merged[len(merged)-1] != k) {
			merged = append(merged, k)
		}
	}
	o.sorted, o.pending = merged, o.pending[:0]
}

// next returns the first key in the map after after (from the start when
// from is false).
func (o *keyOrder[K]) next(after K, from bool) (K, bool) {
	o.settle()
	i := 0
	if from {
		i, _ = slices.BinarySearchFunc(o.sorted, after, o.compare)
		for i < len(o.sorted) && o.compare(o.sorted[i], after) <= 0 {
			i++
		}
	}
	for ; i < len(o.sorted); i++ {
		if o.live(o.sorted[i]) {
			return o.sorted[i], true
		}
	}
	var zero K
	return zero, false
}

// compareAdmissionKey is the module's admission-rank dictionary order: the
// key is u32 domain length, domain, u64 worker, u32 rank, big-endian.
func compareAdmissionKey(a, b admissionKey) int {
	return cmp.Or(cmp.Compare(len(a.domain), len(b.domain)), strings.Compare(a.domain, b.domain), compareRank(a.rank, b.rank))
}

// compareReservationKey is the module's reservation dictionary order: u32
// domain length, domain, u64 client nonce, u64 request nonce.
func compareReservationKey(a, b reservationKey) int {
	return cmp.Or(cmp.Compare(len(a.domain), len(b.domain)), strings.Compare(a.domain, b.domain),
		cmp.Compare(a.client, b.client), cmp.Compare(a.request, b.request))
}

// initOrders sets up the Store's dictionary orders over its maps.
func (s *Store) initOrders() {
	s.nodeOrder = keyOrder[uint64]{compare: cmp.Compare[uint64],
		live: func(h uint64) bool { return s.nodes[h] != nil }, size: func() int { return len(s.nodes) }}
	s.rankOrder = keyOrder[Rank]{compare: compareRank,
		live: func(r Rank) bool { return s.ranks[r] != nil }, size: func() int { return len(s.ranks) }}
	s.epochOrder = keyOrder[uint64]{compare: cmp.Compare[uint64],
		live: func(w uint64) bool { return s.epochs[w] != nil }, size: func() int { return len(s.epochs) }}
	s.admissionOrder = keyOrder[admissionKey]{compare: compareAdmissionKey,
		live: func(k admissionKey) bool { return s.admissions[k] != nil }, size: func() int { return len(s.admissions) }}
}

// ownedNode is one entry of a rank's members: a node it owns and its owner's
// position in the node's owners (the module's node_owner_indices).
type ownedNode struct {
	n     *node
	owner int
}

// addMember records that st owns n at owner position owner
// (worker_record_node).
func (st *rankState) addMember(n *node, owner int) {
	st.nodes[n] = len(st.members)
	st.members = append(st.members, ownedNode{n, owner})
}

// forgetMember swap-removes n from st's members (worker_forget_node).
func (st *rankState) forgetMember(n *node) {
	i, ok := st.nodes[n]
	if !ok {
		return
	}
	last := len(st.members) - 1
	if i != last {
		st.members[i] = st.members[last]
		st.nodes[st.members[i].n] = i
	}
	st.members = st.members[:last]
	delete(st.nodes, n)
}

// swapMembers exchanges two positions of st's members
// (worker_swap_node_positions).
func (st *rankState) swapMembers(i, j int) {
	if i == j {
		return
	}
	st.members[i], st.members[j] = st.members[j], st.members[i]
	st.nodes[st.members[i].n], st.nodes[st.members[j].n] = i, j
}

// listed is an element of an epoch's lists: it knows its position.
type listed interface {
	comparable
	slot() *int
}

func (st *rankState) slot() *int    { return &st.epochIdx }
func (a *admissionRank) slot() *int { return &a.epochIdx }
func (r *reservation) slot() *int   { return &r.epochIdx }

// listAdd appends x to an epoch list (worker_epoch_add_*).
func listAdd[T listed](list []T, x T) []T {
	*x.slot() = len(list)
	return append(list, x)
}

// listRemove swap-removes x from an epoch list (worker_epoch_remove_*).
func listRemove[T listed](list []T, x T) []T {
	i := *x.slot()
	if i < 0 || i >= len(list) || list[i] != x {
		return list
	}
	last := len(list) - 1
	list[i] = list[last]
	*list[i].slot() = i
	*x.slot() = -1
	return list[:last]
}

// listSwap exchanges two positions of an epoch list
// (worker_epoch_swap_*_positions).
func listSwap[T listed](list []T, i, j int) {
	list[i], list[j] = list[j], list[i]
	*list[i].slot(), *list[j].slot() = i, j
}
