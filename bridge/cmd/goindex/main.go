// Command goindex is the goindex side-process and toolbox: the DC relay, the
// router-site consumer, the global router proxy and the debugging and
// measurement tools. Run `goindex help` for the list of subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand: its name, a one-line summary and its entry point.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists every subcommand in the order `goindex help` prints them.
var commands = []command{
	{"hash", "print Dynamo-compatible local and sequence hashes for tokens", runHash},
	{"relay", "run a DC relay: Dynamo KV events in, CKF frames out over NATS JetStream", runRelay},
	{"consume", "run a router-site consumer: every DC's frames in, the shared-memory replica out", runConsume},
	{"route", "global router: OpenAI-compatible proxy forwarding each request to the best DC's frontend", runRoute},
	{"dynkv", "serve Dynamo's Valkey dynkv commands (swap the router's index with one flag)", runDynkv},
	{"bench", "micro and macro benchmarks (radix, …) with machine-readable output", runBench},
	{"sim", "replay a trace across simulated DCs under every routing policy; throughput, TTFT, hit rates, charts", runSim},
	{"parity", "replay a trace or event log through the exact and the CKF index side by side; report agreement", runParity},
	{"demo", "run the whole path on this machine: relays, consumer, router, library, simulation on a trace slice", runDemo},
	{"record", "capture Dynamo KV events from a live NATS subject into an event log for goindex parity", runRecord},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "goindex: %v\n", err)
		}
		os.Exit(exitCode(err))
	}
}

// dispatch runs the subcommand named by args[0].
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			return dispatch(ctx, []string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	usage(stderr)
	return fmt.Errorf("unknown subcommand %q: %w", args[0], errUsage)
}

func usage(w io.Writer) {
	fmt.Fprint(w, "goindex: a global KV-cache router for LLM inference (NVIDIA Dynamo plugin)\n\nUsage: goindex <subcommand> [flags]\n\nSubcommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun `goindex <subcommand> --help` for its flags. Every subcommand prints JSON with --json.\n")
}
