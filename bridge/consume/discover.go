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
// (from the relays when not given: the one most of them publish, the
// lowest DC's among equals). A relay of another format must not take the
// whole router site down: it is logged and, discovered, left out (and
// returned in refused); listed, its lane stays and reports the mismatch
// at every attempt. ErrFormatMismatch: no discovered relay publishes the
// format.
func resolve(ctx context.Context, cfg *Config) (refused []relayproto.DCID, err error) {
	var infos []relay.Info
	discovered := len(cfg.DCs) == 0
	if discovered {
		if infos, err = discover(ctx, cfg); err != nil {
			return nil, err
		}
		if len(infos) == 0 {
			return nil, fmt.Errorf("%w: none of domain %d answered on %s within %v", ErrNoRelays, cfg.Domain,
				relay.Names{Prefix: cfg.Prefix, Domain: cfg.Domain}.DiscoverSubject(), cfg.DiscoverFor)
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
			return nil, fmt.Errorf("%w: no listed DC answered within %v; give the format (seed and buckets)", ErrNoRelays, cfg.DiscoverFor)
		}
	}
	if cfg.Buckets == 0 {
		cfg.Seed, cfg.Buckets = commonFormat(infos)
	}
	for _, info := range infos {
		if info.Seed == cfg.Seed && info.Buckets == cfg.Buckets {
			if discovered {
				cfg.DCs = append(cfg.DCs, relayproto.DCID(info.DC))
			}
			continue
		}
		logForeignFormat(cfg, info, discovered)
		refused = append(refused, relayproto.DCID(info.DC))
	}
	if discovered && len(cfg.DCs) == 0 {
		return refused, fmt.Errorf("%w: no relay of domain %d publishes seed %#x × %d buckets", ErrFormatMismatch,
			cfg.Domain, cfg.Seed, cfg.Buckets)
	}
	return refused, nil
}

// commonFormat returns the format most of infos publish, the first one's
// among equals.
func commonFormat(infos []relay.Info) (seed, buckets uint64) {
	type format struct{ seed, buckets uint64 }
	count := map[format]int{}
	best := 0
	for _, info := range infos {
		f := format{info.Seed, info.Buckets}
		if count[f]++; count[f] > best {
			best, seed, buckets = count[f], f.seed, f.buckets
		}
	}
	return seed, buckets
}

// logForeignFormat reports a relay whose format is not the consumer's:
// discovered, it is not followed; listed, its lane cannot install.
func logForeignFormat(cfg *Config, info relay.Info, discovered bool) {
	msg := "a relay of the domain publishes another format; not followed"
	if !discovered {
		msg = "a listed relay publishes another format; its lane stays empty until they agree"
	}
	cfg.Logger.Error(msg, relay.PoolLogKey, relay.PoolLogValue(cfg.Domain, relayproto.DCID(info.DC)), "dc", info.DC,
		"seed", fmt.Sprintf("%#x", info.Seed), "buckets", info.Buckets,
		"want_seed", fmt.Sprintf("%#x", cfg.Seed), "want_buckets", cfg.Buckets)
}
