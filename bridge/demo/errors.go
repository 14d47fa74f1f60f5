package demo

import (
	"errors"
	"fmt"
)

// ErrConfig reports a Config that cannot run: a missing binary, trace or
// grid, an unknown site, or a value out of range. Run checks it before it
// starts anything.
var ErrConfig = errors.New("demo: invalid config")

// ErrCheck reports a check of the running system that failed: a child
// process that died or never became ready, a request that failed, a replica
// that did not converge, a count that did not add up.
var ErrCheck = errors.New("demo: check failed")

// ErrSkipped reports a stage that could not run in this environment (no
// host client, or a library without the feature); Run records it in the
// Summary and goes on.
var ErrSkipped = errors.New("demo: stage skipped")

// StageError names the stage that failed and wraps why (ErrCheck, a
// child's exit, the context's cancellation cause).
type StageError struct {
	Stage string
	Err   error
}

func (e *StageError) Error() string { return fmt.Sprintf("demo: stage %s: %v", e.Stage, e.Err) }

// Unwrap returns the cause.
func (e *StageError) Unwrap() error { return e.Err }

// checkf returns an ErrCheck with a message.
func checkf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCheck, fmt.Sprintf(format, args...))
}
