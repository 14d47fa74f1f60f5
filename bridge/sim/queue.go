package sim

import (
	"cmp"
	"slices"
)

// kind says what an event does when it fires.
type kind uint8

const (
	evSend       kind = iota + 1 // a client sends request a to the router
	evArrive                     // request a reaches DC b
	evWorker                     // worker a's next state change, scheduled as generation b
	evDeliver                    // the oldest frame on DC a's link reaches the router
	evFlush                      // DC a's cadence timer of generation b fires
	evLoadReport                 // DC a samples and sends a load report
	evSample                     // every DC's load is sampled for the charts
	evFeedback                   // request a's first (b = 1) or last (b = 0) token reaches its client
)

// event is one scheduled happening. seq orders events of equal time by
// scheduling order, which makes every run deterministic and keeps each
// link FIFO.
type event struct {
	at   float64 // ms of simulated time
	seq  uint64
	kind kind
	a, b int
}

func (e *event) before(o *event) bool {
	if e.at != o.at {
		return e.at < o.at
	}
	return e.seq < o.seq
}

// queue is a binary min-heap of events by (at, seq), typed so that events
// stay plain values (container/heap would box each one in an interface).
type queue struct {
	h   []event
	seq uint64
}

func (q *queue) len() int { return len(q.h) }

// subset returns a queue of the events of q that keep accepts, with their
// times and scheduling order, reusing dst's memory; events pushed on it
// later order after every event of q, as they would on q. q is unchanged.
func (q *queue) subset(dst []event, keep func(*event) bool) queue {
	out := queue{h: dst[:0], seq: q.seq}
	for k := range q.h {
		if keep(&q.h[k]) {
			out.h = append(out.h, q.h[k])
		}
	}
	// A slice sorted by (at, seq) is a min-heap.
	slices.SortFunc(out.h, func(a, b event) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	return out
}

func (q *queue) push(at float64, k kind, a, b int) {
	q.seq++
	q.h = append(q.h, event{at: at, seq: q.seq, kind: k, a: a, b: b})
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.h[i].before(&q.h[p]) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

// pop removes and returns the earliest event; the queue must not be empty.
func (q *queue) pop() event {
	top := q.h[0]
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h = q.h[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && q.h[l].before(&q.h[m]) {
			m = l
		}
		if r < last && q.h[r].before(&q.h[m]) {
			m = r
		}
		if m == i {
			return top
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
}
