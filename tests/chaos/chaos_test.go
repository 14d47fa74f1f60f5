package chaos

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/chaos"
)

// logWriter sends the run's progress lines to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestChaos_EveryDefaultFaultKeepsEveryPromise(t *testing.T) {
	build := os.Getenv("GOINDEX_BUILD")
	if build == "" {
		t.Skip("no build: ./build.sh test builds goindex, nats-server and libgoindex.so into $GOINDEX_BUILD")
	}
	if testing.Short() {
		t.Skip("the chaos suite runs in the plain pass of ./build.sh test, not under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a hang guard
	defer cancel()
	cfg := chaos.Config{Build: build, Root: "../..", Progress: logWriter{t}}
	rep, err := chaos.Run(ctx, cfg)
	if rep == nil {
		t.Fatalf("chaos.Run: %v", err)
	}
	var b strings.Builder
	rep.Table(&b)
	t.Log("\n" + b.String())
	if err != nil {
		t.Fatalf("chaos.Run: %v", err)
	}
	faults := chaos.DefaultKinds()
	if len(rep.Rows) != 1+len(faults) {
		t.Fatalf("report has %d rows, want the warm-up and %d faults", len(rep.Rows), len(faults))
	}
	for i, k := range faults {
		row := rep.Rows[1+i]
		if row.Fault != k.String() || row.Injected != 1 || len(row.Recoveries) != 1 {
			t.Errorf("row %d = %s injected %d, %d recoveries; want %v injected once and recovered", 1+i, row.Fault, row.Injected, len(row.Recoveries), k)
		}
		if row.Served == 0 {
			t.Errorf("%s: no request served from the fault to its recovery: traffic did not flow through it", row.Fault)
		}
		if row.Failed != 0 {
			t.Errorf("%s: %d requests failed while the router was up", row.Fault, row.Failed)
		}
	}
	// Held down past the router's staleness bound, these leave no DC with
	// fresh signals: the router must have routed degraded, not refused.
	for _, row := range rep.Rows {
		if (row.Fault == chaos.KillConsumer.String() || row.Fault == chaos.KillHubNATS.String()) && row.Degraded == 0 {
			t.Errorf("%s: no request was routed degraded (X-Goindex-Degraded) with the consumer's signals gone", row.Fault)
		}
	}
	if rep.HostProbes == 0 || rep.Events == 0 {
		t.Errorf("the C host probed %d times and the DCs published %d events; want both busy", rep.HostProbes, rep.Events)
	}
}
