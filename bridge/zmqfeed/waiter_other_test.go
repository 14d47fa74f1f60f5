//go:build !linux || zmqpoll

package zmqfeed

// waitsInThePoller says a socket's wait holds a thread.
const waitsInThePoller = false
