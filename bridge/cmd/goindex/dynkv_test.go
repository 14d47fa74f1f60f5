package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/dynkv"
	"github.com/redis/go-redis/v9"
)

// TestDynkv_HelpListsWhatIsNotImplemented: the README sends users to
// `goindex dynkv --help` for the commands that differ and the frontend
// flags to avoid.
func TestDynkv_HelpListsWhatIsNotImplemented(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := dispatch(context.Background(), []string{"dynkv", "--help"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("goindex dynkv --help: %v, want flag.ErrHelp", err)
	}
	text := stderr.String()
	for _, want := range []string{"DYNKV.APPLY_OWNED_AT",
		"DYNKV.ADMIT_APPLY", "DYNKV.WORKER_LEASE_APPLY", "DYNKV.GC_APPLY", "DYNKV.RESTORE", "DYNKV.GC ",
		"WAIT", "Replication is out of scope",
		"--command-timeout", "--write-timeout", "--idle-timeout",
		"--auto-aof-rewrite-percentage", "--auto-aof-rewrite-min-size", "BGREWRITEAOF", "SAVE",
		"--sentinel-master", "--sentinel-announce", "no failover"} {
		if !strings.Contains(text, want) {
			t.Errorf("goindex dynkv --help does not mention %q", want)
		}
	}
	for _, name := range dynkv.CommandNames() {
		if !dynkv.IsCommand(name) {
			t.Errorf("CommandNames lists %s, IsCommand denies it", name)
		}
	}
}

// TestDynkv_RejectsBadRewriteFlags: the automatic rewrite's flags and the
// Sentinel announce address are checked before anything starts.
func TestDynkv_RejectsBadRewriteFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--auto-aof-rewrite-min-size", "12xb"},
		{"--auto-aof-rewrite-min-size", "-5"},
		{"--auto-aof-rewrite-percentage", "-1"},
		{"--sentinel-master", "m", "--sentinel-announce", "dynkv.example"},
	} {
		var stdout, stderr bytes.Buffer
		err := dispatch(context.Background(), append([]string{"dynkv", "--listen", "127.0.0.1:0"}, args...), &stdout, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("goindex dynkv %v: %v, want a usage error", args, err)
		}
	}
}

// dynkvAddr waits for `goindex dynkv` to print its listening address.
func dynkvAddr(t *testing.T, stderr *syncBuffer, done chan error) string {
	t.Helper()
	return awaitLogged(t, "goindex dynkv", regexp.MustCompile(`serving on (\S+)`), stderr, done)
}

// TestDynkv_ServesTheSpecVectorsAndRecoversFromItsLog runs the README's
// one-flag setup (goindex dynkv --listen … --log …) as a subcommand, with
// each backing index: a Redis client applies the spec's store vector and
// gets the spec's MATCH reply; the command ends cleanly on cancellation,
// and run again on the same log it answers the same. The ckf backing is
// chosen through the environment (GOINDEX_INDEX, GOINDEX_CKF_EXPECTED_BLOCKS),
// which STATS DETAIL and the start-up line must reflect.
func TestDynkv_ServesTheSpecVectorsAndRecoversFromItsLog(t *testing.T) {
	const key = "dynamo:kv-router:ns:component-backend:scope-backend:block-size-16"
	store, _ := hex.DecodeString("01010000000000000001000000000000000000000001ffffffffffffffff000000020000000000000065000000000000000b0000000000000066000000000000000c")
	match, _ := hex.DecodeString("0100000002000000000000000b000000000000000c")
	const wantReply = "0100000001000000000000000100000000000000020000000000000066"
	for _, index := range []string{"exact", "ckf"} {
		t.Run("index="+index, func(t *testing.T) {
			wantStart := "index: exact;"
			if index == "ckf" {
				t.Setenv("GOINDEX_INDEX", "ckf")
				t.Setenv("GOINDEX_CKF_EXPECTED_BLOCKS", "4096")
				wantStart = "index: ckf, 4096 expected blocks a rank;"
			}
			logPath := filepath.Join(t.TempDir(), "dynkv.aof")
			ctx := context.Background()
			for run, wantApply := range []string{"OK", "NOOP"} {
				_, stderr, stop, done := background(runDynkv, "--listen", "127.0.0.1:0", "--log", logPath)
				addr := dynkvAddr(t, stderr, done)
				if !strings.Contains(stderr.String(), wantStart) {
					t.Errorf("run %d: start-up line %q does not say %q", run, stderr.String(), wantStart)
				}
				c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true})
				if got, err := c.Do(ctx, "DYNKV.APPLY", key, store).Result(); err != nil || got != wantApply {
					t.Errorf("run %d: DYNKV.APPLY(spec vector) = %v, %v; want %s", run, got, err, wantApply)
				}
				if got, err := c.Do(ctx, "DYNKV.MATCH_PRIMARY", key, match).Text(); err != nil || hex.EncodeToString([]byte(got)) != wantReply {
					t.Errorf("run %d: DYNKV.MATCH_PRIMARY(spec vector) = %x, %v; want %s", run, got, err, wantReply)
				}
				if got, err := c.Do(ctx, "DYNKV.STATS", key, "DETAIL").Slice(); err != nil || len(got) < 2 || got[1] != index {
					t.Errorf("run %d: DYNKV.STATS DETAIL = %v, %v; want index %s", run, got, err, index)
				}
				c.Close()
				stop()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("run %d: goindex dynkv after cancel = %v, want nil", run, err)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("run %d: goindex dynkv did not stop after cancel", run)
				}
			}
		})
	}
}

// TestDynkv_RejectsABadBackingAsAUsageError: an unknown --index or an
// impossible --ckf-expected-blocks stops before listening, as a usage error.
func TestDynkv_RejectsABadBackingAsAUsageError(t *testing.T) {
	for _, args := range [][]string{{"--index", "radix"}, {"--index", "ckf", "--ckf-expected-blocks", "1099511627776"}} {
		var stdout, stderr bytes.Buffer
		err := runDynkv(context.Background(), append([]string{"--listen", "127.0.0.1:0"}, args...), &stdout, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("goindex dynkv %v = %v, want a usage error", args, err)
		}
	}
}
