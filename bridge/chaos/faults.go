package chaos

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/goindex/goindex/goindex/shm"
	"github.com/goindex/goindex/internal/slowclient"
)

// Kind is a kind of fault the run injects.
type Kind int

// The faults. Each picks its target (a DC, where it has one) in turn.
const (
	// KillRelay kills a DC's relay with SIGKILL and starts a new one (a
	// new incarnation with empty exact state: the workers' model is reset
	// with it, as their held blocks are unknown to the new relay).
	KillRelay Kind = iota
	// KillDCNATS kills a DC's leaf nats-server (its JetStream domain)
	// with SIGKILL and restarts it on the same port and store.
	KillDCNATS
	// KillHubNATS kills the router site's hub nats-server and restarts it.
	KillHubNATS
	// KillConsumer kills `goindex consume` and starts it again.
	KillConsumer
	// KillRouter kills `goindex route` and starts it again on its port;
	// requests that fail while it is down are counted apart (the router
	// is the process killed).
	KillRouter
	// KillHost kills the C host of libgoindex.so and starts it again.
	KillHost
	// Partition cuts a DC's NATS link to the hub (connections reset,
	// reconnects refused) for the hold, then heals it.
	Partition
	// SlowLink adds 250 ms of latency each way to a DC's NATS link for
	// the hold.
	SlowLink
	// SlowClients opens stalled clients against the router (part of a
	// request, then silence) and requires the router to release every
	// one, and its descriptors, after its body timeout.
	SlowClients
	// FrontendDown takes a DC's frontend down for the hold (its port
	// refuses connections): the router must fall back to another DC.
	FrontendDown
	// TruncateReplica truncates the replica file to 4 KiB under every
	// process that maps it.
	TruncateReplica
	// GrowReplica appends 1 MiB to the replica file.
	GrowReplica
	// ReplaceReplica renames a file of random bytes over the replica.
	ReplaceReplica
	// CorruptReplica overwrites 256 KiB of the replica's bucket region
	// with random bytes.
	CorruptReplica
	kindCount
)

var kindNames = [kindCount]string{"kill-relay", "kill-dc-nats", "kill-hub-nats", "kill-consumer", "kill-router", "kill-host",
	"partition", "slow-link", "slow-clients", "frontend-down", "truncate-replica", "grow-replica", "replace-replica",
	"corrupt-replica"}

