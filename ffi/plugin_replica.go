package main

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/goindex/goindex/dynamo/selector"
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
// global mode's follower (attach.go: generations, reference-counted views)
// of one path, read for one DC's lane. It attaches on first use and retries
// a failed attach at most once per replicaRetry, so a replica that appears
// after Dynamo started is picked up. It is the selector's Source.
type pluginReplica struct {
	path string
	dc   uint64
	g    *globalIndex

	mu   sync.Mutex // serializes attach attempts
	next time.Time  // earliest next attempt, under mu
	err  error      // the last attempt's failure, under mu
}

func newPluginReplica(path string, dc uint64, stalenessMs float64) *pluginReplica {
	c := defaultConfig()
	c.MaxStalenessMs = stalenessMs
	return &pluginReplica{path: path, dc: dc, g: &globalIndex{maxAge: c.maxStaleness(), checkEvery: c.replicaCheck()}}
}

// DCRates returns the DC's rates from its lane's last load report, or
// errReplicaUnusable saying why there is none to trust.
func (p *pluginReplica) DCRates() (selector.DCRates, error) {
	now := p.g.now()
	if p.g.att.Load() == nil {
		if err := p.attach(now); err != nil {
			return selector.DCRates{}, err
		}
	}
	v := p.g.acquire()
	if v == nil {
		return selector.DCRates{}, fmt.Errorf("%w %s: closed", errReplicaUnusable, p.path)
	}
	defer v.release()
	l := slices.Index(v.dcs, p.dc)
	switch {
	case l < 0:
		return selector.DCRates{}, fmt.Errorf("%w %s: dc %d has no lane (its DCs: %v)", errReplicaUnusable, p.path, p.dc, v.dcs)
	case v.table.Ready()&(1<<l) == 0:
		return selector.DCRates{}, fmt.Errorf("%w %s: dc %d's lane is not ready", errReplicaUnusable, p.path, p.dc)
	}
	ld := v.signals(l).load
	switch {
	case ld == nil || ld.ReceivedAt.IsZero():
		return selector.DCRates{}, fmt.Errorf("%w %s: dc %d has no load report", errReplicaUnusable, p.path, p.dc)
	case now.Sub(ld.ReceivedAt) > p.g.maxAge:
		return selector.DCRates{}, fmt.Errorf("%w %s: dc %d's load report is %v old, over max_staleness_ms %v",
			errReplicaUnusable, p.path, p.dc, now.Sub(ld.ReceivedAt).Round(time.Millisecond), p.g.maxAge)
	}
	return selector.DCRates{PrefillTokensPerMs: ld.PrefillTokensPerMs, QueueTokensPerMs: ld.QueueTokensPerMs,
		DecodeBlocksPerMs: ld.DecodeBlocksPerMs, LiveWorkers: ld.LiveWorkers}, nil
}

// attach maps the replica unless an attempt failed less than replicaRetry
// ago (then it returns that failure again).
func (p *pluginReplica) attach(now time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.g.att.Load() != nil {
		return nil // another select attached it meanwhile
	}
	if now.Before(p.next) {
		return p.err
	}
	p.next = now.Add(replicaRetry)
	if err := p.g.attach(p.path); err != nil {
		p.err = fmt.Errorf("%w %s: %w", errReplicaUnusable, p.path, err)
		return p.err
	}
	return nil
}

// close unmaps the replica once no select reads it.
func (p *pluginReplica) close() { p.g.close() }
