package dynamo

import "fmt"

// MaxBlockSize bounds the KV block size in tokens that goindex accepts.
const MaxBlockSize = 1 << 16

// LimitError reports an input over (or under) one of the package's limits.
type LimitError struct {
	What string
	Got  int
	Max  int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("dynamo: %s %d out of range [1, %d]", e.What, e.Got, e.Max)
}
