package main

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/dynamo/selector"
	"github.com/goindex/goindex/goindex/follow"
)

// errReplicaUnusable: a plugin state's replica is missing, its DC has no
// ready lane in it, or the DC's load report there is stale; select answers
// USE_DEFAULT with it.
var errReplicaUnusable = errors.New("goindex plugin: use default: replica")

// replicaRetry is how often a plugin state tries again to attach a replica
// that was missing, so a select never waits on the file system more than
// once a second.
const replicaRetry = time.Second

// pluginReplica is a plugin state's view of goindex's shared replica: the
// replica's follower (goindex/follow: generations, reference-counted views)
// of one path, read for one DC's lane. It attaches on first use and retries
// a failed attach at most once per replicaRetry, so a replica that appears
// after Dynamo started is picked up. It is the selector's Source.
type pluginReplica struct {
	path     string
	dc       uint64
	maxAge   time.Duration
	f        *follow.Follower
	attached atomic.Bool
	// clock is the time attach retries and load reports are judged by; nil
	// means time.Now (tests move it past the retry interval).
	clock func() time.Time

	mu   sync.Mutex // serializes attach attempts
	next time.Time  // earliest next attempt, under mu
	err  error      // the last attempt's failure, under mu
}

func newPluginReplica(path string, dc uint64, stalenessMs float64) *pluginReplica {
	maxAge := time.Duration(stalenessMs * float64(time.Millisecond))
	return &pluginReplica{path: path, dc: dc, maxAge: maxAge, f: follow.New(path, follow.Config{MaxStaleness: maxAge})}
}

// DCRates returns the DC's rates from its lane's last load report, or
// errReplicaUnusable saying why there is none to trust.
func (p *pluginReplica) DCRates() (selector.DCRates, error) {
	now := time.Now()
	if p.clock != nil {
		now = p.clock()
	}
	if !p.attached.Load() {
		if err := p.attach(now); err != nil {
			return selector.DCRates{}, err
		}
	}
	v := p.f.Acquire()
	if v == nil {
		return selector.DCRates{}, fmt.Errorf("%w %s: closed", errReplicaUnusable, p.path)
	}
	defer v.Release()
	l := slices.Index(v.DCs(), p.dc)
	switch {
	case l < 0:
		return selector.DCRates{}, fmt.Errorf("%w %s: dc %d has no lane (its DCs: %v)", errReplicaUnusable, p.path, p.dc, v.DCs())
	case v.Ready()&(1<<l) == 0:
		return selector.DCRates{}, fmt.Errorf("%w %s: dc %d's lane is not ready", errReplicaUnusable, p.path, p.dc)
	}
	ld := v.Lane(l).Load
	switch {
	case ld.ReceivedAt.IsZero():
		return selector.DCRates{}, fmt.Errorf("%w %s: dc %d has no load report", errReplicaUnusable, p.path, p.dc)
	case now.Sub(ld.ReceivedAt) > p.maxAge:
		return selector.DCRates{}, fmt.Errorf("%w %s: dc %d's load report is %v old, over max_staleness_ms %v",
			errReplicaUnusable, p.path, p.dc, now.Sub(ld.ReceivedAt).Round(time.Millisecond), p.maxAge)
	}
	return selector.DCRates{PrefillTokensPerMs: ld.PrefillTokensPerMs, QueueTokensPerMs: ld.QueueTokensPerMs,
		DecodeBlocksPerMs: ld.DecodeBlocksPerMs, LiveWorkers: ld.LiveWorkers}, nil
}

// attach maps the replica unless an attempt failed less than replicaRetry
// ago (then it returns that failure again).
func (p *pluginReplica) attach(now time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.attached.Load() {
		return nil // another select attached it meanwhile
	}
	if now.Before(p.next) {
		return p.err
	}
	p.next = now.Add(replicaRetry)
	if err := p.f.Attach(); err != nil {
		p.err = fmt.Errorf("%w %s: %w", errReplicaUnusable, p.path, err)
		return p.err
	}
	p.attached.Store(true)
	return nil
}

// close unmaps the replica once no select reads it.
func (p *pluginReplica) close() { p.f.Close() }
