package harness

import (
	"errors"
	"fmt"

	"github.com/goindex/goindex/goindex/kv"
)

// ErrOpKind is returned by Op.Apply for an Op whose Kind is not one of the
// OpKind constants.
var ErrOpKind = errors.New("harness: invalid op kind")

// KnobError reports an environment knob (HARNESS_*) whose value cannot be
// used.
type KnobError struct {
	Name   string // the variable, e.g. "HARNESS_STEPS"
	Value  string // its raw value
	Reason string // what is wrong with it
}

// Error implements error.
func (e *KnobError) Error() string {
	return fmt.Sprintf("harness: %s=%q: %s", e.Name, e.Value, e.Reason)
}

// ViolationKind classifies a disagreement between an index and the model.
type ViolationKind uint8

const (
	// Overcount: a member scored above its held prefix (or a member unknown
	// to the model scored above zero). Fails unless Options.AllowOvercount.
	Overcount ViolationKind = iota + 1
	// Undercount: a member scored below its reachable prefix (an
	// unexplained undercount). Fails in strict mode.
	Undercount
	// ApplyError: the index returned an error on an operation the model
	// says every exact index accepts. Fails in strict mode.
	ApplyError
	// Malformed: Match returned a member twice, or a depth that is not in
	// 1..len(query). Always fails.
	Malformed
	// DetailMismatch: a DetailMatcher's detailed match disagreed with
	// Match, or its last hash is not the query's chain hash at depth−1.
	// Always fails.
	DetailMismatch
)

// String names the kind.
func (k ViolationKind) String() string {
	switch k {
	case Overcount:
		return "overcount"
	case Undercount:
		return "undercount"
	case ApplyError:
		return "apply error"
	case Malformed:
		return "malformed match"
	case DetailMismatch:
		return "detail mismatch"
	}
	return fmt.Sprintf("violation(%d)", uint8(k))
}

// Violation is one disagreement between an index and the model, with what a
// reader needs to reproduce it. It implements error.
type Violation struct {
	Kind ViolationKind
	// Op is the index of the op after which it was seen (ApplyError: the
	// op that failed).
	Op     int
	Member kv.Member
	// Query, Score, Held and Reach describe a query violation: the query,
	// the member's score and the model's held_len and reach_len.
	Query              Query
	Score, Held, Reach int
	// Detail is the offending detailed match (DetailMismatch only; Blocks
	// 0 when Match reported the member and the details did not).
	Detail Detail
	// Err is the index's error (ApplyError only).
	Err error
}

// Error implements error.
func (v *Violation) Error() string {
	switch v.Kind {
	case ApplyError:
		return fmt.Sprintf("harness: op %d: %s: %v", v.Op, v.Kind, v.Err)
	case Malformed:
		return fmt.Sprintf("harness: op %d: %s: member %s depth %d for a %d-block query",
			v.Op, v.Kind, v.Member, v.Score, len(v.Query.Locals))
	case DetailMismatch:
		return fmt.Sprintf("harness: op %d: %s: member %s detail depth %d last %#x, Match depth %d (%d-block query)",
			v.Op, v.Kind, v.Member, v.Detail.Blocks, v.Detail.Last, v.Score, len(v.Query.Locals))
	}
	return fmt.Sprintf("harness: op %d: %s: Match(%d blocks) member %s = %d, want %d..%d (reach_len..held_len)",
		v.Op, v.Kind, len(v.Query.Locals), v.Member, v.Score, v.Reach, v.Held)
}

// Unwrap returns the index's error of an ApplyError.
func (v *Violation) Unwrap() error { return v.Err }
