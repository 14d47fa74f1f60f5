package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/goindex/goindex/bridge/chaos"
)

const benchChaosSynopsis = `Usage: goindex bench chaos [--rounds 5] [--dcs 2] [--faults default] [--json]

Runs goindex as real processes on loopback and breaks them, round after
round: a nats-server hub and one leaf nats-server per DC (its own JetStream
domain, joined to the hub through a toxiproxy link), one goindex relay per
DC fed Dynamo KV events, goindex consume writing the replica file, goindex
route in front of stub DC frontends with request clients, and a C host of
libgoindex.so probing the replica from two threads. After every fault it
waits until every lane of the replica equals its relay's producer filter
word for word, every block the DCs' workers hold is found (in Go and through
the C host), and the router names every DC eligible.

Faults (--faults: comma-separated names, "default" or "all"):
  kill-relay, kill-dc-nats, kill-hub-nats, kill-consumer, kill-router,
  kill-host       SIGKILL, down for --hold, started again
  partition       a DC's NATS link cut for --hold
  slow-link       250 ms more each way on a DC's link for --hold
  slow-clients    --slow-clients stalled clients at the router: every one,
                  and the router's descriptors, must be released
  frontend-down   a DC's frontend refuses connections for --hold
  truncate-replica, grow-replica, replace-replica, corrupt-replica
                  the replica file changed under every process mapping it
"default" is every fault the system survives today (at present, all).

Promises checked (each break is listed and the command fails): no process
exits other than the one killed; no request fails while the router is up
(every DC's frontend but at most one is up all along); lanes converge back
to the relays' bytes; no false negative after convergence.

Output: a table of faults injected, requests served, requests failed (and
those that failed while the router was the process killed), and the time to
recover (from healing to convergence), median and max; one JSON object with
--json. Needs ./build.sh's build directory (--build) and a checkout (--root)
for the C host's source; logs stay in --dir (default: a temporary directory,
kept only when the run fails).`

func runBenchChaos(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench chaos", benchChaosSynopsis, stderr)
	build := fs.String("build", defaultBuildDir(), "directory holding goindex, nats-server and libgoindex.so (./build.sh's build/)")
	root := fs.String("root", ".", "goindex checkout holding tests/chaos/host/host.c and include/goindex.h")
	dir := fs.String("dir", "", "directory the run keeps its configs, JetStream stores, logs and replica in (empty: a temporary one, removed unless the run fails)")
	dcs := fs.Int("dcs", chaos.DefaultDCs, fmt.Sprintf("simulated DCs (2..%d)", chaos.MaxDCs))
	faults := fs.String("faults", "default", "faults to inject each round, in order (names, default or all)")
	rounds := fs.Int("rounds", 5, "times every fault is injected, each time on the next DC")
	hold := fs.Duration("hold", chaos.DefaultHold, "how long a lasting fault lasts (a killed process stays down)")
	clients := fs.Int("clients", chaos.DefaultClients, "closed-loop request clients of the router")
	slowClients := fs.Int("slow-clients", chaos.DefaultSlowClients, "stalled clients per slow-clients fault")
	events := fs.Int("events-per-second", chaos.DefaultEventsPerSecond, "KV events per second per DC")
	expected := fs.Uint64("expected-blocks", chaos.DefaultExpectedBlocks, "relay filter sizing (blocks per DC)")
	recoverBound := fs.Duration("recover", chaos.DefaultRecover, "bound on each recovery; past it the run fails")
	seed := fs.Uint64("seed", chaos.DefaultSeed, "workload seed")
	cc := fs.String("cc", "", "C compiler for the host (empty: $CC, else gcc)")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	kinds, err := chaos.ParseKinds(*faults)
	if err != nil {
		return fmt.Errorf("bench chaos: --faults: %v: %w", err, errUsage)
	}
	cfg := chaos.Config{Build: *build, Root: *root, Dir: *dir, DCs: *dcs, Faults: kinds, Rounds: *rounds, Hold: *hold,
		Clients: *clients, SlowClients: *slowClients, EventsPerSecond: *events, ExpectedBlocks: *expected,
		Recover: *recoverBound, Seed: *seed, CC: *cc, Progress: stderr}
	start := time.Now()
	rep, err := chaos.Run(ctx, cfg)
	if rep == nil || errors.Is(err, chaos.ErrSetup) {
		return fmt.Errorf("bench chaos: %w", err)
	}
	if *asJSON {
		if jerr := json.NewEncoder(stdout).Encode(rep); jerr != nil {
			return jerr
		}
	} else {
		rep.Table(stdout)
		fmt.Fprintf(stdout, "wall time %v\n", time.Since(start).Round(time.Second))
	}
	if err != nil {
		return fmt.Errorf("bench chaos: %w", err)
	}
	return nil
}

// defaultBuildDir is the directory of the running goindex binary, which
// ./build.sh puts in build/ next to nats-server and libgoindex.so.
func defaultBuildDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "build"
	}
	return filepath.Dir(exe)
}
