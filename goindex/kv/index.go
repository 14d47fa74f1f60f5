package kv

// Index is the contract every goindex index meets (the exact radix tree, the
// CKF index, the dynkv backends), so the differential harness, the C ABI and
// the tools can drive any of them the same way.
//
// Implementations document their own concurrency rule; at least, Match may
// run concurrently with itself, and mutations are serialized by the caller
// or by the implementation.
type Index interface {
	// Apply applies one KV event. An error rejects the event or part of it,
	// as the implementation documents; it never corrupts the index.
	Apply(ev *Event) error
	// RemoveMember drops every block of one member.
	RemoveMember(m Member) error
	// RemoveWorker drops every block of every rank of a worker.
	RemoveWorker(worker uint64) error
	// Match appends to dst, in no particular order, the overlap depth in
	// blocks of every member whose depth for the query (local block hashes
	// from the root) is positive, and returns dst.
	Match(dst []Overlap, locals []uint64) []Overlap
}
