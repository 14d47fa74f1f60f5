package kv

import "fmt"

// Kind says what an Event does.
type Kind uint8

// The event kinds. The zero Kind is invalid so that a forgotten field is caught.
const (
	// Stored adds a run of blocks below an optional parent.
	Stored Kind = iota + 1
	// Removed drops the named blocks (external hashes) from the member.
	Removed
	// Cleared drops every block of the member (or of its worker, by the
	// index's configured clear scope).
	Cleared
)

// String names the kind as Dynamo's JSON does.
func (k Kind) String() string {
	switch k {
	case Stored:
		return "stored"
	case Removed:
		return "removed"
	case Cleared:
		return "cleared"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Block is one stored KV block: the engine's opaque external hash (a
// per-member lookup key) and the local hash of its tokens (Dynamo's
// tokens_hash, position-independent).
type Block struct {
	External uint64
	Local    uint64
}

// Event is one KV event of one member. Stored uses HasParent, Parent,
// StartPosition and Blocks; Removed uses Removed; Cleared uses neither.
// Blocks of a Stored event form a chain: block k's parent is block k−1 and
// block 0's parent is Parent (or the root when HasParent is false).
type Event struct {
	Member  Member
	EventID uint64
	Kind    Kind

	HasParent bool
	Parent    uint64 // external hash of the parent block; valid when HasParent
	// HasStart and StartPosition carry the optional start_position of
	// positional backends (block index of Blocks[0] in its sequence).
	HasStart      bool
	StartPosition uint32
	Blocks        []Block

	Removed []uint64 // external hashes
}

// Validate checks the event's shape (not its meaning against any index).
func (e *Event) Validate() error {
	switch e.Kind {
	case Stored:
		if len(e.Removed) != 0 {
			return fmt.Errorf("kv: stored event carries removed hashes")
		}
	case Removed:
		if len(e.Blocks) != 0 || e.HasParent {
			return fmt.Errorf("kv: removed event carries stored blocks")
		}
	case Cleared:
		if len(e.Blocks) != 0 || len(e.Removed) != 0 || e.HasParent {
			return fmt.Errorf("kv: cleared event carries blocks")
		}
	default:
		return fmt.Errorf("kv: invalid event kind %d", uint8(e.Kind))
	}
	return nil
}

// Overlap is one member's matched prefix depth for a query, in blocks.
type Overlap struct {
	Member Member
	Blocks int
}
