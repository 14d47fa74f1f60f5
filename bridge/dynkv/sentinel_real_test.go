package dynkv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// redisServerBin is Debian's redis-server, which build.sh installs: the
// real counterpart dynkv's Valkey-compatible replies are checked against.
const redisServerBin = "/usr/bin/redis-server"

// startRedis runs redis-server with args (plus the configuration file
// conf, written to the test's directory, when not empty) and waits until
// it answers at addr.
func startRedis(t *testing.T, addr, conf string, args ...string) {
	t.Helper()
	_, err := os.Stat(redisServerBin)
	require.NoError(t, err, "redis-server is a build.sh package (Debian's redis-server)")
	dir := t.TempDir()
	if conf != "" {
		path := filepath.Join(dir, "redis.conf")
		require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
		args = append([]string{path}, args...)
	}
	cmd := exec.Command(redisServerBin, append(args, "--dir", dir, "--save", "", "--appendonly", "no")...)
	require.NoError(t, cmd.Start(), "start %s", redisServerBin)
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	network := "tcp"
	if filepath.IsAbs(addr) {
		network = "unix"
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial(network, addr); err == nil {
			c.Close()
			return
		}
		require.False(t, time.Now().After(deadline), "%s %v not listening at %s after 10 s", redisServerBin, args, addr)
	}
}

