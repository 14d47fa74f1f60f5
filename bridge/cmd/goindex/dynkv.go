package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/goindex/goindex/bridge/dynkv"
)

const dynkvSynopsis = `Usage: goindex dynkv [--listen ADDR] [--log FILE [--fsync]] [--password PW]
                    [--index exact|ckf [--ckf-expected-blocks N]]

Serves Dynamo's Valkey-module command set (DYNKV.APPLY, DYNKV.MATCH, ...) over
RESP2, so an unmodified Dynamo frontend keeps its KV index in goindex:

  goindex dynkv --listen 0.0.0.0:6379 --log /var/lib/goindex/dynkv.aof
  python -m dynamo.frontend --router-mode kv --router-valkey-urls redis://HOST:6379 \
      --router-valkey-allow-insecure-plaintext

Every key (namespace, component, scope, block size) is an independent index
with the module's semantics. With --log, every successful mutation is
appended to a log that a restarted server replays.

Backing index (--index):
  exact  (default) MATCH, MATCH_PRIMARY and SELECT read the module's own
         exact nodes.
  ckf    they read a CKF projection kept beside them: one cuckoo filter lane
         per rank holding blocks. Never below the exact depth of a block the
         filter holds; above it only by a 16-bit fingerprint collision
         (about 8α/65535 per probed position at slot occupancy α). All the
         bookkeeping stays exact, so every mutation replies as in exact mode,
         except: at most %d ranks of one key may hold blocks at once (a
         store for one more fails with DYNKV_INVALID_EVENT); a filter sized
         by --ckf-expected-blocks (blocks per rank; at the default each key
         allocates a %d-lane table of 16 MiB) that fills up leaves blocks
         out of the filter, and MATCH stops before them until space frees.
         DYNKV.STATS KEY DETAIL shows the backing and the CKF's counters
         (capacity omissions, load, memory); DYNKV.STATS KEY keeps the
         module's triple. A --log replays into either backing.

Accepted but not implemented:
  %s
    answer DYNKV_UNSUPPORTED: admission and lifecycle GC, used only with the
    module's admission or direct-worker-events modes;
  %s
    answer DYNKV_INTERNAL_COMMAND: replication and AOF internals the module
    refuses from normal clients too.`

// dynkvUsage is the synopsis with the commands the server accepts but does
// not implement, listed from the server's own table.
func dynkvUsage() string {
	unsupported, internal := dynkv.Unimplemented()
	return fmt.Sprintf(dynkvSynopsis, dynkv.CKFLanes, dynkv.CKFLanes, wrapWords(unsupported, 76, "\n  "), wrapWords(internal, 76, "\n  "))
}

// wrapWords joins words with spaces into lines of at most width bytes,
// separated by sep.
func wrapWords(words []string, width int, sep string) string {
	var b strings.Builder
	line := 0
	for i, w := range words {
		if i > 0 && line+1+len(w) > width {
			b.WriteString(sep)
			line = 0
		} else if i > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	return b.String()
}

func runDynkv(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dynkv", dynkvUsage(), stderr)
	listen := fs.String("listen", "127.0.0.1:6379", "TCP address to serve RESP2 on")
	logPath := fs.String("log", "", "append-only log file for restarts (empty: in memory only)")
	fsync := fs.Bool("fsync", false, "fsync the log before every reply (durable, slower)")
	maxConns := fs.Int("max-conns", dynkv.DefaultMaxConns, "maximum concurrent client connections")
	password := fs.String("password", "", "password clients must AUTH with (empty: none)")
	index := fs.String("index", string(dynkv.IndexExact), "backing index of MATCH, MATCH_PRIMARY and SELECT: exact or ckf")
	expected := fs.Uint64("ckf-expected-blocks", dynkv.DefaultCKFExpectedBlocks, "ckf: blocks one rank is expected to hold; sizes every lane's filter at ≤ 80% load")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	backing := dynkv.Backing{Index: dynkv.Index(*index), CKFExpectedBlocks: *expected}
	if backing.Index != dynkv.IndexExact && backing.Index != dynkv.IndexCKF {
		return fmt.Errorf("goindex dynkv: --index %q: want %s or %s: %w", *index, dynkv.IndexExact, dynkv.IndexCKF, errUsage)
	}
	srv, err := dynkv.NewServer(dynkv.Config{Addr: *listen, LogPath: *logPath, Fsync: *fsync, MaxConns: *maxConns, Password: *password, Backing: backing})
	if err != nil {
		if errors.Is(err, dynkv.ErrBadBacking) {
			return fmt.Errorf("goindex dynkv: %v: %w", err, errUsage)
		}
		return err
	}
	what := string(backing.Index)
	if backing.Index == dynkv.IndexCKF {
		what = fmt.Sprintf("ckf, %d expected blocks a rank", srv.Engine().Backing().CKFExpectedBlocks)
	}
	if n := srv.LogDiverged(); n > 0 {
		fmt.Fprintf(stderr, "goindex dynkv: warning: %d records of %s replayed with another outcome than logged\n", n, *logPath)
	}
	fmt.Fprintf(stderr, "goindex dynkv: serving on %s (index: %s; log: %s)\n", srv.Addr(), what, orNone(*logPath))
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	select {
	case <-ctx.Done():
		if err := srv.Close(); err != nil {
			return err
		}
		<-done
		return nil
	case err := <-done:
		srv.Close()
		return err
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
