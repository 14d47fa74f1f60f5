package harness

import (
	"fmt"
	"strings"

	"github.com/goindex/goindex/goindex/kv"
)

// OpKind says which kv.Index call an Op makes.
type OpKind uint8

// The operation kinds. The zero OpKind is invalid.
const (
	// OpEvent applies Op.Event with kv.Index.Apply.
	OpEvent OpKind = iota + 1
	// OpRemoveMember drops Op.Member with kv.Index.RemoveMember (Dynamo's
	// remove_worker_dp_rank).
	OpRemoveMember
	// OpRemoveWorker drops every rank of Op.Worker with kv.Index.RemoveWorker.
	OpRemoveWorker
)

// Query is one lookup: the local block hashes sent to kv.Index.Match and
// their router chain (kv.AppendChain from the root), which the model needs
// for its bounds. Chain always has the length of Locals.
type Query struct {
	Locals []uint64
	Chain  []uint64
}

// NewQuery returns the query for locals, computing its chain.
func NewQuery(locals []uint64) Query {
	return Query{Locals: locals, Chain: kv.AppendChain(nil, false, 0, locals)}
}

// Op is one step of a workload: one index call, then the queries to check
// once it has been applied. Ops never share mutable state with the index:
// an index must not modify the slices of an event it is given.
type Op struct {
	Kind   OpKind
	Event  kv.Event  // OpEvent
	Member kv.Member // OpRemoveMember
	Worker uint64    // OpRemoveWorker
	// Checkpoint marks where the pipelined modes (concurrent readers, lane
	// pool) wait for quiescence and check bounds; the serial mode checks
	// after every op.
	Checkpoint bool
	Queries    []Query
}

// Apply makes the op's call on ix.
func (o *Op) Apply(ix kv.Index) error {
	switch o.Kind {
	case OpEvent:
		ev := o.Event // a shallow copy: the index gets its own header
		return ix.Apply(&ev)
	case OpRemoveMember:
		return ix.RemoveMember(o.Member)
	case OpRemoveWorker:
		return ix.RemoveWorker(o.Worker)
	}
	return fmt.Errorf("%w: %d", ErrOpKind, o.Kind)
}

// worker returns the worker the op touches, which picks its lane.
func (o *Op) worker() uint64 {
	switch o.Kind {
	case OpEvent:
		return o.Event.Member.Worker
	case OpRemoveMember:
		return o.Member.Worker
	}
	return o.Worker
}

// member returns the member an event or member removal touches.
func (o *Op) member() (kv.Member, bool) {
	switch o.Kind {
	case OpEvent:
		return o.Event.Member, true
	case OpRemoveMember:
		return o.Member, true
	}
	return kv.Member{}, false
}

// String formats the op with full hexadecimal hashes, as HARNESS_TRACE logs
// it.
func (o *Op) String() string { return o.format(hexNames{}) }

// namer turns a hash into the text that stands for it.
type namer interface{ name(h uint64) string }

// hexNames prints hashes in full.
type hexNames struct{}

func (hexNames) name(h uint64) string { return fmt.Sprintf("%016x", h) }

func (o *Op) format(n namer) string {
	var b strings.Builder
	switch o.Kind {
	case OpEvent:
		ev := &o.Event
		fmt.Fprintf(&b, "%-8s %s ev %d", ev.Kind, ev.Member, ev.EventID)
		switch ev.Kind {
		case kv.Stored:
			if ev.HasParent {
				fmt.Fprintf(&b, " parent %s", n.name(ev.Parent))
			} else {
				b.WriteString(" root")
			}
			if ev.HasStart {
				fmt.Fprintf(&b, " start %d", ev.StartPosition)
			}
			ext := make([]uint64, len(ev.Blocks))
			loc := make([]uint64, len(ev.Blocks))
			for i, bl := range ev.Blocks {
				ext[i], loc[i] = bl.External, bl.Local
			}
			fmt.Fprintf(&b, " blocks %s locals %s", nameList(n, ext), nameList(n, loc))
		case kv.Removed:
			fmt.Fprintf(&b, " %s", nameList(n, ev.Removed))
		}
	case OpRemoveMember:
		fmt.Fprintf(&b, "%-8s %s", "remove-member", o.Member)
	case OpRemoveWorker:
		fmt.Fprintf(&b, "%-8s %d", "remove-worker", o.Worker)
	default:
		fmt.Fprintf(&b, "op(%d)", o.Kind)
	}
	return b.String()
}

func nameList(n namer, hs []uint64) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = n.name(h)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
