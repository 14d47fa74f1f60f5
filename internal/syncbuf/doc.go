// Package syncbuf is a bytes.Buffer that one goroutine may write while
// another reads it: the stdout and stderr a test hands a command or a
// server running in the background, and polls for a line. It imports
// nothing of ours.
//
// # Files
//
//   - syncbuf.go: Buffer.
package syncbuf
