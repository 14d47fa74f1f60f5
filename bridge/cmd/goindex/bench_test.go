package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestBench_DispatchesByNameAndListsBenchmarks(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		args  []string
		want  error
		radix bool // the radix benchmark's own usage, not the list
	}{
		{[]string{"bench"}, errUsage, false},
		{[]string{"bench", "--help"}, flag.ErrHelp, false},
		{[]string{"help", "bench"}, flag.ErrHelp, false},
		{[]string{"bench", "nope"}, errUsage, false},
		{[]string{"bench", "radix", "--help"}, flag.ErrHelp, true},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		err := dispatch(ctx, c.args, &stdout, &stderr)
		if !errors.Is(err, c.want) {
			t.Errorf("dispatch(%q) = %v, want %v", c.args, err, c.want)
		}
		if c.radix {
			if !strings.Contains(stderr.String(), "--capacity-blocks") {
				t.Errorf("dispatch(%q) usage = %q, want the radix flags", c.args, stderr.String())
			}
			continue
		}
		for _, bm := range benchmarks {
			if !strings.Contains(stderr.String(), bm.name+" ") {
				t.Errorf("dispatch(%q) usage = %q, want it to list %q", c.args, stderr.String(), bm.name)
			}
		}
	}
}
