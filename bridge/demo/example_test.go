package demo_test

import (
	"context"
	"fmt"
	"os"

	"github.com/goindex/goindex/bridge/demo"
)

// ExampleRun runs a three-DC demo of the first 100 requests with the
// goindex binary and library of ./build.sh, printing its progress, and
// reads the main figures from the Summary. (Compiled, not run: it needs
// the built binary.)
func ExampleRun() {
	sum, err := demo.Run(context.Background(), demo.Config{
		Binary:    "build/goindex",
		Library:   "build/libgoindex.so",
		Trace:     "testdata/mooncake/conversation_head400.jsonl",
		Grid:      "testdata/wan/grid13_rtt_ms.csv",
		Sites:     []string{"fra", "lon", "iad"},
		Requests:  100,
		ReportDir: "build/demo-report",
		Out:       os.Stdout,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	for _, p := range sum.Policies {
		fmt.Printf("%s: %.2f req/s, TTFT p95 %.0f ms\n", p.Policy, p.ThroughputRPS, p.TTFTP95ms)
	}
}
