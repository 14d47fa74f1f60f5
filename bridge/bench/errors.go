package bench

import "errors"

var (
	// ErrConfig marks a configuration a benchmark refuses before it runs:
	// a count out of range, a block size that does not divide a Mooncake
	// id's tokens, too many cells. A command maps it to a usage error.
	ErrConfig = errors.New("bench: bad configuration")
	// ErrCheck marks a run whose results failed their own check (an index
	// disagreeing with the engines' caches, a search below the exact depth,
	// a replica differing from its producer): its figures would not
	// measure what they claim. The report is still returned.
	ErrCheck = errors.New("benchmark check failed")
)