// String returns the fault's name, as ParseKinds reads it.
func (k Kind) String() string {
	if k >= 0 && k < kindCount {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// AllKinds lists every fault.
func AllKinds() []Kind {
	out := make([]Kind, kindCount)
	for i := range out {
		out[i] = Kind(i)
	}
	return out
}

// DefaultKinds are the faults Run injects unless told otherwise: every one
// whose promises the system keeps today, which is every one (AllKinds). A
// fault added before the system survives it is left out here until then.
func DefaultKinds() []Kind { return AllKinds() }

// ParseKinds reads a comma-separated list of fault names ("all": every
// one; "default": DefaultKinds).
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, name := range strings.Split(s, ",") {
		switch name = strings.TrimSpace(name); name {
		case "all":
			out = append(out, AllKinds()...)
			continue
		case "default":
			out = append(out, DefaultKinds()...)
			continue
		}
		k := Kind(0)
		for k < kindCount && kindNames[k] != name {
			k++
		}
		if k == kindCount {
			return nil, fmt.Errorf("%w: unknown fault %q (want all, default or some of %s)", ErrConfig, name, strings.Join(kindNames[:], ", "))
		}
		out = append(out, k)
	}
	return out, nil
}

// slowLatency is SlowLink's added latency per direction.
const slowLatency = 250 * time.Millisecond

// inject applies fault k to target DC d (ignored by faults without one),
// holds it for the configured hold (a killed process stays down that
// long), and heals it; it returns when the healing started, from which
// recovery is timed.
func (r *run) inject(ctx context.Context, k Kind, d *dc) (time.Time, error) {
	hold := func() {
		select {
		case <-ctx.Done():
		case <-time.After(r.cfg.Hold):
		}
	}
	switch k {
	case KillRelay:
		// Events published while it is down are lost with it; the new
		// relay starts from nothing, and so does the workers' model, at
		// the moment it subscribes.
		d.relay.kill()
		hold()
		heal := time.Now()
		if err := d.feed.pause(); err != nil {
			return heal, err
		}
		d.feed.restarted()
		_, err := r.upRelay(ctx, d)
		d.feed.resume()
		return heal, err
	case KillDCNATS:
		// The relay must have every event published before its server
		// goes (core NATS drops what is in flight to a dead server), and
		// the DC's workers publish nothing while it is down.
		if err := d.feed.pause(); err != nil {
			return time.Time{}, err
		}
		published, _, _ := d.feed.state()
		if err := poll(ctx, r.cfg.Recover, func() error {
			got, err := d.relayMessages()
			if err == nil && got != published {
				err = fmt.Errorf("%s relay received %d of %d events", d.name, got, published)
			}
			return err
		}); err != nil {
			return time.Time{}, err
		}
		d.leaf.kill()
		hold()
		heal := time.Now()
		if err := d.leaf.up(ctx); err != nil {
			return heal, err
		}
		err := poll(ctx, r.cfg.Recover, func() error {
			_, err := d.nc.Request(d.names().PingSubject(), nil, time.Second)
			return err
		})
		d.feed.resume()
		return heal, err
	case KillHubNATS:
		return r.bounce(ctx, r.hub.proc, r.hub.up)
	case KillConsumer:
		return r.bounce(ctx, r.consumer, r.upConsumer)
	case KillRouter:
		r.routerDown.Store(true)
		defer r.routerDown.Store(false)
		return r.bounce(ctx, r.router, func(ctx context.Context) error {
			if err := r.upRouter(ctx); err != nil {
				return err
			}
			return poll(ctx, r.cfg.Recover, r.routerReady)
		})
	case KillHost:
		return r.bounce(ctx, r.host.proc, r.host.up)
	case Partition:
		d.link.Stop()
		hold()
		heal := time.Now()
		if err := d.link.Start(); err != nil {
			return heal, fmt.Errorf("heal %s's link: %w", d.name, err)
		}
		return heal, nil
	case SlowLink:
		if err := slow(ctx, d, true); err != nil {
			return time.Time{}, err
		}
		hold()
		heal := time.Now()
		return heal, slow(ctx, d, false)
	case SlowClients:
		return r.slowClients(ctx)
	case FrontendDown:
		d.frontend.down()
		hold()
		heal := time.Now()
		return heal, d.frontend.up(ctx)
	case TruncateReplica, GrowReplica, ReplaceReplica, CorruptReplica:
		r.closeView()
		err := r.damage(k)
		return time.Now(), err
	}
	return time.Time{}, fmt.Errorf("%w: fault %v", ErrConfig, k)
}

// bounce kills p, leaves it down for the hold and brings it back with up;
// healing starts when up is called.
func (r *run) bounce(ctx context.Context, p *proc, up func(context.Context) error) (time.Time, error) {
	p.kill()
	select {
	case <-ctx.Done():
	case <-time.After(r.cfg.Hold):
	}
	heal := time.Now()
	return heal, up(ctx)
}

// slow adds (or removes) SlowLink's latency on both directions of DC d's
// link.
func slow(ctx context.Context, d *dc, on bool) error {
	for _, dir := range []string{"upstream", "downstream"} {
		var err error
		if on {
			toxic := fmt.Sprintf(`{"name":"slow_%s","type":"latency","stream":"%s","attributes":{"latency":%d}}`,
				dir, dir, slowLatency.Milliseconds())
			_, err = d.link.Toxics.AddToxicJson(strings.NewReader(toxic))
		} else {
			err = d.link.Toxics.RemoveToxic(ctx, "slow_"+dir)
		}
		if err != nil {
			return fmt.Errorf("%s's link latency (on: %v): %w", d.name, on, err)
		}
	}
	return nil
}

// slowClients opens the configured number of stalled clients against the
// router and waits until the router released every one and its
// descriptors are back where they were (a few above, for the request
// clients' connections); healing starts when the clients stalled.
func (r *run) slowClients(ctx context.Context) (time.Time, error) {
	pid := r.router.pid()
	before, err := slowclient.FDs(pid)
	if err != nil {
		return time.Time{}, err
	}
	stalls := []slowclient.Stall{
		{Stage: slowclient.Body, Path: "/v1/completions", Sent: 1 << 10, Declared: 64 << 10},
		{Stage: slowclient.Chunked, Path: "/v1/chat/completions", Sent: 512},
		{Stage: slowclient.Body, Path: "/healthz", Sent: 10},
		{Stage: slowclient.Headers, Path: "/v1/completions"},
	}
	flood, err := slowclient.Open(r.routerAddr, r.cfg.SlowClients, stalls...)
	if err != nil {
		return time.Time{}, err
	}
	defer flood.Close()
	heal := time.Now()
	// The router must have taken them on (or the flood proved nothing)
	// before it lets them go.
	held := 0
	if err := poll(ctx, r.cfg.Recover, func() error {
		n, err := slowclient.FDs(pid)
		held = max(held, n)
		if err == nil && held < before+flood.Len()/2 && flood.Released() < flood.Len()/2 {
			err = fmt.Errorf("the router holds %d descriptors (%d before) with %d stalled clients open", n, before, flood.Len())
		}
		return err
	}); err != nil {
		return heal, err
	}
	if err := flood.AwaitReleased(r.cfg.Recover); err != nil {
		return heal, err
	}
	slack := r.cfg.Clients + 8
	err = poll(ctx, r.cfg.Recover, func() error {
		n, err := slowclient.FDs(pid)
		if err == nil && n > before+slack {
			err = fmt.Errorf("the router holds %d descriptors, %d before %d stalled clients (%d while they stalled)", n, before, flood.Len(), held)
		}
		return err
	})
	return heal, err
}

// damage does a replica-file fault.
func (r *run) damage(k Kind) error {
	switch k {
	case TruncateReplica:
		return os.Truncate(r.replica, 4096)
	case GrowReplica:
		f, err := os.OpenFile(r.replica, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.Write(make([]byte, 1<<20))
		return err
	case ReplaceReplica:
		junk := make([]byte, 1<<20)
		_, _ = rand.Read(junk)
		tmp := r.replica + ".chaos"
		if err := os.WriteFile(tmp, junk, 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, r.replica)
	case CorruptReplica:
		v, err := shm.Attach(r.replica)
		if err != nil {
			return err
		}
		info := v.Info()
		v.Close()
		f, err := os.OpenFile(r.replica, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		junk := make([]byte, min(256<<10, info.RegionBytes))
		_, _ = rand.Read(junk)
		_, err = f.WriteAt(junk, int64(info.HeaderBytes))
		return err
	}
	return nil
}
