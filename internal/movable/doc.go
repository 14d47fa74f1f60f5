// Package movable is test support: a loopback TCP address that outlives
// the server behind it. A Forwarder listens on one random port for the
// whole test and pipes each connection it accepts to the address it names
// at that moment, so a server restarted on a new random port keeps the
// address its clients were given (a relay restart under a consumer whose
// upstream address is fixed) without the test binding a port it released,
// which another process may have taken meanwhile.
//
// A connection lives as long as both of its ends; when the server behind
// it stops, the client sees the connection close and dials again, to the
// new target. Silence makes the open connections drop what they carry
// without closing, as a path that went dark does.
//
// # Files
//
//   - forward.go: Forwarder, New, Point, Silence, Addr.
package movable
