package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
)

const hashSynopsis = `Usage: goindex hash --block-size N --tokens 1,2,3,... [--lora NAME] [--namespace NAME] [--json]

Prints the Dynamo-compatible local hash (tokens_hash, XXH3-64 of the block's
tokens as LE u32, seed 1337 salted by LoRA and cache namespace) and the
sequence hash (router chain, seed 1337) of every full block. A trailing
partial block is ignored, as Dynamo does. Use it to debug hash mismatches
between an engine's events and the router's queries.`

// hashBlock is one row of `goindex hash` output.
type hashBlock struct {
	Index    int    `json:"index"`
	Local    uint64 `json:"local"`
	Sequence uint64 `json:"sequence"`
}

func runHash(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("hash", hashSynopsis, stderr)
	blockSize := fs.Int("block-size", 0, "KV block size in tokens (required)")
	tokensArg := fs.String("tokens", "", "comma-separated token ids (u32; larger ids are truncated to 32 bits as Mooncake replays do)")
	lora := fs.String("lora", "", "LoRA adapter name salting the local hash (empty: base model)")
	namespace := fs.String("namespace", "", "cache namespace (cache_salt) salting the local hash")
	eagle := fs.Bool("eagle", false, "EAGLE windows: block_size+1 tokens, stride block_size")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *blockSize <= 0 {
		return fmt.Errorf("hash: --block-size must be > 0: %w", errUsage)
	}
	tokens, err := parseTokens(*tokensArg)
	if err != nil {
		return fmt.Errorf("hash: --tokens: %v: %w", err, errUsage)
	}
	h, err := dynamo.NewHasher(dynamo.HasherConfig{BlockSize: *blockSize, LoRA: *lora, Namespace: *namespace, Eagle: *eagle})
	if err != nil {
		return fmt.Errorf("hash: %v: %w", err, errUsage)
	}
	locals := h.AppendLocal(nil, tokens)
	seqs := kv.AppendChain(nil, false, 0, locals)
	rows := make([]hashBlock, len(locals))
	for i := range locals {
		rows[i] = hashBlock{Index: i, Local: locals[i], Sequence: seqs[i]}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{
			"block_size": *blockSize, "seed": h.Seed(), "tokens": len(tokens), "blocks": rows,
		})
	}
	fmt.Fprintf(stdout, "tokens %d, block size %d, seed %d, full blocks %d\n", len(tokens), *blockSize, h.Seed(), len(rows))
	fmt.Fprintf(stdout, "%5s  %-20s  %-20s  %-18s\n", "block", "local (dec)", "sequence (dec)", "sequence (hex)")
	for _, r := range rows {
		fmt.Fprintf(stdout, "%5d  %-20d  %-20d  %#016x\n", r.Index, r.Local, r.Sequence, r.Sequence)
	}
	return nil
}

// parseTokens parses a comma-separated list of token ids.
func parseTokens(s string) ([]uint32, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("no tokens given")
	}
	parts := strings.Split(s, ",")
	out := make([]uint32, 0, len(parts))
	for _, p := range parts {
		v, err := strconv.ParseUint(strings.TrimSpace(p), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("token %q: %v", p, err)
		}
		out = append(out, uint32(v))
	}
	return out, nil
}
