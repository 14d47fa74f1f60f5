//go:build linux && !zmqpoll

package zmqfeed

// waitsInThePoller says a socket's wait holds no thread.
const waitsInThePoller = true
