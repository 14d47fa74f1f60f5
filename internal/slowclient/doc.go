// Package slowclient plays hostile HTTP/1.1 clients against a server and
// counts what the server holds for them: the tests of every listener
// goindex runs (route, the metrics endpoint) and the chaos suite use it to
// prove that a client which stops half-way through its request costs a
// connection only until the server's deadline.
//
// A Stall is what one client sends before it goes silent: part of the
// headers, the headers and part of a declared body, or part of a chunked
// body. Open dials n such clients; Flood.AwaitReleased polls until the
// server has closed every one of them. Count wraps a listener so a test
// knows how many accepted connections the server still holds; FDs counts
// a process's open file descriptors from /proc (Linux), for a server in
// another process.
//
// Nothing here decides pass or fail by timing: callers poll with generous
// bounds.
//
// # Files
//
//   - stall.go: Stall, the request prefixes, Open, Flood.
//   - count.go: Count (a counting listener), FDs.
package slowclient
