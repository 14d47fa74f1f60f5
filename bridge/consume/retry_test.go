package consume

import (
	"fmt"
	"log/slog"
	"math/bits"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/goindex/goindex/internal/syncbuf"
)

// outage is how long a test keeps a lane's relay away: what it counts is
// the attempts made within it, not a wait for an event.
const outage = time.Second

// maxAttempts bounds the attempts a lane backing off from first makes in
// elapsed: each wait is at least half its step, so k waits take at least
// (2^k − 1)·first/2; one more attempt may be under way. Retrying every
// first would make about elapsed/first.
func maxAttempts(elapsed, first time.Duration) uint64 {
	return uint64(bits.Len64(uint64(2*elapsed/first))) + 1
}

// testFormat returns the buckets of startRelay's relays (4096 expected
// blocks), so a consumer can start before any of them.
func testFormat(t *testing.T) uint64 {
	t.Helper()
	buckets, err := ckf.BucketCount(4096)
	if err != nil {
		t.Fatalf("BucketCount(4096): %v", err)
	}
	return buckets
}

// A lane whose relay is down backs off: over a one-second outage, retrying
// from 1 ms, it makes a logarithmic number of attempts where it used to
// make one every millisecond. Once the relay is up the lane is READY and
// converges; after it served READY for MaxRetryEvery a fault resyncs from
// RetryEvery again: the pause after it is 1 ms, not the outage's last.
func TestConsumer_LaneOfARelayDownBacksOffAndStartsOverOnceReady(t *testing.T) {
	seed := relaytest.Seed(t, 23)
	_, nc := natstest.Start(t)
	path := filepath.Join(t.TempDir(), "replica")
	const first, most = time.Millisecond, 2 * time.Second
	logs := &syncbuf.Buffer{}
	started := time.Now()
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{4}, Seed: ckf.DefaultSeed, Buckets: testFormat(t),
		Path: path, RetryEvery: first, MaxRetryEvery: most, Logger: debugLogger(logs)})
	<-time.After(outage)
	st := c.Status()[0]
	elapsed := time.Since(started)
	if most := maxAttempts(elapsed, first); st.Resyncs == 0 || st.Resyncs > most {
		t.Errorf("lane of a relay down for %v, retrying from %v: %d attempts, want 1 to %d (backing off)", elapsed, first, st.Resyncs, most)
	}
	outageWaits := resyncWaits(t, logs.String())

	d := startRelay(t, nc, 4, seed)
	d.feed(t, nc, 100)
	awaitConverged(t, path, d)
	<-time.After(most) // READY for MaxRetryEvery at least

	// Gone again: a bad frame in its log faults the lane, which served, so
	// its pause starts over from 1 ms; without the start over it would go
	// on from the outage's last (half a second or more).
	d.r.Close()
	d.stop()
	before := len(resyncWaits(t, logs.String()))
	if err := nc.Publish(relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 4}.DeltaSubject(), []byte("junk")); err != nil {
		t.Fatalf("publish a bad frame: %v", err)
	}
	var after []time.Duration
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
		if after = resyncWaits(t, logs.String())[before:]; len(after) == 0 {
			return fmt.Errorf("lane not resynced since its relay went again")
		}
		return nil
	})
	if after[0] > first {
		t.Errorf("pause after a fault of a lane that served READY for %v: %v, want at most %v (started over; the outage's pauses were %v)",
			most, after[0], first, outageWaits)
	}
}

