package zmqfeed

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// endpointForms names the endpoints checkEndpoint accepts, for its errors.
const endpointForms = "want tcp://host:port (an IPv6 host in brackets: tcp://[fd00::2]:5557, tcp://[fe80::1%eth0]:5557) or ipc://path"

// checkEndpoint accepts the endpoints a relay can connect to a publisher
// on: ipc://path, and tcp://host:port with a port of 1–65535 and a host
// that is a DNS name, an IPv4 address or an IPv6 address. An IPv6 address
// goes in brackets, with an optional zone (tcp://[fe80::1%eth0]:5557); one
// without brackets is accepted too, since libzmq reads the port after the
// last colon (tcp://fd00::2:5557). It checks the form only: a name that
// does not resolve, or a zone naming no interface, fails when libzmq
// connects, and is retried (socket.go).
func checkEndpoint(ep string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: endpoint %q: %s; %s", ErrBadConfig, ep, why, endpointForms)
	}
	if path, ok := strings.CutPrefix(ep, "ipc://"); ok {
		if path == "" {
			return bad("no path")
		}
		return nil
	}
	addr, ok := strings.CutPrefix(ep, "tcp://")
	if !ok {
		return bad("not tcp:// or ipc://")
	}
	var port string
	if rest, ok := strings.CutPrefix(addr, "["); ok {
		inner, after, ok := strings.Cut(rest, "]")
		if !ok {
			return bad("no ] after the IPv6 address")
		}
		if a, err := netip.ParseAddr(inner); err != nil || !a.Is6() {
			return bad(fmt.Sprintf("[%s] is not an IPv6 address", inner))
		}
		if port, ok = strings.CutPrefix(after, ":"); !ok {
			return bad("no :port after the address")
		}
	} else {
		i := strings.LastIndexByte(addr, ':')
		if i < 0 {
			return bad("no :port")
		}
		var host string
		host, port = addr[:i], addr[i+1:]
		switch {
		case host == "":
			return bad("no host")
		case strings.Contains(host, ":"):
			if a, err := netip.ParseAddr(host); err != nil || !a.Is6() {
				return bad(fmt.Sprintf("host %q is not an IPv6 address", host))
			}
		case !isHostname(host):
			return bad(fmt.Sprintf("host %q is not a DNS name or IP address", host))
		}
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return bad(fmt.Sprintf("port %q is not 1–65535", port))
	}
	return nil
}

// isHostname reports whether h is dot-separated labels of letters,
// digits, '-' and '_' (an IPv4 address is one too), with an optional
// final dot: no wildcard, no spaces, no empty label.
func isHostname(h string) bool {
	for label := range strings.SplitSeq(strings.TrimSuffix(h, "."), ".") {
		if label == "" || label[0] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
