package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goindex/goindex/internal/backoff"
)

// A retry loop: wait Next after each failure, Reset after a success.
func Example() {
	ctx := context.Background()
	b := backoff.Backoff{First: time.Millisecond, Max: 8 * time.Millisecond,
		Jitter: func(d time.Duration) time.Duration { return d }} // no jitter, for the output
	attempts := 0
	connect := func() error {
		if attempts++; attempts < 6 {
			return errors.New("connection refused")
		}
		return nil
	}
	for {
		err := connect()
		if err == nil {
			b.Reset()
			break
		}
		wait := b.Next()
		fmt.Println("attempt", attempts, "failed; next in", wait)
		if !backoff.Sleep(ctx, wait) {
			return
		}
	}
	fmt.Println("connected after", attempts, "attempts")
	// Output:
	// attempt 1 failed; next in 1ms
	// attempt 2 failed; next in 2ms
	// attempt 3 failed; next in 4ms
	// attempt 4 failed; next in 8ms
	// attempt 5 failed; next in 8ms
	// connected after 6 attempts
}
