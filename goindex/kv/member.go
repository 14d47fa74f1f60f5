package kv

import "fmt"

// Member is one event source inside a pool: a worker and one of its
// data-parallel ranks. It is the unit that owns KV blocks and receives
// overlap scores (Dynamo's WorkerWithDpRank).
type Member struct {
	Worker uint64
	Rank   uint32
}

// String formats the member as "worker/rank".
func (m Member) String() string { return fmt.Sprintf("%d/%d", m.Worker, m.Rank) }

// Less orders members by worker, then rank.
func (m Member) Less(o Member) bool {
	if m.Worker != o.Worker {
		return m.Worker < o.Worker
	}
	return m.Rank < o.Rank
}
