package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/goindex/goindex/bridge/dynkv"
)

const dynkvSynopsis = `Usage: goindex dynkv [--listen ADDR] [--log FILE [--fsync]] [--password PW]

Serves Dynamo's Valkey-module command set (DYNKV.APPLY, DYNKV.MATCH, ...) over
RESP2, so an unmodified Dynamo frontend keeps its KV index in goindex:

  goindex dynkv --listen 0.0.0.0:6379 --log /var/lib/goindex/dynkv.aof
  python -m dynamo.frontend --router-mode kv --router-valkey-urls redis://HOST:6379 \
      --router-valkey-allow-insecure-plaintext

Every key (namespace, component, scope, block size) is an independent index
with the module's semantics. With --log, every successful mutation is
appended to a log that a restarted server replays.

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
	return fmt.Sprintf(dynkvSynopsis, wrapWords(unsupported, 76, "\n  "), wrapWords(internal, 76, "\n  "))
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
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	srv, err := dynkv.NewServer(dynkv.Config{Addr: *listen, LogPath: *logPath, Fsync: *fsync, MaxConns: *maxConns, Password: *password})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "goindex dynkv: serving on %s (log: %s)\n", srv.Addr(), orNone(*logPath))
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
