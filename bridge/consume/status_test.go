package consume

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay/relaytest"
)

// Supervise reports the lanes' status while the consumer runs and returns
// once its context ends; WriteStatus and LogStatus give a line per lane.
func TestSupervise_ReportsTheLanesWhileRunning(t *testing.T) {
	_, nc := natstest.Start(t)
	startRelay(t, nc, 5, relaytest.Seed(t, 3))
	path := filepath.Join(t.TempDir(), "replica")
	nctx, cancelNew := context.WithTimeout(context.Background(), wait)
	defer cancelNew()
	c, err := New(nctx, Config{Conn: nc, Domain: 1, Path: path, DiscoverFor: 300 * time.Millisecond, PingEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var seen [][]LaneStatus
	done := make(chan error, 1)
	go func() {
		done <- c.Supervise(ctx, 5*time.Millisecond, func(st []LaneStatus) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, st)
		})
	}()
	relaytest.CheckFor(t, wait, 5*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) < 2 || len(seen[len(seen)-1]) != 1 || seen[len(seen)-1][0].DC != 5 {
			return fmt.Errorf("%d reports, the last %+v; want 2 of lane dc 5", len(seen), seen)
		}
		return nil
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Supervise after its context ended = %v, want nil", err)
		}
	case <-time.After(wait):
		t.Fatalf("Supervise did not return after its context ended")
	}
	var text bytes.Buffer
	if err := WriteStatus(&text, path, c.Status()); err != nil || !strings.HasPrefix(text.String(), "replica "+path+"\nlane 0 dc 5: ") {
		t.Errorf("WriteStatus = %q, %v; want the path, then lane 0 of dc 5", text.String(), err)
	}
	var logged bytes.Buffer
	LogStatus(slog.New(slog.NewTextHandler(&logged, nil)), 1, c.Status())
	if !strings.Contains(logged.String(), "msg=\"lane status\" lane=0") || strings.Count(logged.String(), "\n") != 1 {
		t.Errorf("LogStatus logged %q, want one lane status line", logged.String())
	}
}
