package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/goindex/goindex/bridge/dynkv"
)

const dynkvSynopsis = `Usage: goindex dynkv [--listen ADDR] [--log FILE [--fsync]] [--password PW]
                    [--auto-aof-rewrite-percentage P] [--auto-aof-rewrite-min-size SIZE]
                    [--index exact|ckf [--ckf-expected-blocks N]]
                    [--command-timeout D] [--write-timeout D] [--idle-timeout D]

Answers Dynamo's Valkey module dynkv reply for reply (DYNKV.APPLY,
DYNKV.MATCH, ... every command the module registers) over RESP2, so an
unmodified Dynamo frontend keeps its KV index in goindex:

  goindex dynkv --listen 0.0.0.0:6379 --log /var/lib/goindex/dynkv.aof
  python -m dynamo.frontend --router-mode kv \
      --router-valkey-urls valkey://HOST:6379 --router-valkey-allow-insecure-plaintext \
      [--router-valkey-index-scope SCOPE [--router-valkey-worker-events]]

Every key is an independent index with the module's semantics. With --log,
every write command (accepted or rejected) is appended to a log that a
restarted server replays, whatever the crash.

Log rewrites keep the log, and so the restart time, in proportion to the
state rather than to its history: the log is replaced by a compact image of
every key's state (ranks, blocks, tickets, registrations, leases, admission
grants, counters) followed by the commands since, written to FILE.rewrite,
synced and renamed over FILE (a crash at any point leaves a log that
replays). SAVE rewrites and answers once the new log is on disk; BGSAVE and
BGREWRITEAOF rewrite in the background (INFO persistence shows
aof_rewrite_in_progress, aof_rewrites, aof_current_size, aof_base_size);
and, as Valkey's auto-aof-rewrite-*, a rewrite starts by itself once the log
is over --auto-aof-rewrite-min-size and has grown by
--auto-aof-rewrite-percentage over its size after the last rewrite (or at
start). CONFIG SET changes both while running. The image answers every
later command as the history would; in ckf mode the filters are rebuilt
from it (same blocks; the CKF's own counters start over).

Backing index (--index):
  exact  (default) MATCH, MATCH_PRIMARY and SELECT read the module's own
         exact nodes: the module's replies.
  ckf    they read a CKF projection kept beside them: one cuckoo filter lane
         per rank holding blocks. Never below the exact depth of a block the
         filter holds; above it only by a 16-bit fingerprint collision
         (about 8α/65535 per probed position at slot occupancy α); MATCH
         lists ranks sorted. All the bookkeeping stays exact, so every
         mutation replies as in exact mode, except: at most %d ranks of one
         key may hold blocks at once (a store for one more fails with
         DYNKV_INVALID_EVENT); a filter sized by --ckf-expected-blocks
         (blocks per rank; at the default each key allocates a %d-lane table
         of 16 MiB) that fills up leaves blocks out of the filter, and MATCH
         stops before them until space frees. DYNKV.STATS KEY DETAIL shows
         the backing and the CKF's counters; DYNKV.STATS KEY keeps the
         module's triple. A --log replays into either backing.

Not implemented, or not as the module:
  Replication is out of scope: DYNKV.APPLY_OWNED_AT, DYNKV.ADMIT_APPLY,
    DYNKV.WORKER_LEASE_APPLY, DYNKV.GC_APPLY and DYNKV.RESTORE answer the
    module's internal-only errors as for any client; ROLE answers master,
    REPLICAOF/SLAVEOF/SYNC/PSYNC an ERR line. WAIT answers the count asked
    for when --log is set (the log stands in for the replica), 0 without.
  DYNKV.GC follows the module's resumable cursor, plans and transitions
    call for call (its counters and GC_STATS' phase are the module's), but
    the cursor survives a restart, where the module's starts over.

Sentinel (--sentinel-master NAME): the server also answers SENTINEL as a
Sentinel monitoring one primary, itself, named NAME, with no replicas and
no other Sentinels, so a frontend configured with
--router-valkey-sentinel-urls and master name NAME (or any Sentinel-aware
client) can be pointed at it: it asks for the primary's address and
connects there, to the same server. The address reported is
--sentinel-announce, else the one the client reached the server at. There
is no failover.

Slow or hostile clients: a command must arrive within --command-timeout of
its first byte, a reply must be read within --write-timeout, or the
connection is closed; --idle-timeout (default 0: never, as Valkey) also
closes silent connections; at most --max-conns connections.`

