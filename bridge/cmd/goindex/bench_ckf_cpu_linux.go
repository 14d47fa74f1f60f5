package main

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time the calling OS thread has used (user +
// system), or 0 if the kernel does not report it. The caller locks its
// goroutine to the thread around the interval it measures.
func threadCPU() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
