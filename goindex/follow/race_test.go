//go:build race

package follow

// raceEnabled: under the race detector a sync/atomic load goes through the
// race runtime (a probe load in its assembly, then the load itself in its
// C code on the system stack), where a fault on a replica truncated under
// a search cannot become the recoverable panic it is in a normal build:
// the runtime dies unwinding it.
const raceEnabled = true
