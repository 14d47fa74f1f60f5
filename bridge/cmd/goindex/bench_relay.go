package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/goindex/goindex/bridge/consume"
	"github.com/goindex/goindex/bridge/natslink"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/nats-io/nats.go"
)

const benchRelaySynopsis = `Usage: goindex bench relay [--lanes 13] [--blocks 1000000] [--steady-events N] [--samples N] [--synthetic] [--json]

Measures the Relay over NATS on loopback, all in this process: one embedded
nats-server with JetStream, --lanes DC relays (one pool each, sized for
--blocks), and one consumer writing a shared-memory replica.

  fill     every relay is fed --blocks distinct blocks as Dynamo msgpack
           envelopes of --run-blocks blocks each, then stores a snapshot
  resync   a cold consumer starts: wall time until every lane is READY and
           equals its producer byte for byte; bytes the consumer's connection
           received, per resident block; compact snapshot objects per block
  encoding snapshot bytes per resident block, dense vs compact
  steady   --steady-events events into lane 0's relay as fast as they go:
           delta frames/s and bucket images/s on that lane, until the lane is
           back in step with its producer
  visible  --samples single stored events, one at a time: latency from
           publishing the event to the block being found by a probe of the
           replica (cadence timer, relay, JetStream, consumer apply)
  apply    the consumer side alone, for every delta of the steady and
           visible phases: decoding the frame and installing its images
           into the replica (the lane's ingestor, consume.Config.ObserveDelta),
           p50/p99/max; transport and the relay are not in it

Scale: a 10M-block lane is 4,194,304 buckets (32 MiB dense); the producer's
exact state needs roughly 60 bytes per block on top (about 180 bytes of
resident memory per block in this benchmark: 13 × 10M does not fit 23 GB).

--synthetic: a resync-only run whose tables are SYNTHETIC. No KV event is
fed and no producer holds exact ownership: each lane's table is filled
directly with --blocks random canonical hashes, addressed by the pool's
format and placed as the producer places them (first free slot of either
bucket, else cuckoo kicks), so it has the bucket count, load and
fingerprint distribution of a lane tracking --blocks blocks. Each relay
publishes its table through its real publisher and JetStream snapshot store
(relay.PoolConfig.Source) and subscribes to no events; the cold consumer's
resync is the real code path, checked equal to the tables byte for byte and
by probes of sampled hashes. Only synthesize (in place of fill), resync and
encoding run; the report has no steady, visible or apply figures.`

// Limits of the relay benchmark's flags.
const (
	maxBenchRelayLanes  = relayproto.MaxLanes
	maxBenchRelayBlocks = 1 << 24
)

// relayBenchReport is the `goindex bench relay --json` object.
type relayBenchReport struct {
	// Synthetic says the tables were filled directly (--synthetic), not by
	// events: FillSeconds is then the synthesis and the relays' start-up.
	Synthetic     bool    `json:"synthetic"`
	Lanes         int     `json:"lanes"`
	BlocksPerLane int     `json:"blocks_per_lane"`
	Buckets       uint64  `json:"buckets"`
	LoadFactor    float64 `json:"load_factor"`
	FillSeconds   float64 `json:"fill_seconds"`
	Resync        struct {
		Seconds              float64 `json:"seconds"`
		WireBytes            uint64  `json:"wire_bytes"`
		WireBytesPerBlock    float64 `json:"wire_bytes_per_block"`
		SnapshotBytes        int64   `json:"snapshot_bytes"`
		ResidentBlocks       uint64  `json:"resident_blocks"`
		BlocksPerSecond      float64 `json:"blocks_per_second"`
		ExtrapolatedTo130MSs float64 `json:"extrapolated_130m_seconds"`
		// Retries counts lane subscriptions that ended before every lane
		// was READY (each one re-reads its snapshot): 0 in a clean resync.
		Retries uint64 `json:"retries"`
	} `json:"resync"`
	Encoding struct {
		DenseBytesPerBlock   float64 `json:"dense_bytes_per_block"`
		CompactBytesPerBlock float64 `json:"compact_bytes_per_block"`
	} `json:"encoding"`
	// Steady, Visible and Apply are absent from a synthetic run.
	Steady  *relayBenchSteady  `json:"steady,omitempty"`
	Visible *relayBenchVisible `json:"visible,omitempty"`
	Apply   *relayBenchApply   `json:"apply,omitempty"`
}

