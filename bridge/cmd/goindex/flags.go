package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/peterbourgon/ff/v3"
)

// errUsage marks a command-line mistake; the process exits with status 2.
var errUsage = errors.New("usage error")

// exitCode maps an error from a subcommand to the process exit status.
func exitCode(err error) int {
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	return 1
}

// newFlagSet returns a FlagSet for one subcommand whose usage text is the
// given synopsis followed by the flag defaults.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("goindex "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\nFlags (each also settable as GOINDEX_<FLAG> in the environment or in --config):\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs. Every flag may also come from the
// environment (GOINDEX_ prefix, dashes as underscores) or from a config file
// named by --config (one "flag value" per line); the command line wins.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if fs.Lookup("config") == nil {
		fs.String("config", "", "config file with one `flag value` per line")
	}
	err := ff.Parse(fs, args,
		ff.WithEnvVarPrefix("GOINDEX"),
		ff.WithConfigFileFlag("config"),
		ff.WithConfigFileParser(ff.PlainParser),
	)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%s: %v: %w", fs.Name(), err, errUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q: %w", fs.Name(), fs.Arg(0), errUsage)
	}
	return nil
}

// defaultBenchTrace is the shipped trace slice that bench and parity replay
// when --trace is not given.
const defaultBenchTrace = "testdata/mooncake/synthetic_head400.jsonl"

// findUp returns rel joined to the working directory or its nearest parent
// that has it.
func findUp(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}
