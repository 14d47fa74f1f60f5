package ckf

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time of the calling OS thread (the caller locks
// its goroutine to the thread), so that a benchmark on a shared machine
// can report its rate over the time it actually ran.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
