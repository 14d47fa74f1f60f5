package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/goindex/goindex/bridge/consume"
	"github.com/goindex/goindex/bridge/natslink"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/snapenc"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/goindex/shm"
)

// relayBench holds the benchmark's server, relays and consumer.
type relayBench struct {
	cfg    RelayConfig
	rng    *rand.Rand
	srv    *natslink.Server
	feed   *nats.Conn
	conns  []*nats.Conn
	relays []*relay.Relay
	tables []*synthTable // synthetic runs only
	stops  []context.CancelFunc
	dir    string
	next   uint64

	consumer *consume.Consumer
	conn     *nats.Conn // the consumer's
	path     string     // the replica file
	applied  applyTimes
	deltas0  uint64 // lane 0's deltas when the steady phase began
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
	if b.cfg.Progress != nil {
		fmt.Fprintf(b.cfg.Progress, "bench relay: "+format+"\n", args...)
	}
}

// storedEvent is a root run of n fresh blocks of worker w, and its first
// canonical hash.
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

func (b *relayBench) run(ctx context.Context) (*RelayReport, error) {
	rep := &RelayReport{Synthetic: b.cfg.Synthetic, Lanes: b.cfg.Lanes, BlocksPerLane: b.cfg.Blocks}
	start := time.Now()
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	if !b.cfg.Synthetic {
		// A synthetic run's fill is the tables' synthesis and the relays'
		// start-up (which stores each table's snapshot).
		start = time.Now()
		if err := b.fill(ctx); err != nil {
			return nil, err
		}
	}
	if err := b.encoding(ctx, rep); err != nil {
		return nil, err
	}
	rep.FillSeconds = time.Since(start).Seconds()
	b.progress("filled %d lanes × %d blocks in %.1f s", b.cfg.Lanes, b.cfg.Blocks, rep.FillSeconds)
	cstop, err := b.resync(ctx, rep)
	if err != nil {
		return nil, err
	}
	defer cstop()
	if b.cfg.Synthetic {
		return rep, b.checkSynthetic()
	}
	if err := b.steady(ctx, rep); err != nil {
		return nil, err
	}
	if err := b.visible(ctx, rep); err != nil {
		return nil, err
	}
	return rep, b.apply(ctx, rep)
}

// start brings up the server, the feed connection and one relay per lane
// (over a synthetic table when asked).
func (b *relayBench) start(ctx context.Context) error {
	var err error
	if b.dir, err = os.MkdirTemp(shmDir(), "goindex-bench-relay-"); err != nil {
		return err
	}
	// Snapshots of big lanes exceed the default 1 MiB payload only through
	// the object store, which chunks them; deltas are cut to the payload.
	if b.srv, err = natslink.Start(natslink.ServerConfig{JetStream: true, StoreDir: b.dir + "/js", MaxPayload: 8 << 20}); err != nil {
		return err
	}
	if b.feed, err = b.connect("bench feed"); err != nil {
		return err
	}
	if b.cfg.Synthetic {
		t0 := time.Now()
		if b.tables, err = synthesize(b.cfg.Lanes, b.cfg.Blocks, b.cfg.Seed); err != nil {
			return err
		}
		b.progress("synthesized %d tables of %d fingerprints in %.1f s", b.cfg.Lanes, b.cfg.Blocks, time.Since(t0).Seconds())
	}
	for l := range b.cfg.Lanes {
		if err := b.startRelay(ctx, l); err != nil {
			return err
		}
	}
	return nil
}

func (b *relayBench) startRelay(ctx context.Context, l int) error {
	nc, err := b.connect(fmt.Sprintf("bench relay %d", l))
	if err != nil {
		return err
	}
	pc := relay.PoolConfig{Domain: 1, Namespace: "bench", Component: component(l), ExpectedBlocks: uint64(b.cfg.Blocks)}
	if b.cfg.Synthetic {
		pc.Source = b.tables[l]
	}
	r, err := relay.New(relay.Config{Conn: nc, DC: relayproto.DCID(l + 1), MaxBytes: 1 << 30, SnapshotEvery: time.Hour,
		Pools: []relay.PoolConfig{pc}})
	if err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	select {
	case <-r.Ready():
	case err := <-done:
		stop()
		return err
	}
	b.relays, b.stops = append(b.relays, r), append(b.stops, stop)
	return nil
}

