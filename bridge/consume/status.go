package consume

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/goindex/relayproto"
)

// Supervise runs c until ctx ends (Run) and every statusEvery (0: never)
// passes its lanes' status to each (nil: none). It returns Run's error.
func (c *Consumer) Supervise(ctx context.Context, statusEvery time.Duration, each func([]LaneStatus)) error {
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var tick <-chan time.Time
	if statusEvery > 0 {
		t := time.NewTicker(statusEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case err := <-done:
			return err
		case <-tick:
			if each != nil {
				each(c.Status())
			}
		}
	}
}

// LogStatus logs a line per lane of lanes (of domain) at info level.
func LogStatus(log *slog.Logger, domain relayproto.DomainID, lanes []LaneStatus) {
	for _, st := range lanes {
		log.Info("lane status", "lane", st.Lane, relay.PoolLogKey, relay.PoolLogValue(domain, relayproto.DCID(st.DC)),
			"lease", st.Epoch, "incarnation", st.Incarnation, "state", st.State, "installed", st.Installed,
			"lag", st.Lag, "rtt", st.RTT, "snapshots", st.Snapshots, "faults", st.Faults, "resyncs", st.Resyncs)
	}
}

// WriteStatus writes the replica file's path, then a line per lane.
func WriteStatus(w io.Writer, path string, lanes []LaneStatus) error {
	if _, err := fmt.Fprintf(w, "replica %s\n", path); err != nil {
		return err
	}
	for _, st := range lanes {
		if _, err := fmt.Fprintf(w, "lane %d dc %d: %s, installed %d (lag %d), rtt %v, %d snapshots, %d deltas, %d faults, %d resyncs\n",
			st.Lane, st.DC, st.State, st.Installed, st.Lag, st.RTT, st.Snapshots, st.Deltas, st.Faults, st.Resyncs); err != nil {
			return err
		}
	}
	return nil
}
