package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// tokenList returns "lo,lo+1,…,hi" for --tokens.
func tokenList(lo, hi int) string {
	parts := make([]string, 0, hi-lo+1)
	for v := lo; v <= hi; v++ {
		parts = append(parts, fmt.Sprint(v))
	}
	return strings.Join(parts, ",")
}

func TestHash_PrintsSpecVectors(t *testing.T) {
	// dynamo-compat §1.5; the sequence hash of a one-block prompt is its
	// local hash.
	cases := []struct {
		name  string
		args  []string
		seed  uint64
		local []uint64
		seq   []uint64 // nil: seq[0] = local[0], nothing else pinned
	}{
		{"V4/V5", []string{"--block-size", "4", "--tokens", tokenList(0, 7)}, 1337,
			[]uint64{9143094415614847814, 12124091508212882195}, []uint64{9143094415614847814, 9510318385840434533}},
		{"V6 partial tail ignored", []string{"--block-size", "4", "--tokens", tokenList(0, 9)}, 1337,
			[]uint64{9143094415614847814, 12124091508212882195}, []uint64{9143094415614847814, 9510318385840434533}},
		{"V7 shorter than a block", []string{"--block-size", "4", "--tokens", tokenList(0, 2)}, 1337, nil, nil},
		{"V8/V9", []string{"--block-size", "4", "--tokens", tokenList(1, 20)}, 1337,
			[]uint64{14643705804678351452, 16777012769546811212, 483935686894639516, 135165725823939817, 1363306219480167028},
			[]uint64{14643705804678351452, 4945711292740353085, 12583592247330656132, 1921452330601040443, 16910271745392797383}},
		{"V14/V15 lora", []string{"--block-size", "4", "--tokens", tokenList(0, 3), "--lora", "adapter-a"}, 8842669519798868182,
			[]uint64{6665157333201000639}, nil},
		{"V17 namespace", []string{"--block-size", "4", "--tokens", tokenList(0, 3), "--namespace", "tenant-a"}, 1948188790972764086,
			[]uint64{17009624042690211646}, nil},
		{"V19 lora and namespace", []string{"--block-size", "4", "--tokens", tokenList(0, 3), "--lora", "adapter-a", "--namespace", "tenant-a"}, 10790858310771630931,
			[]uint64{8269515957840517240}, nil},
		{"V23 EAGLE", []string{"--block-size", "4", "--tokens", tokenList(0, 8), "--eagle"}, 1337,
			[]uint64{14562210786876287112, 15916330181359808192}, nil},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		if err := runHash(context.Background(), append(c.args, "--json"), &stdout, &stderr); err != nil {
			t.Errorf("%s: hash %q = %v, want nil", c.name, c.args, err)
			continue
		}
		var out struct {
			Seed   uint64      `json:"seed"`
			Blocks []hashBlock `json:"blocks"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Errorf("%s: hash %q --json printed %q: %v", c.name, c.args, stdout.String(), err)
			continue
		}
		var local, seq []uint64
		for i, b := range out.Blocks {
			if b.Index != i {
				t.Errorf("%s: block %d has index %d", c.name, i, b.Index)
			}
			local, seq = append(local, b.Local), append(seq, b.Sequence)
		}
		wantSeq := c.seq
		if wantSeq == nil && len(c.local) > 0 {
			wantSeq = c.local[:1]
			seq = seq[:min(len(seq), 1)]
		}
		if out.Seed != c.seed || !slices.Equal(local, c.local) || !slices.Equal(seq, wantSeq) {
			t.Errorf("%s: hash %q = seed %d, local %v, sequence %v; want seed %d, local %v, sequence %v",
				c.name, c.args, out.Seed, local, seq, c.seed, c.local, wantSeq)
		}
	}
}

func TestHash_HumanTableAndUsageErrors(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := runHash(context.Background(), []string{"--block-size", "4", "--tokens", tokenList(0, 7)}, &stdout, &stderr); err != nil {
		t.Fatalf("hash --block-size 4 --tokens 0..7 = %v", err)
	}
	// V5's second sequence hash, 9510318385840434533, is 0x83fb702f20e2ad65.
	for _, want := range []string{"full blocks 2", "12124091508212882195", "9510318385840434533", "0x83fb702f20e2ad65"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("hash table lacks %q:\n%s", want, stdout.String())
		}
	}
	bad := [][]string{
		{"--tokens", "1,2,3"},
		{"--block-size", "0", "--tokens", "1,2,3"},
		{"--block-size", "4"},
		{"--block-size", "4", "--tokens", "1,x"},
		{"--block-size", "4", "--tokens", "1", "stray"},
	}
	for _, args := range bad {
		err := runHash(context.Background(), args, &stdout, &stderr)
		if !errors.Is(err, errUsage) || exitCode(err) != 2 {
			t.Errorf("hash %q = %v (exit %d), want a usage error (exit 2)", args, err, exitCode(err))
		}
	}
}
