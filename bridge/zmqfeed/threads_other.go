//go:build !linux

package zmqfeed

// processPublisherBudget is publisherBudget with Go's thread limit alone:
// no other limit is read outside Linux.
func processPublisherBudget() (int, string) { return publisherBudget(0, "", "") }
