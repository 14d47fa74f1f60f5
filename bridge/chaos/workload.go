package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/bridge/route"
	"github.com/goindex/goindex/dynamo"
)

// Workload pacing: each DC's workers publish eventsPerTick events every
// feedTick; each client sends a request, then waits requestPause.
const (
	feedTick     = 20 * time.Millisecond
	requestPause = 20 * time.Millisecond
	promptTokens = 64
	workers      = 3
)

// feeder publishes a DC's KV events (a seeded relaytest.Generator, which
// models the blocks the DC's workers hold) on its leaf, as Dynamo's event
// plane does. Pausing it makes the DC's state still, so a checkpoint can
// compare it; a relay restart resets it (the new relay knows nothing of
// what the workers held).
type feeder struct {
	d       *dc
	perTick int

	mu        sync.Mutex
	gen       *relaytest.Generator
	paused    bool
	published uint64 // messages since the relay's start
	total     uint64
	err       error // the first publish error
}

// run publishes until ctx ends.
func (f *feeder) run(ctx context.Context) {
	t := time.NewTicker(feedTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.mu.Lock()
		if !f.paused {
			f.publishLocked(f.perTick)
		}
		f.mu.Unlock()
	}
}

// publish publishes n events now, paused or not.
func (f *feeder) publish(n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.publishLocked(n)
	return f.err
}

// publishLocked publishes n events; the first error is kept in f.err.
func (f *feeder) publishLocked(n int) {
	subject := dynamo.EventSubject(namespace, f.d.component())
	for range n {
		if err := f.d.nc.Publish(subject, f.gen.Next()); err != nil {
			if f.err == nil {
				f.err = fmt.Errorf("publish at %s: %w", f.d.name, err)
			}
			return
		}
		f.published++
		f.total++
	}
}

// pause stops publishing and flushes what was published to the leaf.
func (f *feeder) pause() error {
	f.mu.Lock()
	f.paused = true
	f.mu.Unlock()
	if err := f.d.nc.FlushTimeout(10 * time.Second); err != nil {
		return fmt.Errorf("flush events at %s: %w", f.d.name, err)
	}
	return nil
}

// resume publishes again.
func (f *feeder) resume() {
	f.mu.Lock()
	f.paused = false
	f.mu.Unlock()
}

// restarted forgets what the workers held: the DC's relay restarted.
func (f *feeder) restarted() {
	f.mu.Lock()
	f.gen.Forget()
	f.published = 0
	f.mu.Unlock()
}

// state returns the messages published since the relay started and a
// copy of the tracked blocks' canonical hashes and paths (the feeder
// should be paused).
func (f *feeder) state() (published uint64, tracked []uint64, paths [][]uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.published, f.gen.Tracked(), f.gen.TrackedPaths()
}

// clients are the closed-loop request clients of the router: each sends
// a completion with a random token-id prompt, records the outcome in the
// run's current row, pauses requestPause and sends the next.
type clients struct {
	r      *run
	client *http.Client
	wg     sync.WaitGroup
}

func newClients(r *run) *clients {
	return &clients{r: r, client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
}

// start runs n clients until ctx ends.
func (c *clients) start(ctx context.Context, n int, seed uint64) {
	for i := range n {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			for ctx.Err() == nil {
				c.one(ctx, rng)
				select {
				case <-ctx.Done():
				case <-time.After(requestPause):
				}
			}
		}()
	}
}

// one sends one request and records it.
func (c *clients) one(ctx context.Context, rng *rand.Rand) {
	tokens := make([]uint32, promptTokens)
	for i := range tokens {
		tokens[i] = rng.Uint32N(150_000)
	}
	body, _ := json.Marshal(map[string]any{"model": "chaos", "prompt": tokens, "max_tokens": 8})
	downBefore := c.r.routerDown.Load()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.r.routerAddr+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		c.r.violation("build request: %v", err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	degraded := false
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d (%s)", resp.StatusCode, resp.Header.Get(route.HeaderDC))
		}
		degraded = resp.Header.Get(route.HeaderDegraded) != ""
	}
	if ctx.Err() != nil {
		return // the run ended under it
	}
	c.r.record(err, degraded, downBefore || c.r.routerDown.Load())
}

// wait waits for every client to return (after ctx ended).
func (c *clients) wait() {
	c.wg.Wait()
	c.client.CloseIdleConnections()
}
