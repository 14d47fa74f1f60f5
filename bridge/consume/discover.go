package consume

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/nats-io/nats.go"
)

// discover asks every relay of the domain for its Info and gathers the
// replies for cfg.DiscoverFor, in DC order.
func discover(ctx context.Context, cfg *Config) ([]relay.Info, error) {
	names := relay.Names{Prefix: cfg.Prefix, Domain: cfg.Domain}
	inbox := cfg.Conn.NewRespInbox()
	sub, err := cfg.Conn.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("consume: discover: %w", err)
	}
	defer sub.Unsubscribe()
	if err := cfg.Conn.PublishRequest(names.DiscoverSubject(), inbox, nil); err != nil {
		return nil, fmt.Errorf("consume: discover: %w", err)
	}
	byDC := map[uint64]relay.Info{}
	deadline := time.Now().Add(cfg.DiscoverFor)
	for {
		wait := time.Until(deadline)
		if wait <= 0 || len(byDC) >= relayproto.MaxLanes {
			break
		}
		c, cancel := context.WithTimeout(ctx, wait)
		m, err := sub.NextMsgWithContext(c)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			break
		}
		info, err := relay.DecodeInfo(m.Data)
		if err != nil || info.Domain != uint64(cfg.Domain) || info.DC == 0 {
			cfg.Logger.Warn("discover: ignoring a reply", "err", err)
			continue
		}
		byDC[info.DC] = info
	}
	out := make([]relay.Info, 0, len(byDC))
	for _, info := range byDC {
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b relay.Info) int { return cmp.Compare(a.DC, b.DC) })
	return out, nil
}

// ping asks one DC's relay for its Info and times the round trip.
func ping(ctx context.Context, nc *nats.Conn, names relay.Names, timeout time.Duration) (relay.Info, time.Duration, error) {
	c, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t0 := time.Now()
	m, err := nc.RequestWithContext(c, names.PingSubject(), nil)
	rtt := time.Since(t0)
	if err != nil {
		return relay.Info{}, 0, fmt.Errorf("ping %s: %w", names.PingSubject(), err)
	}
	info, err := relay.DecodeInfo(m.Data)
	if err != nil {
		return relay.Info{}, 0, err
	}
	return info, rtt, nil
}

// resolve fills in the DC list (discovered when not given) and the format
// (from the relays when not given), checking that the relays agree.
func resolve(ctx context.Context, cfg *Config) error {
	var infos []relay.Info
	if len(cfg.DCs) == 0 {
		var err error
		if infos, err = discover(ctx, cfg); err != nil {
			return err
		}
		if len(infos) == 0 {
			return fmt.Errorf("%w: none of domain %d answered on %s within %v", ErrNoRelays, cfg.Domain,
				relay.Names{Prefix: cfg.Prefix, Domain: cfg.Domain}.DiscoverSubject(), cfg.DiscoverFor)
		}
		for _, info := range infos {
			cfg.DCs = append(cfg.DCs, relayproto.DCID(info.DC))
		}
	} else if cfg.Buckets == 0 {
		deadline := time.Now().Add(cfg.DiscoverFor)
		for _, dc := range cfg.DCs {
			names := relay.Names{Prefix: cfg.Prefix, Domain: cfg.Domain, DC: dc}
			if info, _, err := ping(ctx, cfg.Conn, names, max(time.Until(deadline), time.Millisecond)); err == nil {
				infos = append(infos, info)
			}
		}
		if len(infos) == 0 {
			return fmt.Errorf("%w: no listed DC answered within %v; give the format (seed and buckets)", ErrNoRelays, cfg.DiscoverFor)
		}
	}
	for _, info := range infos {
		if cfg.Buckets == 0 {
			cfg.Seed, cfg.Buckets = info.Seed, info.Buckets
		}
		if info.Seed != cfg.Seed || info.Buckets != cfg.Buckets {
			return fmt.Errorf("%w: dc %d publishes seed %#x × %d buckets, want %#x × %d", ErrFormatMismatch,
				info.DC, info.Seed, info.Buckets, cfg.Seed, cfg.Buckets)
		}
	}
	return nil
}
