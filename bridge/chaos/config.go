package chaos

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/goindex/goindex/goindex/relayproto"
)

// Defaults and bounds of Config.
const (
	DefaultDCs             = 2
	MaxDCs                 = 8
	DefaultRounds          = 1
	DefaultHold            = 3 * time.Second
	DefaultClients         = 2
	DefaultSlowClients     = 200
	DefaultEventsPerSecond = 100
	DefaultExpectedBlocks  = 1 << 17
	DefaultRecover         = 60 * time.Second
	DefaultSeed            = 0xC4A05
)

// Names shared by the run's processes.
const (
	domain    = relayproto.DomainID(1)
	namespace = "dynamo"
	// startWait bounds each child's start-up.
	startWait = 60 * time.Second
	// stopGrace is how long a child may take to stop at the end.
	stopGrace = 5 * time.Second
)

// Config configures a chaos run.
type Config struct {
	// Build is the directory holding goindex, nats-server and
	// libgoindex.so (./build.sh's build/); required.
	Build string
	// Root is a goindex checkout: the C host is compiled from its
	// tests/chaos/host/host.c against include/goindex.h; required.
	Root string
	// Dir is the run's working directory (configs, stores, logs, the
	// replica file); optional; default: a temporary directory, removed
	// after the run unless it failed.
	Dir string
	// DCs is the number of simulated DCs; optional; default: 2 (2..8).
	DCs int
	// Faults are injected in this order, each round; optional; default:
	// DefaultKinds.
	Faults []Kind
	// Rounds is how many times every fault is injected, each time on the
	// next DC; optional; default: 1.
	Rounds int
	// Hold is how long a lasting fault (partition, slow link, frontend
	// down) lasts before it is healed; optional; default: 3s.
	Hold time.Duration
	// Clients is the number of closed-loop request clients; optional;
	// default: 2.
	Clients int
	// SlowClients is the number of stalled clients of a slow-clients
	// fault; optional; default: 200.
	SlowClients int
	// EventsPerSecond is each DC's KV event rate; optional; default: 100.
	EventsPerSecond int
	// ExpectedBlocks sizes the relays' filters; optional; default: 2^17.
	ExpectedBlocks uint64
	// Recover bounds the recovery after each fault; optional; default: 60s.
	Recover time.Duration
	// Seed drives the workload; optional; default: DefaultSeed.
	Seed uint64
	// CC is the C compiler (with flags) for the C host; optional;
	// default: $CC, else gcc.
	CC string
	// Progress receives one line per step; optional; default: none.
	Progress io.Writer
}

// resolve checks c and fills its defaults.
func (c *Config) resolve() error {
	if c.Build == "" || c.Root == "" {
		return fmt.Errorf("%w: Build and Root are required", ErrConfig)
	}
	var err error
	if c.Build, err = filepath.Abs(c.Build); err != nil {
		return fmt.Errorf("%w: build directory: %v", ErrConfig, err)
	}
	for _, f := range []string{"goindex", "nats-server", "libgoindex.so"} {
		if _, err := os.Stat(filepath.Join(c.Build, f)); err != nil {
			return fmt.Errorf("%w: %v (./build.sh builds it)", ErrConfig, err)
		}
	}
	if _, err := os.Stat(filepath.Join(c.Root, hostSource)); err != nil {
		return fmt.Errorf("%w: %v (Root must be a goindex checkout)", ErrConfig, err)
	}
	setInt := func(p *int, def int) {
		if *p == 0 {
			*p = def
		}
	}
	setInt(&c.DCs, DefaultDCs)
	setInt(&c.Rounds, DefaultRounds)
	setInt(&c.Clients, DefaultClients)
	setInt(&c.SlowClients, DefaultSlowClients)
	setInt(&c.EventsPerSecond, DefaultEventsPerSecond)
	if c.DCs < 2 || c.DCs > MaxDCs {
		return fmt.Errorf("%w: %d DCs, want 2..%d (a fault on one must leave another)", ErrConfig, c.DCs, MaxDCs)
	}
	if c.Rounds < 0 || c.Clients < 1 || c.SlowClients < 0 || c.EventsPerSecond < 1 {
		return fmt.Errorf("%w: rounds %d, clients %d, slow clients %d, events/s %d: want ≥ 0, ≥ 1, ≥ 0, ≥ 1",
			ErrConfig, c.Rounds, c.Clients, c.SlowClients, c.EventsPerSecond)
	}
	if c.Faults == nil {
		c.Faults = DefaultKinds()
	}
	for _, k := range c.Faults {
		if k < 0 || k >= kindCount {
			return fmt.Errorf("%w: fault %v", ErrConfig, k)
		}
	}
	if c.Hold == 0 {
		c.Hold = DefaultHold
	}
	if c.Recover == 0 {
		c.Recover = DefaultRecover
	}
	if c.Hold < 0 || c.Recover < 0 {
		return fmt.Errorf("%w: hold %v and recover %v must be ≥ 0", ErrConfig, c.Hold, c.Recover)
	}
	if c.ExpectedBlocks == 0 {
		c.ExpectedBlocks = DefaultExpectedBlocks
	}
	if c.Seed == 0 {
		c.Seed = DefaultSeed
	}
	if c.CC == "" {
		c.CC = os.Getenv("CC")
	}
	if c.CC == "" {
		c.CC = "gcc"
	}
	return nil
}
