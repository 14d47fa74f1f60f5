package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/goindex/goindex/bridge/obs"
	"github.com/goindex/goindex/bridge/record"
	"github.com/goindex/goindex/bridge/zmqfeed"
	"github.com/goindex/goindex/dynamo"
)

const recordSynopsis = `Usage: goindex record --out FILE [--nats URL | --etcd URL | --zmq-publisher EP …] [--namespace NS --component COMP [--endpoint EP] | --subject S] [--max-events N] [--duration D] [--json]

Captures Dynamo KV events from live NATS subjects, or from Dynamo's ZMQ
event plane, into an event log: one
Dynamo JSON RouterEvent per line (CUR shape, as dynamo.AppendJSON writes it),
no header, in arrival order. That is exactly the file
` + "`goindex parity --events FILE`" + ` replays, so a production capture can be held
against the exact index later. Without --nats it starts an embedded
nats-server on --listen and prints its URL for publishers.

Input:
  --namespace NS --component COMP [--endpoint EP]   every released event subject:
      namespace.<NS>.component.<COMP>.endpoint.<EP>.kv-events   v1.4+: msgpack
                   EventEnvelope, payload a list of RouterEvents (each recorded)
      namespace.<NS>.component.<COMP>.kv-events   v1.3 and older: one per envelope
      namespace.<NS>.component.<COMP>.kv_events   legacy G2025 JSON RouterEvent
  --subject S      one subject instead (NATS wildcards allowed); each message's
                   form is detected: an envelope (msgpack, or the early JSON
                   envelope), else a bare JSON RouterEvent
  Over ZeroMQ (Dynamo's default event plane since v1.3: NATS then carries no
  KV event), the workers of --namespace, --component and --endpoint, found
  as goindex relay finds them (see its --help): --etcd URL (default
  $ETCD_ENDPOINTS; a secured etcd with --etcd-user/--etcd-password, --etcd-ca,
  --etcd-cert/--etcd-key, by default Dynamo's $ETCD_AUTH_*), --kube
  [--kube-namespace NS], --zmq-publisher tcp://H:P[,…] or --zmq-broker
  xsub=…,xpub=… (default $DYN_ZMQ_BROKER_URL), or --zmq-broker-discover
  (brokers registered in etcd; default $DYN_ZMQ_BROKER_ENABLED); each message's four parts are
  checked and its envelope recorded as a NATS one is
  Envelopes at or below their publisher's last sequence are dropped as
  duplicates and missing sequences counted as gaps; messages that do not
  decode are counted and skipped. Events of every storage tier are written
  (parity skips and counts those not for the primary index).
Output:
  --out FILE       appended to, created if missing: runs may add to one log. A
                   partial last line (a killed writer's) is cut off first, so
                   every line stays one whole event; --truncate starts empty.
                   Lines go out whole, at least every --flush-every.
Stopping:
  --max-events N   after N events are written (0: no limit)
  --duration D     after D (0: no limit); SIGINT/SIGTERM stop cleanly too
Progress goes to stderr every --progress-every; the summary to stdout (one
JSON object with --json).` + natsSecurityUsage

func runRecord(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("record", recordSynopsis, stderr)
	url := fs.String("nats", "", "NATS URL (empty: start an embedded nats-server)")
	listen := fs.String("listen", "127.0.0.1:4222", "embedded server: client address (port 0: a free one)")
	logLevel := fs.String("log-level", "warn", "stderr log level of the NATS client: debug, info, warn or error")
	sec := addNATSSecurityFlags(fs)
	namespace := fs.String("namespace", "dynamo", "Dynamo namespace of the KV events")
	component := fs.String("component", "backend", "Dynamo component of the KV events")
	endpoint := fs.String("endpoint", dynamo.DefaultEndpoint, "Dynamo endpoint of the workers (scopes KV events from v1.4 on)")
	subject := fs.String("subject", "", "record this one subject instead of the released three")
	zf := addZMQPlaneFlags(fs)
	out := fs.String("out", "", "event log to append to (required)")
	truncate := fs.Bool("truncate", false, "empty --out first instead of appending")
	maxEvents := fs.Uint64("max-events", 0, "stop after this many events (0: no limit)")
	duration := fs.Duration("duration", 0, "stop after this long (0: no limit)")
	flushEvery := fs.Duration("flush-every", 200*time.Millisecond, "write buffered lines at least this often")
	progressEvery := fs.Duration("progress-every", 2*time.Second, "progress line on stderr this often (0: never)")
	asJSON := fs.Bool("json", false, "print the summary as one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case *out == "":
		return fmt.Errorf("record: --out is required: %w", errUsage)
	case *subject != "" && (set["namespace"] || set["component"] || set["endpoint"]):
		return fmt.Errorf("record: --subject excludes --namespace, --component and --endpoint: %w", errUsage)
	case *duration < 0:
		return fmt.Errorf("record: --duration must not be negative: %w", errUsage)
	case *flushEvery <= 0:
		return fmt.Errorf("record: --flush-every must be positive: %w", errUsage)
	}
	subs := record.Subjects(*namespace, *component, *endpoint)
	if *subject != "" {
		subs = []record.Subject{{Subject: *subject, Form: record.Detect}}
	}
	none := ""
	nf := natsFlags{url: url, listen: listen, store: &none, prefix: &none, sec: sec}
	text := obs.LogText
	log, err := obsFlags{logFormat: &text, logLevel: logLevel}.logger(stderr)
	if err != nil {
		return err
	}
	f, cut, err := record.OpenLog(*out, *truncate)
	if err != nil {
		return err
	}
	defer f.Close()
	if cut > 0 {
		fmt.Fprintf(stderr, "goindex record: cut a partial last line (%d bytes) off %s\n", cut, *out)
	}
	feeds, err := zmqfeed.Feeds(zf.config(dynamo.Scope{Namespace: *namespace, Component: *component, Endpoint: *endpoint}, log))
	if err != nil {
		return fmt.Errorf("record: %v: %w", err, errUsage)
	}
	warnIfNATSOnly(log, len(feeds), os.Getenv("DYN_EVENT_PLANE"))
	nc, closeNATS, err := nf.connect("goindex record", log)
	if err != nil {
		return err
	}
	defer closeNATS()
	rep, err := record.Run(ctx, nc, f, record.Config{Subjects: subs, Feeds: feeds, Out: *out, MaxEvents: *maxEvents,
		Duration: *duration, FlushEvery: *flushEvery, ProgressEvery: *progressEvery, Log: stderr})
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	rep.Command, rep.CutBytes = "record", cut
	if *asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	return rep.WriteText(stdout)
}