// dynkvUsage is the synopsis with the ckf lane limit filled in.
func dynkvUsage() string { return fmt.Sprintf(dynkvSynopsis, dynkv.CKFLanes, dynkv.CKFLanes) }

func runDynkv(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dynkv", dynkvUsage(), stderr)
	listen := fs.String("listen", "127.0.0.1:6379", "TCP address to serve RESP2 on")
	logPath := fs.String("log", "", "append-only log file for restarts (empty: in memory only)")
	fsync := fs.Bool("fsync", false, "fsync the log before every reply (durable, slower)")
	maxConns := fs.Int("max-conns", dynkv.DefaultMaxConns, "maximum concurrent client connections")
	password := fs.String("password", "", "password clients must AUTH with (empty: none)")
	index := fs.String("index", string(dynkv.IndexExact), "backing index of MATCH, MATCH_PRIMARY and SELECT: exact or ckf")
	expected := fs.Uint64("ckf-expected-blocks", dynkv.DefaultCKFExpectedBlocks, "ckf: blocks one rank is expected to hold; sizes every lane's filter at ≤ 80% load")
	commandTimeout := fs.Duration("command-timeout", dynkv.DefaultCommandTimeout, "longest time from a command's first byte to its last; a client stalling mid-command is disconnected (0: none)")
	writeTimeout := fs.Duration("write-timeout", dynkv.DefaultWriteTimeout, "longest time one reply may wait for a client that does not read (0: none)")
	idleTimeout := fs.Duration("idle-timeout", 0, "disconnect a client silent this long between commands (0: never)")
	rewritePercent := fs.Int("auto-aof-rewrite-percentage", dynkv.DefaultAutoRewritePercentage, "rewrite the log once it has grown by this percentage over its size after the last rewrite (0: never by itself)")
	sentinelMaster := fs.String("sentinel-master", "", "answer SENTINEL as a Sentinel monitoring this server as the primary of this name, for clients configured with Sentinel URLs (empty: SENTINEL refused)")
	sentinelAnnounce := fs.String("sentinel-announce", "", "host:port SENTINEL reports for the primary (empty: the address each client reached the server at)")
	rewriteMin := fs.String("auto-aof-rewrite-min-size", "64mb", "no automatic rewrite while the log is smaller: bytes, or with a unit k, kb, m, mb, g, gb")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	minSize, err := dynkv.ParseMemory(*rewriteMin)
	if err != nil {
		return fmt.Errorf("goindex dynkv: --auto-aof-rewrite-min-size: %v: %w", err, errUsage)
	}
	if *rewritePercent < 0 {
		return fmt.Errorf("goindex dynkv: --auto-aof-rewrite-percentage %d: want 0 (off) or more: %w", *rewritePercent, errUsage)
	}
	autoPercent := *rewritePercent
	if autoPercent == 0 {
		autoPercent = -1 // the Config's "never"
	}
	backing := dynkv.Backing{Index: dynkv.Index(*index), CKFExpectedBlocks: *expected}
	if backing.Index != dynkv.IndexExact && backing.Index != dynkv.IndexCKF {
		return fmt.Errorf("goindex dynkv: --index %q: want %s or %s: %w", *index, dynkv.IndexExact, dynkv.IndexCKF, errUsage)
	}
	srv, err := dynkv.NewServer(dynkv.Config{Addr: *listen, LogPath: *logPath, Fsync: *fsync, MaxConns: *maxConns, Password: *password, Backing: backing,
		CommandTimeout: orNegative(*commandTimeout), WriteTimeout: orNegative(*writeTimeout), IdleTimeout: *idleTimeout,
		AutoRewritePercentage: autoPercent, AutoRewriteMinSize: max(minSize, 1),
		SentinelMaster: *sentinelMaster, SentinelAnnounce: *sentinelAnnounce}) // a 0 minimum is the Config's default, 1 byte is none
	if err != nil {
		if errors.Is(err, dynkv.ErrBadBacking) || errors.Is(err, dynkv.ErrBadAnnounce) {
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

// orNegative maps a flag's 0 ("none") to the Config's negative "none".
func orNegative(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