// fill feeds every relay its blocks as root runs of RunBlocks and stores
// a snapshot once its pool has applied them all.
func (b *relayBench) fill(ctx context.Context) error {
	perLane := (b.cfg.Blocks + b.cfg.RunBlocks - 1) / b.cfg.RunBlocks
	for l := range b.relays {
		subject := dynamo.EventSubject("bench", component(l))
		left := b.cfg.Blocks
		for range perLane {
			n := min(left, b.cfg.RunBlocks)
			left -= n
			msg, _ := b.storedEvent(uint64(1+l%4), n)
			if err := b.feed.Publish(subject, msg); err != nil {
				return err
			}
		}
	}
	if err := b.feed.Flush(); err != nil {
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

// encoding counts the resident blocks and the snapshot bytes per block of
// every encoding.
func (b *relayBench) encoding(ctx context.Context, rep *RelayReport) error {
	var resident uint64
	var bytes [2]int
	var bits float64
	for _, r := range b.relays {
		st, err := r.Status(ctx)
		if err != nil {
			return err
		}
		resident += st[0].Producer.Resident
		rep.Buckets, rep.LoadFactor = st[0].Producer.Buckets, st[0].Producer.LoadFactor
		rep.Resync.SnapshotBytes += int64(st[0].SnapshotBytes)
		words, _ := r.AppendWords(ctx, nil, 1)
		bits += contentBits(words)
		for i, enc := range []snapenc.Encoding{snapenc.Dense, snapenc.Compact} {
			s := relayproto.Snapshot{Identity: st[0].Publisher.Identity, Words: words, Encoding: enc}
			for c := range s.Chunks(0) {
				frame, err := wire.AppendFrame(nil, c)
				if err != nil {
					return err
				}
				bytes[i] += len(frame)
			}
		}
	}
	if b.cfg.Synthetic {
		// The relays' producers are idle: the tables count what they hold.
		resident = 0
		for _, t := range b.tables {
			resident += t.resident
		}
		rep.LoadFactor = float64(resident) / float64(uint64(b.cfg.Lanes)*rep.Buckets*ckf.SlotsPerBucket)
	}
	rep.Resync.ResidentBlocks = resident
	rep.Encoding.DenseBytesPerBlock = float64(bytes[0]) / float64(resident)
	rep.Encoding.CompactBytesPerBlock = float64(bytes[1]) / float64(resident)
	rep.Encoding.FloorBytesPerBlock = bits / 8 / float64(resident)
	return nil
}

// resync starts a cold consumer and times it until every lane is READY,
// then holds every lane equal to its producer; it returns the consumer's
// stop.
func (b *relayBench) resync(ctx context.Context, rep *RelayReport) (func(), error) {
	var err error
	if b.conn, err = b.connect("bench consumer"); err != nil {
		return nil, err
	}
	var dcs []relayproto.DCID
	for l := range b.cfg.Lanes {
		dcs = append(dcs, relayproto.DCID(l+1))
	}
	b.path = b.dir + "/replica"
	profiling := b.cfg.ResyncProfile != nil
	if profiling {
		if err := pprof.StartCPUProfile(b.cfg.ResyncProfile); err != nil {
			return nil, fmt.Errorf("resync profile: %w", err)
		}
		defer func() {
			if profiling {
				pprof.StopCPUProfile()
			}
		}()
	}
	in0, cpu0 := b.conn.Stats().InBytes, processCPU()
	start := time.Now()
	c, err := consume.New(ctx, consume.Config{Conn: b.conn, Domain: 1, DCs: dcs, Path: b.path, ObserveDelta: b.applied.observe})
	if err != nil {
		return nil, err
	}
	b.consumer = c
	cctx, cstop := context.WithCancel(ctx)
	cdone := make(chan error, 1)
	go func() { cdone <- c.Run(cctx) }()
	stop := func() { cstop(); <-cdone }
	all := uint64(1)<<b.cfg.Lanes - 1
	if err := waitFor(ctx, 10*time.Minute, func() (bool, error) { return c.Writer().Table().Ready() == all, nil }); err != nil {
		stop()
		return nil, err
	}
	rs := &rep.Resync
	rs.Seconds = time.Since(start).Seconds()
	rs.CPUSeconds = (processCPU() - cpu0).Seconds()
	if profiling {
		pprof.StopCPUProfile()
		profiling = false
	}
	rs.WireBytes = b.conn.Stats().InBytes - in0
	rs.WireBytesPerBlock = float64(rs.WireBytes) / float64(rs.ResidentBlocks)
	rs.BlocksPerSecond = float64(rs.ResidentBlocks) / rs.Seconds
	rs.ExtrapolatedTo130MSs = 130e6 / rs.BlocksPerSecond
	for l, r := range b.relays {
		want, _ := r.AppendWords(ctx, nil, 1)
		if !slices.Equal(c.Writer().Table().AppendLane(nil, l), want) {
			stop()
			return nil, fmt.Errorf("%w: lane %d differs from its producer after the resync", ErrCheck, l)
		}
	}
	for _, st := range c.Status() {
		rs.Retries += st.Resyncs
		if st.Resyncs > 0 {
			b.progress("lane %d retried %d times during the resync; last: %s", st.Lane, st.Resyncs, st.LastFault)
		}
	}
	b.progress("cold resync of %d blocks in %.2f s", rs.ResidentBlocks, rs.Seconds)
	return stop, nil
}

// checkSynthetic has each lane find the sampled hashes of its table, as a
// probe of a tracked block would.
func (b *relayBench) checkSynthetic() error {
	w := b.consumer.Writer()
	f := w.Format()
	for l, t := range b.tables {
		for _, h := range t.sample {
			if w.Reader().Table().Probe(f.Probe(h), 1<<l) == 0 {
				return fmt.Errorf("%w: lane %d misses synthetic hash %#x after the resync", ErrCheck, l, h)
			}
		}
	}
	return nil
}

// steady feeds SteadyEvents events into lane 0's relay as fast as they go
// and times them until the lane is back in step with its producer.
func (b *relayBench) steady(ctx context.Context, rep *RelayReport) error {
	r0 := b.relays[0]
	st0, err := r0.Status(ctx)
	if err != nil {
		return err
	}
	deltas0 := b.lane0().Deltas
	subject := dynamo.EventSubject("bench", component(0))
	b.applied.start()
	start := time.Now()
	for range b.cfg.SteadyEvents {
		msg, _ := b.storedEvent(1, 1+b.rng.IntN(8))
		if err := b.feed.Publish(subject, msg); err != nil {
			return err
		}
	}
	if err := b.feed.Flush(); err != nil {
		return err
	}
	if err := waitFor(ctx, 10*time.Minute, func() (bool, error) {
		st, err := r0.Status(ctx)
		if err != nil || st[0].Intake.Events != st0[0].Intake.Events+uint64(b.cfg.SteadyEvents) {
			return false, err
		}
		return b.lane0().Installed == st[0].Publisher.LastSequence, nil
	}); err != nil {
		return err
	}
	s := &RelaySteady{Seconds: time.Since(start).Seconds(), Events: b.cfg.SteadyEvents}
	st1, err := r0.Status(ctx)
	if err != nil {
		return err
	}
	s.Frames = b.lane0().Deltas - deltas0
	s.Images = st1[0].Producer.EmittedImages - st0[0].Producer.EmittedImages
	s.FramesPerSec = float64(s.Frames) / s.Seconds
	s.ImagesPerSec = float64(s.Images) / s.Seconds
	rep.Steady = s
	b.deltas0 = deltas0
	return nil
}

func (b *relayBench) lane0() consume.LaneStatus { return b.consumer.Status()[0] }

// visible times Samples single stored events, one at a time, from
// publishing to a probe of the replica file finding the block.
func (b *relayBench) visible(ctx context.Context, rep *RelayReport) error {
	reader, err := shm.Attach(b.path)
	if err != nil {
		return err
	}
	defer reader.Close()
	f := reader.Format()
	subject := dynamo.EventSubject("bench", component(0))
	lat := make([]time.Duration, 0, b.cfg.Samples)
	for range b.cfg.Samples {
		msg, h := b.storedEvent(1, 1)
		t0 := time.Now()
		if err := b.feed.Publish(subject, msg); err != nil {
			return err
		}
		p := f.Probe(h)
		if err := waitFor(ctx, time.Minute, func() (bool, error) { return reader.Table().Probe(p, 1) != 0, nil }); err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	rep.Visible = &RelayVisible{Samples: len(lat), P50Ms: millis(lat[len(lat)/2]), P99Ms: millis(lat[len(lat)*99/100]), MaxMs: millis(lat[len(lat)-1])}
	return nil
}

// apply collects one consumer apply time per delta lane 0 applied since
// the steady phase began (the last one is observed just after its probe
// succeeded).
func (b *relayBench) apply(ctx context.Context, rep *RelayReport) error {
	want := int(b.lane0().Deltas - b.deltas0)
	if err := waitFor(ctx, time.Minute, func() (bool, error) { return b.applied.frames() >= want, nil }); err != nil {
		return err
	}
	b.applied.mu.Lock()
	took, images := slices.Clone(b.applied.took), b.applied.images
	b.applied.mu.Unlock()
	if len(took) != want {
		return fmt.Errorf("%w: %d delta apply times, lane 0 applied %d deltas", ErrCheck, len(took), want)
	}
	slices.Sort(took)
	rep.Apply = &RelayApply{Frames: len(took), ImagesPerFrame: float64(images) / float64(len(took)),
		P50Us: micros(took[len(took)/2]), P99Us: micros(took[len(took)*99/100]), MaxUs: micros(took[len(took)-1])}
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