// startSentinels runs Debian's redis-server as a primary and as a
// Sentinel monitoring it under name (quorum 1, no replicas: as dynkv
// presents itself), and dynkv with the same primary name; it returns the
// real Sentinel's address and dynkv's.
func startSentinels(t *testing.T, name string) (realAddr, ours string) {
	t.Helper()
	primary, sentinelPort := freePort(t), freePort(t)
	startRedis(t, fmt.Sprintf("127.0.0.1:%d", primary), "", "--port", strconv.Itoa(primary), "--bind", "127.0.0.1")
	realAddr = fmt.Sprintf("127.0.0.1:%d", sentinelPort)
	startRedis(t, realAddr, fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel monitor %s 127.0.0.1 %d 1\n", sentinelPort, name, primary), "--sentinel")
	return realAddr, startServer(t, Config{SentinelMaster: name}).Addr().String()
}

// freePort returns a loopback TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// respNode is one RESP2 reply: its type byte, its text (status, error,
// integer, bulk), its items (array), or null.
type respNode struct {
	kind  byte
	text  string
	items []respNode
	null  bool
}

// readResp reads one RESP2 reply.
func readResp(r *bufio.Reader) (respNode, error) {
	line, err := r.ReadString('\n')
	if err != nil || len(line) < 3 {
		return respNode{}, fmt.Errorf("reply line %q: %v", line, err)
	}
	n := respNode{kind: line[0], text: strings.TrimSuffix(line[1:], "\r\n")}
	switch n.kind {
	case '+', '-', ':':
		return n, nil
	case '$', '*':
		size, err := strconv.Atoi(n.text)
		if err != nil {
			return respNode{}, fmt.Errorf("length %q: %v", n.text, err)
		}
		n.text = ""
		if size < 0 {
			n.null = true
			return n, nil
		}
		if n.kind == '$' {
			b := make([]byte, size+2)
			if _, err := io.ReadFull(r, b); err != nil {
				return respNode{}, err
			}
			n.text = string(b[:size])
			return n, nil
		}
		for range size {
			item, err := readResp(r)
			if err != nil {
				return respNode{}, err
			}
			n.items = append(n.items, item)
		}
		return n, nil
	}
	return respNode{}, fmt.Errorf("reply type %q", n.kind)
}

// sentinelVolatile are the fields of a primary's SENTINEL MASTER entry
// whose values differ between two Sentinels by nature (addresses, run
// ids, times); their values are compared by type only.
var sentinelVolatile = map[string]bool{"ip": true, "port": true, "runid": true, "link-pending-commands": true, "last-ping-sent": true, "last-ok-ping-reply": true,
	"last-ping-reply": true, "info-refresh": true, "role-reported-time": true}

// shape prints a reply with the values that differ by nature blanked:
// every bulk string when all is set, else those following a volatile
// field's name in an array.
func (n respNode) shape(all bool) string {
	switch {
	case n.null:
		return string(n.kind) + "null"
	case n.kind == '$' && all:
		return "$<value>"
	case n.kind != '*':
		return string(n.kind) + n.text
	}
	parts := make([]string, len(n.items))
	for i, it := range n.items {
		blank := all || (i > 0 && n.items[i-1].kind == '$' && sentinelVolatile[n.items[i-1].text] && i%2 == 1)
		parts[i] = it.shape(blank)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// TestSentinel_RepliesMatchARealSentinel asks Debian's redis-server
// running as a Sentinel that monitors one primary with no replicas (as
// dynkv presents itself) and dynkv started with the same primary name the
// same SENTINEL queries, and compares the replies: types, lengths, field
// names and order, errors and fixed values byte for byte; addresses, run
// ids and times by type only.
func TestSentinel_RepliesMatchARealSentinel(t *testing.T) {
	const name = "mymaster"
	realAddr, ours := startSentinels(t, name)

	queries := []struct {
		args []string
		all  bool // every bulk value differs by nature
	}{
		{[]string{"SENTINEL", "MASTERS"}, false},
		{[]string{"SENTINEL", "MASTER", name}, false},
		{[]string{"SENTINEL", "MASTER", "nosuch"}, false},
		{[]string{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", name}, true},
		{[]string{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "nosuch"}, false},
		{[]string{"SENTINEL", "REPLICAS", name}, false},
		{[]string{"SENTINEL", "SLAVES", name}, false},
		{[]string{"SENTINEL", "SENTINELS", name}, false},
		{[]string{"SENTINEL", "REPLICAS", "nosuch"}, false},
		{[]string{"SENTINEL", "CKQUORUM", name}, false},
		{[]string{"SENTINEL", "CKQUORUM", "nosuch"}, false},
		{[]string{"SENTINEL", "MYID"}, true},
		{[]string{"SENTINEL", "MYID", "x"}, false},
		{[]string{"SENTINEL", "BOGUS"}, false},
		{[]string{"SENTINEL"}, false},
		{[]string{"SENTINEL", "MASTER"}, false},
		{[]string{"SENTINEL", "MASTERS", "x"}, false},
		{[]string{"SENTINEL", "GET-MASTER-ADDR-BY-NAME"}, false},
		{[]string{"sentinel", "masters"}, false},
		{[]string{"PING"}, false},
	}
	ask := func(addr string, args []string) respNode {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err, "dial %s", addr)
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = conn.Write([]byte(respCommand(args...)))
		require.NoError(t, err)
		n, err := readResp(bufio.NewReader(conn))
		require.NoError(t, err, "%s's reply to %q", addr, args)
		return n
	}
	// The real Sentinel reports the primary's flags once it reached it.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if strings.Contains(ask(realAddr, []string{"SENTINEL", "MASTER", name}).shape(false), "$flags $master ") {
			break
		}
		require.False(t, time.Now().After(deadline), "the real Sentinel never saw its primary up")
	}
	for _, q := range queries {
		want, got := ask(realAddr, q.args).shape(q.all), ask(ours, q.args).shape(q.all)
		if got != want {
			t.Errorf("%q:\n dynkv     %s\n Sentinel  %s", q.args, got, want)
		}
	}
}

// TestSentinel_SubscriptionsMatchARealSentinel plays one connection's
// subscriptions to Sentinel's event channels (as clients that follow
// failovers make them) on Debian's redis-server running as a Sentinel and
// on dynkv, reply by reply: confirmations and their counts, PING's reply
// while subscribed, the refusal of other commands, the way back out.
// Nothing is published on either (no failover happens).
func TestSentinel_SubscriptionsMatchARealSentinel(t *testing.T) {
	const name = "mymaster"
	realAddr, ours := startSentinels(t, name)

	session := []struct {
		args    []string
		replies int
	}{
		{[]string{"UNSUBSCRIBE"}, 1},
		{[]string{"PUNSUBSCRIBE"}, 1},
		{[]string{"SUBSCRIBE", "+switch-master", "+sdown"}, 2},
		{[]string{"PING"}, 1},
		{[]string{"PING", "hi"}, 1},
		{[]string{"SENTINEL", "MYID"}, 1},
		{[]string{"PSUBSCRIBE", "*"}, 1},
		{[]string{"SUBSCRIBE", "+sdown"}, 1},
		{[]string{"UNSUBSCRIBE", "+sdown", "nosuch"}, 2},
		{[]string{"UNSUBSCRIBE"}, 1},
		{[]string{"PING"}, 1},
		{[]string{"PUNSUBSCRIBE"}, 1},
		{[]string{"PING"}, 1},
		{[]string{"SUBSCRIBE"}, 1},
		{[]string{"SENTINEL", "MYID", "x"}, 1},
	}
	play := func(addr string) []string {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err, "dial %s", addr)
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(conn)
		var out []string
		for _, step := range session {
			_, err := conn.Write([]byte(respCommand(step.args...)))
			require.NoError(t, err)
			for range step.replies {
				n, err := readResp(r)
				require.NoError(t, err, "%s's reply to %q", addr, step.args)
				out = append(out, fmt.Sprintf("%q -> %s", step.args, n.shape(false)))
			}
		}
		return out
	}
	want, got := play(realAddr), play(ours)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("reply %d:\n dynkv     %s\n Sentinel  %s", i, got[i], want[i])
		}
	}
}
