package chaos

import "errors"

// Errors of package chaos; test with errors.Is.
var (
	// ErrConfig reports a Config Run cannot run; nothing was started.
	ErrConfig = errors.New("chaos: bad config")
	// ErrSetup reports a part of the system that did not start (a child
	// that failed to come up, the C host that did not compile).
	ErrSetup = errors.New("chaos: setup")
	// ErrViolation reports a broken promise: a process that exited on its
	// own, a request that failed while a DC was reachable, a system that
	// did not converge back to the producers' state. The Report lists
	// each.
	ErrViolation = errors.New("chaos: violation")
)
