package demo

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/replica"
	"github.com/goindex/goindex/goindex/shm"
)

// settleStep is the pause between two looks at the replica while waiting
// for it to settle; settledLooks identical looks in a row count as settled.
const (
	settleStep   = 150 * time.Millisecond
	settledLooks = 3
)

// prompt is one query the demo checks: its hash ids, local hashes and
// canonical sequence hashes.
type prompt struct {
	label  string
	ids    []uint64
	locals []uint64
	hashes []uint64
}

func newPrompt(label string, ids []uint64) prompt {
	locals := dynamo.AppendMooncakeLocal(nil, ids, blockSize)
	return prompt{label: label, ids: ids, locals: locals, hashes: kv.AppendChain(nil, false, 0, locals)}
}

// replicaView searches the consumer's replica file.
type replicaView struct {
	r *shm.Reader
	s *replica.Searcher
}

func attachReplica(path string) (*replicaView, error) {
	r, err := shm.Attach(path)
	if err != nil {
		return nil, err
	}
	s, err := replica.NewSearcher(r.Table(), r.Format(), replica.SearchConfig{})
	if err != nil {
		r.Close()
		return nil, err
	}
	return &replicaView{r: r, s: s}, nil
}

func (v *replicaView) close() { v.r.Close() }

// depths returns every lane's depth for p (0 for a lane not ready).
func (v *replicaView) depths(p *prompt) []int {
	lanes := v.r.Table().Lanes()
	d, ready := v.s.Search(nil, p.hashes, 1<<lanes-1)
	out := make([]int, lanes)
	for l := range out {
		if ready&(1<<l) != 0 {
			out[l] = int(d[l])
		}
	}
	return out
}

// look is the replica's and the engines' answer for every prompt, per DC.
type look struct {
	replica [][]int // [prompt][lane]
	exact   [][]int // [prompt][lane]
}

// take looks at every prompt once.
func take(v *replicaView, fronts []*frontend, ps []prompt) look {
	var l look
	for i := range ps {
		l.replica = append(l.replica, v.depths(&ps[i]))
		ex := make([]int, len(fronts))
		for j, f := range fronts {
			ex[j] = f.exactDepth(ps[i].locals)
		}
		l.exact = append(l.exact, ex)
	}
	return l
}

func (l look) equal(o look) bool {
	eq := func(a, b [][]int) bool { return slices.EqualFunc(a, b, slices.Equal[[]int]) }
	return eq(l.replica, o.replica) && eq(l.exact, o.exact)
}

// below returns the first (prompt, lane) whose replica depth is under the
// engines' exact depth, or ok.
func (l look) below() (p, lane int, ok bool) {
	for i := range l.exact {
		for j := range l.exact[i] {
			if l.replica[i][j] < l.exact[i][j] {
				return i, j, false
			}
		}
	}
	return 0, 0, true
}

// overcounts counts the (prompt, lane) pairs the replica reports deeper
// than the engines hold (fingerprint collisions: the CKF's only error once
// every event has arrived).
func (l look) overcounts() int {
	n := 0
	for i := range l.exact {
		for j := range l.exact[i] {
			if l.replica[i][j] > l.exact[i][j] {
				n++
			}
		}
	}
	return n
}

// settle waits until the replica has caught up with the engines: every
// lane has applied the last sequence its relay is known to have published,
// no prompt's depth on any lane is below the engines' exact depth, and
// settledLooks looks in a row are identical (no event still in flight).
func settle(ctx context.Context, v *replicaView, fronts []*frontend, ps []prompt, wait time.Duration) (look, error) {
	var last look
	same := 0
	err := poll(ctx, wait, settleStep, func() error {
		for _, f := range fronts {
			if err := f.publishError(); err != nil {
				return err
			}
		}
		for l := range fronts {
			li := v.r.Lane(l)
			if li.Installed != li.Latest {
				same = 0
				return fmt.Errorf("lane %d has applied sequence %d of %d", l, li.Installed, li.Latest)
			}
		}
		cur := take(v, fronts, ps)
		if p, lane, ok := cur.below(); !ok {
			same = 0
			return fmt.Errorf("%s: lane %d reports %d blocks, the DC's engines hold %d", ps[p].label, lane, cur.replica[p][lane], cur.exact[p][lane])
		}
		if last.replica != nil && cur.equal(last) {
			same++
		} else {
			same = 1
		}
		last = cur
		if same < settledLooks {
			return fmt.Errorf("the replica or the engines still changed within %v", settleStep)
		}
		return nil
	})
	if err != nil {
		return look{}, checkf("replica did not settle: %v", err)
	}
	return last, nil
}