// relayBenchSteady is the steady phase: lane 0's delta frames and images.
type relayBenchSteady struct {
	Events       int     `json:"events"`
	Seconds      float64 `json:"seconds"`
	Frames       uint64  `json:"frames"`
	Images       uint64  `json:"images"`
	FramesPerSec float64 `json:"frames_per_second"`
	ImagesPerSec float64 `json:"images_per_second"`
}

// relayBenchVisible is the event → replica latency.
type relayBenchVisible struct {
	Samples int     `json:"samples"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
}

// relayBenchApply is the consumer-side time per delta frame (decode and
// install into the replica) over the steady and visible phases.
type relayBenchApply struct {
	Frames         int     `json:"frames"`
	ImagesPerFrame float64 `json:"images_per_frame"`
	P50Us          float64 `json:"p50_us"`
	P99Us          float64 `json:"p99_us"`
	MaxUs          float64 `json:"max_us"`
}

// applyTimes collects the consumer's per-delta apply times once on.
type applyTimes struct {
	mu     sync.Mutex
	on     bool
	took   []time.Duration
	images int
}

// observe is the consumer's ObserveDelta.
func (a *applyTimes) observe(_, images int, took time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.on {
		a.took = append(a.took, took)
		a.images += images
	}
}

func (a *applyTimes) start() {
	a.mu.Lock()
	a.on = true
	a.mu.Unlock()
}

func (a *applyTimes) frames() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.took)
}

func runBenchRelay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench relay", benchRelaySynopsis, stderr)
	lanes := fs.Int("lanes", 13, "DCs (lanes), each with its own relay")
	blocks := fs.Int("blocks", 1_000_000, "blocks per lane (the reference deployment: 10M)")
	runBlocks := fs.Int("run-blocks", 64, "blocks per stored event while filling")
	steadyEvents := fs.Int("steady-events", 20_000, "events of the steady-state phase")
	samples := fs.Int("samples", 200, "visibility latency samples")
	seed := fs.Uint64("seed", 1, "block hash seed")
	synthetic := fs.Bool("synthetic", false, "resync only, of SYNTHETIC tables filled directly at the load of --blocks (see above)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *lanes < 1 || *lanes > maxBenchRelayLanes:
		return fmt.Errorf("bench relay: --lanes %d, want 1..%d: %w", *lanes, maxBenchRelayLanes, errUsage)
	case *blocks < 1 || *blocks > maxBenchRelayBlocks:
		return fmt.Errorf("bench relay: --blocks %d, want 1..%d: %w", *blocks, maxBenchRelayBlocks, errUsage)
	case *runBlocks < 1 || *runBlocks > dynamo.MaxBlocksPerEvent:
		return fmt.Errorf("bench relay: --run-blocks %d: %w", *runBlocks, errUsage)
	case *steadyEvents < 1 || *samples < 1:
		return fmt.Errorf("bench relay: --steady-events and --samples must be ≥ 1: %w", errUsage)
	}
	b := &relayBench{stderr: stderr, rng: rand.New(rand.NewPCG(*seed, 7)), seed: *seed, runBlocks: *runBlocks, synthetic: *synthetic}
	defer b.close()
	rep, err := b.run(ctx, *lanes, *blocks, *steadyEvents, *samples)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	if rep.Synthetic {
		fmt.Fprintf(tw, "SYNTHETIC tables\teach lane filled directly with %d random fingerprints (no events, no exact ownership);\n", rep.BlocksPerLane)
		fmt.Fprintf(tw, "\tpublished by the real relays' snapshot store, resynced by the real consumer\n")
	}
	fmt.Fprintf(tw, "lanes × blocks\t%d × %d (%d buckets per lane, load %.3f)\n", rep.Lanes, rep.BlocksPerLane, rep.Buckets, rep.LoadFactor)
	if rep.Synthetic {
		fmt.Fprintf(tw, "synthesize\t%.2f s (tables filled, relays up, snapshots stored)\n", rep.FillSeconds)
	} else {
		fmt.Fprintf(tw, "fill\t%.2f s\n", rep.FillSeconds)
	}
	fmt.Fprintf(tw, "cold resync\t%.2f s, %d bytes received (%.3f B/block), %.1f M blocks/s; 130M blocks ≈ %.1f s at this rate; %d lane retries\n",
		rep.Resync.Seconds, rep.Resync.WireBytes, rep.Resync.WireBytesPerBlock, rep.Resync.BlocksPerSecond/1e6, rep.Resync.ExtrapolatedTo130MSs,
		rep.Resync.Retries)
	fmt.Fprintf(tw, "snapshot bytes/block\tdense %.3f, compact %.3f\n", rep.Encoding.DenseBytesPerBlock, rep.Encoding.CompactBytesPerBlock)
	if rep.Synthetic {
		return tw.Flush()
	}
	fmt.Fprintf(tw, "steady (lane 0)\t%d events in %.2f s: %.0f frames/s, %.0f images/s\n", rep.Steady.Events, rep.Steady.Seconds, rep.Steady.FramesPerSec, rep.Steady.ImagesPerSec)
	fmt.Fprintf(tw, "event → replica\tp50 %.3f ms, p99 %.3f ms, max %.3f ms (%d samples)\n", rep.Visible.P50Ms, rep.Visible.P99Ms, rep.Visible.MaxMs, rep.Visible.Samples)
	fmt.Fprintf(tw, "delta apply\tp50 %.1f µs, p99 %.1f µs, max %.1f µs (%d deltas, %.1f images each; consumer decode + install into the replica)\n",
		rep.Apply.P50Us, rep.Apply.P99Us, rep.Apply.MaxUs, rep.Apply.Frames, rep.Apply.ImagesPerFrame)
	return tw.Flush()
}

// relayBench holds the benchmark's servers, relays and consumer.
type relayBench struct {
	stderr    io.Writer
	rng       *rand.Rand
	seed      uint64
	runBlocks int
	synthetic bool
	srv       *natslink.Server
	conns     []*nats.Conn
	relays    []*relay.Relay
	stops     []context.CancelFunc
	dir       string
	next      uint64
}

func (b *relayBench) close() {
	for _, r := range b.relays {
		r.Close()
	}
	for _, s := range b.stops {
		s()
	}
	for _, c := range b.conns {
		c.Close()
	}
	if b.srv != nil {
		b.srv.Shutdown()
	}
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

func (b *relayBench) connect(name string) (*nats.Conn, error) {
	nc, err := natslink.Connect(b.srv.ClientURL(), name, nil)
	if err == nil {
		b.conns = append(b.conns, nc)
	}
	return nc, err
}

func (b *relayBench) progress(format string, args ...any) {
	fmt.Fprintf(b.stderr, "bench relay: "+format+"\n", args...)
}

// storedEvent is a root run of n fresh blocks of worker w.
func (b *relayBench) storedEvent(w uint64, n int) ([]byte, uint64) {
	ev := dynamo.RouterEvent{WorkerID: w, Event: dynamo.CacheEvent{Kind: kv.Stored}}
	first := uint64(0)
	prev := uint64(0)
	for i := range n {
		b.next++
		local := b.rng.Uint64()
		c := local
		if i > 0 {
			c = kv.ChainHash(prev, local)
		} else {
			first = c
		}
		prev = c
		ev.Event.Stored.Blocks = append(ev.Event.Stored.Blocks, dynamo.StoredBlock{BlockHash: b.next, TokensHash: local})
	}
	payload, _ := dynamo.AppendMsgpack(nil, &ev)
	return dynamo.AppendEnvelope(nil, &dynamo.Envelope{Topic: dynamo.EventTopic, PublisherID: w, Sequence: b.next, Payload: payload}), first
}

func component(lane int) string { return fmt.Sprintf("bench-%d", lane) }

func (b *relayBench) run(ctx context.Context, lanes, blocks, steadyEvents, samples int) (*relayBenchReport, error) {
	rep := &relayBenchReport{Synthetic: b.synthetic, Lanes: lanes, BlocksPerLane: blocks}
	var err error
	if b.dir, err = os.MkdirTemp(shmDir(), "goindex-bench-relay-"); err != nil {
		return nil, err
	}
	// Snapshots of big lanes exceed the default 1 MiB payload only through
	// the object store, which chunks them; deltas are cut to the payload.
	if b.srv, err = natslink.Start(natslink.ServerConfig{JetStream: true, StoreDir: b.dir + "/js", MaxPayload: 8 << 20}); err != nil {
		return nil, err
	}
	feed, err := b.connect("bench feed")
	if err != nil {
		return nil, err
	}
	// A synthetic run times the tables' synthesis and the relays' start-up
	// (which stores each table's snapshot) as its fill.
	start := time.Now()
	var tables []*synthTable
	if b.synthetic {
		if tables, err = synthesize(lanes, blocks, b.seed); err != nil {
			return nil, err
		}
		b.progress("synthesized %d tables of %d fingerprints in %.1f s", lanes, blocks, time.Since(start).Seconds())
	}
	for l := range lanes {
		nc, err := b.connect(fmt.Sprintf("bench relay %d", l))
		if err != nil {
			return nil, err
		}
		pc := relay.PoolConfig{Domain: 1, Namespace: "bench", Component: component(l), ExpectedBlocks: uint64(blocks)}
		if b.synthetic {
			pc.Source = tables[l]
		}
		r, err := relay.New(relay.Config{Conn: nc, DC: relayproto.DCID(l + 1), MaxBytes: 1 << 30, SnapshotEvery: time.Hour,
			Pools: []relay.PoolConfig{pc}})
		if err != nil {
			return nil, err
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		select {
		case <-r.Ready():
		case err := <-done:
			stop()
			return nil, err
		}
		b.relays, b.stops = append(b.relays, r), append(b.stops, stop)
	}

	// Fill.
	if !b.synthetic {
		start = time.Now()
		if err := b.fill(ctx, feed, blocks); err != nil {
			return nil, err
		}
	}
	var resident uint64
	var denseBytes, compactBytes int
	for _, r := range b.relays {
		st, err := r.Status(ctx)
		if err != nil {
			return nil, err
		}
		resident += st[0].Producer.Resident
		rep.Buckets, rep.LoadFactor = st[0].Producer.Buckets, st[0].Producer.LoadFactor
		rep.Resync.SnapshotBytes += int64(st[0].SnapshotBytes)
		words, _ := r.AppendWords(ctx, nil, 1)
		for _, enc := range []relayproto.Encoding{relayproto.Dense, relayproto.Compact} {
			s := relayproto.Snapshot{Identity: st[0].Publisher.Identity, Words: words, Encoding: enc}
			for c := range s.Chunks(0) {
				frame, err := relayproto.AppendSnapshot(nil, c)
				if err != nil {
					return nil, err
				}
				if enc == relayproto.Dense {
					denseBytes += len(frame)
				} else {
					compactBytes += len(frame)
				}
			}
		}
	}
	rep.FillSeconds = time.Since(start).Seconds()
	if b.synthetic {
		// The relays' producers are idle: the tables count what they hold.
		resident = 0
		for _, t := range tables {
			resident += t.resident
		}
		rep.LoadFactor = float64(resident) / float64(uint64(lanes)*rep.Buckets*ckf.SlotsPerBucket)
	}
	rep.Resync.ResidentBlocks = resident
	rep.Encoding.DenseBytesPerBlock = float64(denseBytes) / float64(resident)
	rep.Encoding.CompactBytesPerBlock = float64(compactBytes) / float64(resident)
	b.progress("filled %d lanes × %d blocks in %.1f s", lanes, blocks, rep.FillSeconds)

	// Cold resync.
	cnc, err := b.connect("bench consumer")
	if err != nil {
		return nil, err
	}
	var dcs []relayproto.DCID
	for l := range lanes {
		dcs = append(dcs, relayproto.DCID(l+1))
	}
	path := b.dir + "/replica"
	in0 := cnc.Stats().InBytes
	start = time.Now()
	var applied applyTimes
	c, err := consume.New(ctx, consume.Config{Conn: cnc, Domain: 1, DCs: dcs, Path: path, ObserveDelta: applied.observe})
	if err != nil {
		return nil, err
	}
	cctx, cstop := context.WithCancel(ctx)
	cdone := make(chan error, 1)
	go func() { cdone <- c.Run(cctx) }()
	defer func() { cstop(); <-cdone }()
	all := uint64(1)<<lanes - 1
	if err := waitFor(ctx, 10*time.Minute, func() (bool, error) { return c.Writer().Table().Ready() == all, nil }); err != nil {
		return nil, err
	}
	rep.Resync.Seconds = time.Since(start).Seconds()
	rep.Resync.WireBytes = cnc.Stats().InBytes - in0
	rep.Resync.WireBytesPerBlock = float64(rep.Resync.WireBytes) / float64(resident)
	rep.Resync.BlocksPerSecond = float64(resident) / rep.Resync.Seconds
	rep.Resync.ExtrapolatedTo130MSs = 130e6 / rep.Resync.BlocksPerSecond
	for l, r := range b.relays {
		want, _ := r.AppendWords(ctx, nil, 1)
		if !slices.Equal(c.Writer().Table().AppendLane(nil, l), want) {
			return nil, fmt.Errorf("%w: lane %d differs from its producer after the resync", errBenchCheck, l)
		}
	}
	for _, st := range c.Status() {
		rep.Resync.Retries += st.Resyncs
		if st.Resyncs > 0 {
			b.progress("lane %d retried %d times during the resync; last: %s", st.Lane, st.Resyncs, st.LastFault)
		}
	}
	b.progress("cold resync of %d blocks in %.2f s", resident, rep.Resync.Seconds)
	if b.synthetic {
		// Each lane finds the sampled hashes of its table, as a probe of a
		// tracked block would.
		f := c.Writer().Format()
		for l, t := range tables {
			for _, h := range t.sample {
				if c.Writer().Table().Probe(f.Probe(h), 1<<l) == 0 {
					return nil, fmt.Errorf("%w: lane %d misses synthetic hash %#x after the resync", errBenchCheck, l, h)
				}
			}
		}
		return rep, nil
	}

	// Steady state on lane 0.
	r0 := b.relays[0]
	st0, _ := r0.Status(ctx)
	lane0 := func() consume.LaneStatus { return c.Status()[0] }
	deltas0 := lane0().Deltas
	subject := dynamo.EventSubject("bench", component(0))
	applied.start()
	start = time.Now()
	for range steadyEvents {
		msg, _ := b.storedEvent(1, 1+b.rng.IntN(8))
		if err := feed.Publish(subject, msg); err != nil {
			return nil, err
		}
	}
	if err := feed.Flush(); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 10*time.Minute, func() (bool, error) {
		st, err := r0.Status(ctx)
		if err != nil || st[0].Intake.Events != st0[0].Intake.Events+uint64(steadyEvents) {
			return false, err
		}
		return lane0().Installed == st[0].Publisher.LastSequence, nil
	}); err != nil {
		return nil, err
	}
	rep.Steady = &relayBenchSteady{Seconds: time.Since(start).Seconds()}
	st1, _ := r0.Status(ctx)
	rep.Steady.Events = steadyEvents
	rep.Steady.Frames = lane0().Deltas - deltas0
	rep.Steady.Images = st1[0].Producer.EmittedImages - st0[0].Producer.EmittedImages
	rep.Steady.FramesPerSec = float64(rep.Steady.Frames) / rep.Steady.Seconds
	rep.Steady.ImagesPerSec = float64(rep.Steady.Images) / rep.Steady.Seconds

	// Event → replica visibility.
	reader, err := shm.Attach(path)
	if err != nil {
		return nil, err
	}
	defer reader.Close()
	f := reader.Format()
	lat := make([]time.Duration, 0, samples)
	for range samples {
		msg, h := b.storedEvent(1, 1)
		t0 := time.Now()
		if err := feed.Publish(subject, msg); err != nil {
			return nil, err
		}
		p := f.Probe(h)
		if err := waitFor(ctx, time.Minute, func() (bool, error) { return reader.Table().Probe(p, 1) != 0, nil }); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	rep.Visible = &relayBenchVisible{Samples: samples, P50Ms: ms(lat[len(lat)/2]), P99Ms: ms(lat[len(lat)*99/100]), MaxMs: ms(lat[len(lat)-1])}

	// Delta apply: one time per delta lane 0 applied since the steady phase
	// began (the last one is observed just after its probe succeeded).
	want := int(lane0().Deltas - deltas0)
	if err := waitFor(ctx, time.Minute, func() (bool, error) { return applied.frames() >= want, nil }); err != nil {
		return nil, err
	}
	applied.mu.Lock()
	took, images := slices.Clone(applied.took), applied.images
	applied.mu.Unlock()
	if len(took) != want {
		return nil, fmt.Errorf("%w: %d delta apply times, lane 0 applied %d deltas", errBenchCheck, len(took), want)
	}
	slices.Sort(took)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	rep.Apply = &relayBenchApply{Frames: len(took), ImagesPerFrame: float64(images) / float64(len(took)),
		P50Us: us(took[len(took)/2]), P99Us: us(took[len(took)*99/100]), MaxUs: us(took[len(took)-1])}
	return rep, nil
}

// fill feeds every relay blocks fresh blocks as root runs of runBlocks and
// stores a snapshot once its pool has applied them all.
func (b *relayBench) fill(ctx context.Context, feed *nats.Conn, blocks int) error {
	perLane := (blocks + b.runBlocks - 1) / b.runBlocks
	for l := range b.relays {
		subject := dynamo.EventSubject("bench", component(l))
		left := blocks
		for range perLane {
			n := min(left, b.runBlocks)
			left -= n
			msg, _ := b.storedEvent(uint64(1+l%4), n)
			if err := feed.Publish(subject, msg); err != nil {
				return err
			}
		}
	}
	if err := feed.Flush(); err != nil {
		return err
	}
	for l, r := range b.relays {
		if err := waitFor(ctx, 10*time.Minute, func() (bool, error) {
			st, err := r.Status(ctx)
			return err == nil && st[0].Intake.Events == uint64(perLane), err
		}); err != nil {
			return fmt.Errorf("fill lane %d: %w", l, err)
		}
		if err := r.Snapshot(ctx, 1); err != nil {
			return err
		}
	}
	return nil
}

// shmDir is /dev/shm when present (where a replica lives in production),
// else the temporary directory.
func shmDir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// waitFor polls cond every 50 µs until it holds, fails, or total passes.
func waitFor(ctx context.Context, total time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(total)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench relay: condition not met within %v", total)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(50 * time.Microsecond)
	}
}
