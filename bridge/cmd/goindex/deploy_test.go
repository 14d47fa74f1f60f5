package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/goindex/goindex/bridge/deploy"
)

// TestDeploy_ExamplesPassOnlyFlagsTheCommandsHave parses every goindex
// command line of bridge/deploy (Kubernetes containers and systemd units)
// against the real subcommand: its arguments, then each GOINDEX_* setting
// turned back into its flag, then --help. Parsing stops with flag.ErrHelp
// only if every flag before it exists and its value parses.
func TestDeploy_ExamplesPassOnlyFlagsTheCommandsHave(t *testing.T) {
	invs, err := deploy.Invocations()
	if err != nil {
		t.Fatalf("deploy.Invocations: %v", err)
	}
	seen := map[string]bool{}
	for _, inv := range invs {
		if len(inv.Args) == 0 {
			t.Errorf("%s: no subcommand", inv.Source)
			continue
		}
		seen[inv.Args[0]] = true
		args := append([]string{}, inv.Args...)
		for _, k := range deploy.EnvNames(inv.Env) {
			name, ok := strings.CutPrefix(k, "GOINDEX_")
			if !ok {
				continue
			}
			args = append(args, "--"+strings.ToLower(strings.ReplaceAll(name, "_", "-"))+"="+inv.Env[k])
		}
		args = append(args, "--help")
		var stdout, stderr bytes.Buffer
		if err := dispatch(context.Background(), args, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s: goindex %s: %v, want every flag accepted", inv.Source, strings.Join(args, " "), err)
		}
	}
	for _, want := range []string{"relay", "consume", "route"} {
		if !seen[want] {
			t.Errorf("the examples never run goindex %s", want)
		}
	}
}
