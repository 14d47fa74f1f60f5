package selector

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/tests/c/fixture"
)

// writeReplica writes fixture.WriteRatesReplica's file at path.
func writeReplica(t *testing.T, path string, ready bool, recv time.Time) {
	t.Helper()
	if err := fixture.WriteRatesReplica(path, ready, recv); err != nil {
		t.Fatalf("WriteRatesReplica(%s): %v", path, err)
	}
}

func TestReplica_RatesOfAFreshReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.replica")
	writeReplica(t, path, true, time.Now())
	r := NewReplica(path, 3, time.Minute, nil)
	defer r.Close()
	got, err := r.DCRates()
	want := DCRates{PrefillTokensPerMs: 10, QueueTokensPerMs: 40, DecodeBlocksPerMs: 4, LiveWorkers: 2}
	if err != nil || got != want {
		t.Errorf("DCRates(dc 3) = %+v, %v; want %+v, nil", got, err, want)
	}
}

// Every verdict of the engine's replica follower is ErrReplicaUnusable
// with follow's reason and the detail: a replica missing, damaged (not a
// replica file) or whose consumer stopped beating, a DC without a lane or
// with a lane not ready, a DC whose load report is stale.
func TestReplica_EveryVerdictIsUnusableWithItsReason(t *testing.T) {
	dir := t.TempDir()
	fresh, notReady, stale, garbage := filepath.Join(dir, "fresh"), filepath.Join(dir, "not-ready"), filepath.Join(dir, "stale"), filepath.Join(dir, "garbage")
	writeReplica(t, fresh, true, time.Now())
	writeReplica(t, notReady, false, time.Now())
	writeReplica(t, stale, true, time.Now().Add(-time.Hour))
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not a replica "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path string
		dc         uint64
		detail     string
		later      time.Duration // the clock runs this far ahead
	}{
		{"missing file", filepath.Join(dir, "absent"), 3, "replica-missing: follow: no replica", 0},
		{"not a replica file", garbage, 3, "replica-damaged", 0},
		{"consumer stopped beating", fresh, 3, "consumer-stale", time.Hour},
		{"dc not in the replica", fresh, 4, "dc 4 has no lane", 0},
		{"lane not ready", notReady, 3, "not ready", 0},
		{"load report an hour old", stale, 3, "signals-stale: dc 3's load report is 1h0m", 0},
	} {
		r := NewReplica(c.path, c.dc, 10*time.Minute, func() time.Time { return time.Now().Add(c.later) })
		for range 2 { // the second call is answered by the follower's memory
			if got, err := r.DCRates(); !errors.Is(err, ErrReplicaUnusable) || !strings.Contains(err.Error(), c.detail) {
				t.Errorf("%s: DCRates = %+v, %v; want ErrReplicaUnusable mentioning %q", c.name, got, err, c.detail)
			}
		}
		r.Close()
	}
}

// Open makes the config's replica the Source: its rates decide, and Close
// leaves it unusable.
func TestOpen_TheConfigsReplicaIsTheSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.replica")
	writeReplica(t, path, true, time.Now())
	dc := uint64(3)
	s, err := Open(Config{Replica: path, DC: &dc, MaxStalenessMs: 600000})
	if err != nil {
		t.Fatalf("Open(replica %s): %v", path, err)
	}
	if got, err := s.src.DCRates(); err != nil || got.PrefillTokensPerMs != 10 {
		t.Errorf("Open's source DCRates = %+v, %v; want the replica's prefill rate 10", got, err)
	}
	s.Close()
	if _, err := s.src.DCRates(); !errors.Is(err, ErrReplicaUnusable) {
		t.Errorf("DCRates after Close = %v, want ErrReplicaUnusable", err)
	}
	if s, err := Open(Config{}); err != nil || s.src != nil {
		t.Errorf("Open(no replica) = source %v, %v; want none, nil", s.src, err)
	} else {
		s.Close()
	}
	if _, err := Open(Config{Replica: "relative"}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("Open(relative replica) = %v, want ErrBadConfig", err)
	}
}
