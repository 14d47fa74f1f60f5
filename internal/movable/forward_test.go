package movable

import (
	"bufio"
	"net"
	"testing"
)

// echo serves one line back, prefixed by name, to every connection.
func echo(t *testing.T, name string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					_, _ = c.Write([]byte(name + ":" + line))
				}
			}()
		}
	}()
	return ln
}

func ask(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	got, _ := bufio.NewReader(c).ReadString('\n')
	return got
}

// Connections go to the target named when they are accepted: a server
// stopped and replaced by one on another port keeps the forwarder's
// address.
func TestForwarder_ConnectionsFollowThePoint(t *testing.T) {
	a := echo(t, "a")
	f := New(t, a.Addr().String())
	if got := ask(t, f.Addr()); got != "a:hi\n" {
		t.Errorf("ask via the forwarder = %q, want a:hi", got)
	}
	_ = a.Close()
	b := echo(t, "b")
	defer b.Close()
	f.Point(b.Addr().String())
	if got := ask(t, f.Addr()); got != "b:hi\n" {
		t.Errorf("ask after Point = %q, want b:hi", got)
	}
}
