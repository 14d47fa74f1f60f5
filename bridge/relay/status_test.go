package relay

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
)

// Supervise reports the pools' status while the relay runs and returns it
// once Run has returned; WriteStatus and LogStatus give a line per pool.
func TestSupervise_ReportsWhileRunningAndReturnsTheFinalStatus(t *testing.T) {
	_, nc := natstest.Start(t)
	r, err := New(testConfig(nc))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	reports := 0
	type result struct {
		st  []PoolStatus
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := r.Supervise(ctx, 5*time.Millisecond, func(st []PoolStatus) {
			mu.Lock()
			defer mu.Unlock()
			if len(st) == 1 {
				reports++
			}
		})
		done <- result{st, err}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := reports
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Supervise reported %d statuses of one pool in 30 s, want 2", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	var res result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("Supervise did not return after its context ended")
	}
	if res.err != nil || len(res.st) != 1 || res.st[0].DC != 3 || res.st[0].Domain != 1 {
		t.Fatalf("Supervise = %+v, %v; want the status of pool 1/3", res.st, res.err)
	}
	var text bytes.Buffer
	if err := WriteStatus(&text, res.st); err != nil || !strings.HasPrefix(text.String(), "pool 1/3 incarnation ") || strings.Count(text.String(), "\n") != 1 {
		t.Errorf("WriteStatus = %q, %v; want one line for pool 1/3", text.String(), err)
	}
	var logged bytes.Buffer
	LogStatus(slog.New(slog.NewTextHandler(&logged, nil)), res.st)
	if !strings.Contains(logged.String(), "msg=\"relay status\"") || strings.Count(logged.String(), "\n") != 1 {
		t.Errorf("LogStatus logged %q, want one relay status line", logged.String())
	}
}
