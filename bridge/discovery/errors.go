package discovery

import (
	"errors"
	"fmt"
	"time"
)

// Errors of package discovery; test with errors.Is.
var (
	// ErrBadConfig reports an invalid EtcdConfig or KubeConfig.
	ErrBadConfig = errors.New("discovery: bad config")
	// ErrBadRecord reports a discovery record that does not decode (it is
	// skipped and logged, never fatal).
	ErrBadRecord = errors.New("discovery: bad record")
	// ErrNotChannel reports a record that is not an EventChannel.
	ErrNotChannel = errors.New("discovery: not an event channel")
	// errOtherScope reports a record of another pool's scope (skipped
	// silently).
	errOtherScope = errors.New("discovery: another scope's record")
)

// HealthError says why a Source is not ready (Source.Health): it has not
// listed yet (Listed false, Err nil or the failure so far), or its latest
// request to its backend (a list, or the periodic check while watching)
// failed with Err, failing since Since.
type HealthError struct {
	Source string
	Listed bool
	Since  time.Time
	Err    error
}

func (e *HealthError) Error() string {
	switch {
	case e.Err == nil:
		return "discovery " + e.Source + ": not listed yet"
	case !e.Listed:
		return fmt.Sprintf("discovery %s: not listed yet, failing since %s: %v", e.Source, e.Since.UTC().Format(time.RFC3339), e.Err)
	}
	return fmt.Sprintf("discovery %s: failing since %s: %v", e.Source, e.Since.UTC().Format(time.RFC3339), e.Err)
}

// Unwrap returns the failure.
func (e *HealthError) Unwrap() error { return e.Err }