// A lane whose every install faults at once (its relay's log full of
// frames it cannot apply) is never READY for MaxRetryEvery, so its pause
// keeps doubling instead of fetching a snapshot every RetryEvery.
func TestConsumer_LaneFaultingRightAfterEachInstallBacksOff(t *testing.T) {
	seed := relaytest.Seed(t, 29)
	_, nc := natstest.Start(t)
	path := filepath.Join(t.TempDir(), "replica")
	const first = time.Millisecond
	logs := &syncbuf.Buffer{}
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{4}, Seed: ckf.DefaultSeed, Buckets: testFormat(t),
		Path: path, RetryEvery: first, MaxRetryEvery: time.Hour, Logger: debugLogger(logs)})
	d := startRelay(t, nc, 4, seed)
	d.feed(t, nc, 100)
	awaitConverged(t, path, d)
	// A bad frame every millisecond: whatever snapshot a subscription
	// installs, a frame it cannot apply follows at once.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		subject := relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 4}.DeltaSubject()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_ = nc.Publish(subject, []byte("junk"))
			}
		}
	}()
	const faults = 6
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
		if st := c.Status()[0]; st.Resyncs < faults || st.Snapshots < faults {
			return fmt.Errorf("lane %s: %d attempts, %d snapshots installed, want %d each", st.State, st.Resyncs, st.Snapshots, faults)
		}
		return nil
	})
	waits := resyncWaits(t, logs.String())
	// The k-th pause in a row is at least half of 2^(k-1) ms.
	if got, want := waits[faults-1], first<<(faults-1)/2; got < want {
		t.Errorf("pauses of a lane whose every install faults: %v, the %dth %v, want at least %v (backing off)", waits, faults, got, want)
	}
}

// A lane failing the same way again and again (here without backing off,
// so it fails often) warns of the 1st, 2nd, 4th, 8th… failure and logs the
// others at debug level, while its status counts every one.
func TestConsumer_RepeatedLaneFaultIsWarnedOfLogarithmically(t *testing.T) {
	_, nc := natstest.Start(t)
	logs := &syncbuf.Buffer{}
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{4}, Seed: ckf.DefaultSeed, Buckets: testFormat(t),
		Path: filepath.Join(t.TempDir(), "replica"), RetryEvery: time.Millisecond, MaxRetryEvery: time.Millisecond,
		Logger: debugLogger(logs)})
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
		if st := c.Status()[0]; st.Resyncs < 100 {
			return fmt.Errorf("lane %s after %d attempts, want 100", st.State, st.Resyncs)
		}
		return nil
	})
	var warned, logged uint64
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, `msg="lane resync"`) {
			logged++
			if strings.Contains(line, "level=WARN") {
				warned++
			}
		}
	}
	n := c.Status()[0].Resyncs // read after the logs: at least as many
	if most := uint64(bits.Len64(n)); warned == 0 || warned > most || logged < 100 || logged > n {
		t.Errorf("%d failed attempts of one kind: %d warnings and %d resync lines in all, want 1 to %d warnings (1st, 2nd, 4th…) and 100 to %d lines",
			n, warned, logged, most, n)
	}
}

// debugLogger logs at debug level into logs.
func debugLogger(logs *syncbuf.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// resyncWaits returns the pauses a lane's resync lines in logs announce,
// in order.
func resyncWaits(t *testing.T, logs string) []time.Duration {
	t.Helper()
	var waits []time.Duration
	for line := range strings.SplitSeq(logs, "\n") {
		if !strings.Contains(line, `msg="lane resync"`) {
			continue
		}
		_, after, ok := strings.Cut(line, " retry_in=")
		if !ok {
			t.Fatalf("resync line without its pause: %s", line)
		}
		field, _, _ := strings.Cut(after, " ")
		d, err := time.ParseDuration(field)
		if err != nil {
			t.Fatalf("resync line's pause %q: %v", field, err)
		}
		waits = append(waits, d)
	}
	return waits
}

// awaitConverged waits until lane 0 of the replica file at path holds d's
// words.
func awaitConverged(t *testing.T, path string, d *dcRelay) {
	t.Helper()
	relaytest.CheckFor(t, wait, 10*time.Millisecond, func() error {
		r, err := shm.Attach(path)
		if err != nil {
			return err
		}
		defer r.Close()
		return converged(r, 0, d)
	})
}
