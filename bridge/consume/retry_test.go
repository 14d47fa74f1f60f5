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
// converges; a fault then resyncs from RetryEvery again, so when the relay
// is gone once more the lane's next attempts come at once.
func TestConsumer_LaneOfARelayDownBacksOffAndStartsOverOnceReady(t *testing.T) {
	seed := relaytest.Seed(t, 23)
	_, nc := natstest.Start(t)
	path := filepath.Join(t.TempDir(), "replica")
	const first = time.Millisecond
	started := time.Now()
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{4}, Seed: ckf.DefaultSeed, Buckets: testFormat(t),
		Path: path, RetryEvery: first, MaxRetryEvery: time.Hour, Logger: logOnFailure(t)})
	<-time.After(outage)
	st := c.Status()[0]
	elapsed := time.Since(started)
	if most := maxAttempts(elapsed, first); st.Resyncs == 0 || st.Resyncs > most {
		t.Errorf("lane of a relay down for %v, retrying from %v: %d attempts, want 1 to %d (backing off)", elapsed, first, st.Resyncs, most)
	}

	d := startRelay(t, nc, 4, seed)
	d.feed(t, nc, 100)
	relaytest.CheckFor(t, wait, 10*time.Millisecond, func() error {
		r, err := shm.Attach(path)
		if err != nil {
			return err
		}
		defer r.Close()
		return converged(r, 0, d)
	})

	// Gone again: a bad frame in its log faults the lane, which had been
	// READY, so its attempts start over from 1 ms. Without the start over
	// they would go on from the outage's last wait (about a second, then 2,
	// 4, 8… s: minutes for eight).
	d.r.Close()
	d.stop()
	before := c.Status()[0].Resyncs
	if err := nc.Publish(relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 4}.DeltaSubject(), []byte("junk")); err != nil {
		t.Fatalf("publish a bad frame: %v", err)
	}
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
		if st := c.Status()[0]; st.Resyncs < before+8 {
			return fmt.Errorf("lane %s: %d attempts since its relay went again, want 8 (started over from %v)", st.State, st.Resyncs-before, first)
		}
		return nil
	})
}

// A lane failing the same way again and again (here without backing off,
// so it fails often) warns of the 1st, 2nd, 4th, 8th… failure and logs the
// others at debug level, while its status counts every one.
func TestConsumer_RepeatedLaneFaultIsWarnedOfLogarithmically(t *testing.T) {
	_, nc := natstest.Start(t)
	logs := &syncbuf.Buffer{}
	c, _, _ := startConsumer(t, Config{Conn: nc, Domain: 1, DCs: []relayproto.DCID{4}, Seed: ckf.DefaultSeed, Buckets: testFormat(t),
		Path: filepath.Join(t.TempDir(), "replica"), RetryEvery: time.Millisecond, MaxRetryEvery: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
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
