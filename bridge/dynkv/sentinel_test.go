package dynkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestSentinel_AClientConfiguredForSentinelReachesTheIndex points
// go-redis's Sentinel-backed client (which asks GET-MASTER-ADDR-BY-NAME,
// then connects to the address and checks its ROLE) at a server started
// with a Sentinel name: its DYNKV commands reach the index and get the
// module's replies.
func TestSentinel_AClientConfiguredForSentinelReachesTheIndex(t *testing.T) {
	s := startServer(t, Config{SentinelMaster: "dynkv-primary"})
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "dynkv-primary", SentinelAddrs: []string{s.Addr().String()},
		Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	got, err := c.Do(ctx, "DYNKV.APPLY", testKey, mustHex(t, goldenStore)).Result()
	require.NoError(t, err, "APPLY through the Sentinel-backed client")
	require.Equal(t, "OK", got, "APPLY reply")
	reply, err := c.Do(ctx, "DYNKV.MATCH", testKey, mustHex(t, goldenMatchReq)).Text()
	require.NoError(t, err, "MATCH through the Sentinel-backed client")
	require.Equal(t, goldenMatchReply, fmt.Sprintf("%x", reply), "MATCH reply")
	// The same server, seen directly, holds what the client stored.
	stats, err := client(t, s).Do(ctx, "DYNKV.STATS", testKey).Int64Slice()
	require.NoError(t, err, "STATS directly")
	require.NotZero(t, stats[0], "blocks stored through the Sentinel-backed client, seen directly")
}

// TestSentinel_RepliesAsASentinelMonitoringItself checks each query
// against what Sentinel answers for a primary with no replicas and no other
// Sentinels, as go-redis's SentinelClient parses them.
func TestSentinel_RepliesAsASentinelMonitoringItself(t *testing.T) {
	s := startServer(t, Config{SentinelMaster: "dynkv-primary"})
	addr := s.Addr().String()
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { sc.Close() })
	ctx := context.Background()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)

	got, err := sc.GetMasterAddrByName(ctx, "dynkv-primary").Result()
	require.NoError(t, err, "GET-MASTER-ADDR-BY-NAME")
	require.Equal(t, []string{host, port}, got, "the primary is the address the client reached")
	_, err = sc.GetMasterAddrByName(ctx, "another").Result()
	require.True(t, errors.Is(err, redis.Nil), "GET-MASTER-ADDR-BY-NAME of a name not monitored: %v, want a null reply", err)

	state, err := sc.Master(ctx, "dynkv-primary").Result()
	require.NoError(t, err, "SENTINEL MASTER")
	require.Equal(t, "dynkv-primary", state["name"])
	require.Equal(t, host, state["ip"])
	require.Equal(t, port, state["port"])
	require.Equal(t, "master", state["flags"], "up: neither s_down nor o_down")
	require.Equal(t, "0", state["num-other-sentinels"])
	require.Equal(t, "0", state["num-slaves"])
	require.Len(t, state["runid"], 40)
	for _, f := range []string{"down-after-milliseconds", "role-reported-time", "quorum", "failover-timeout", "config-epoch"} {
		_, err := strconv.ParseInt(state[f], 10, 64)
		require.NoError(t, err, "%s = %q, want an integer", f, state[f])
	}
	masters, err := sc.Masters(ctx).Result()
	require.NoError(t, err, "SENTINEL MASTERS")
	require.Len(t, masters, 1, "SENTINEL MASTERS lists the one primary")

	replicas, err := sc.Replicas(ctx, "dynkv-primary").Result()
	require.NoError(t, err, "SENTINEL REPLICAS")
	require.Empty(t, replicas)
	sentinels, err := sc.Sentinels(ctx, "dynkv-primary").Result()
	require.NoError(t, err, "SENTINEL SENTINELS")
	require.Empty(t, sentinels)
	ok, err := sc.CkQuorum(ctx, "dynkv-primary").Result()
	require.NoError(t, err, "SENTINEL CKQUORUM")
	require.Contains(t, ok, "OK")
	raw := client(t, s)
	id, err := raw.Do(ctx, "SENTINEL", "MYID").Text()
	require.NoError(t, err, "SENTINEL MYID")
	require.Equal(t, state["runid"], id, "MYID is the run id")

	for _, q := range [][]any{{"SENTINEL", "MASTER", "another"}, {"SENTINEL", "REPLICAS", "another"}, {"SENTINEL", "CKQUORUM", "another"}} {
		err := raw.Do(ctx, q...).Err()
		require.EqualError(t, err, "ERR No such master with that name", "%v", q)
	}
	require.ErrorContains(t, raw.Do(ctx, "SENTINEL", "FAILOVER", "dynkv-primary").Err(), "unknown subcommand")
	require.ErrorContains(t, raw.Do(ctx, "SENTINEL").Err(), "wrong number of arguments")
	require.ErrorContains(t, raw.Do(ctx, "SENTINEL", "MASTER").Err(), "wrong number of arguments")
}

// TestSentinel_AnnouncedAddressAndRefusals: --sentinel-announce replaces
// the address reported; a server without a Sentinel name refuses SENTINEL
// with the flag to set; a password applies to SENTINEL as to every
// command; an announce address that is not host:port is refused at start.
func TestSentinel_AnnouncedAddressAndRefusals(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, Config{SentinelMaster: "m", SentinelAnnounce: "dynkv.example:6380"})
	got, err := client(t, s).Do(ctx, "SENTINEL", "GET-PRIMARY-ADDR-BY-NAME", "m").StringSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"dynkv.example", "6380"}, got, "the announced address")

	plain := startServer(t, Config{})
	require.ErrorContains(t, client(t, plain).Do(ctx, "SENTINEL", "MASTERS").Err(), "--sentinel-master")

	locked := startServer(t, Config{SentinelMaster: "m", Password: "pw"})
	require.ErrorContains(t, client(t, locked).Do(ctx, "SENTINEL", "MASTERS").Err(), "NOAUTH")

	for _, bad := range []string{"dynkv.example", "dynkv.example:0", "dynkv.example:http", "h:70000"} {
		_, err := NewServer(Config{Addr: "127.0.0.1:0", SentinelMaster: "m", SentinelAnnounce: bad})
		require.ErrorIs(t, err, ErrBadAnnounce, "announce %q", bad)
	}
}

// TestSentinel_SubscriptionsAreBoundedAndSentinelOnly subscribes one
// connection past maxSubscriptions: the channels past it are refused one
// by one and the count stays at the bound. A server not started as a
// Sentinel does not know SUBSCRIBE.
func TestSentinel_SubscriptionsAreBoundedAndSentinelOnly(t *testing.T) {
	s := startServer(t, Config{SentinelMaster: "m"})
	args := []string{"SUBSCRIBE"}
	for i := range maxSubscriptions + 2 {
		args = append(args, "ch"+strconv.Itoa(i%(maxSubscriptions+1)))
	}
	// Channels 0 … max-1 subscribe, channel max is refused, channel 0
	// again is already subscribed: the count stays at the bound.
	var want strings.Builder
	for i := range maxSubscriptions {
		ch := "ch" + strconv.Itoa(i)
		fmt.Fprintf(&want, "*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:%d\r\n", len(ch), ch, i+1)
	}
	fmt.Fprintf(&want, "-ERR goindex dynkv: at most %d subscriptions a connection\r\n", maxSubscriptions)
	fmt.Fprintf(&want, "*3\r\n$9\r\nsubscribe\r\n$3\r\nch0\r\n:%d\r\n", maxSubscriptions)
	if got := exchangeRaw(t, s.Addr().String(), respCommand(args...), want.Len()); got != want.String() {
		t.Errorf("subscribing past the bound: replies differ from the %d confirmations, one refusal and a repeat", maxSubscriptions)
	}
	plain := startServer(t, Config{}).Addr().String()
	const unknown = "-ERR unknown command 'SUBSCRIBE', with args beginning with: 'x' \r\n"
	if got := exchangeRaw(t, plain, respCommand("SUBSCRIBE", "x"), len(unknown)); got != unknown {
		t.Errorf("SUBSCRIBE to a server that is no Sentinel = %q, want %q", got, unknown)
	}
}

// FuzzSentinelCommands runs a session of commands (one a line, its
// arguments split at NUL bytes) on a fresh connection of a server started
// as a Sentinel: nothing panics, the connection's subscriptions stay
// within maxSubscriptions, and while it is subscribed every command but
// the subscription commands, PING, RESET and those of the handshake is
// refused.
func FuzzSentinelCommands(f *testing.F) {
	s, err := NewServer(Config{Addr: "127.0.0.1:0", SentinelMaster: "m"})
	if err != nil {
		f.Fatalf("NewServer: %v", err)
	}
	f.Cleanup(func() { s.Close() })
	for _, seed := range []string{"SUBSCRIBE\x00a\x00b\nPING\x00hi\nGET\x00k\nUNSUBSCRIBE\nPING", "PSUBSCRIBE\x00*\nSENTINEL\x00MYID\nPUNSUBSCRIBE\x00x",
		"SENTINEL\x00MASTERS\nSENTINEL\x00GET-MASTER-ADDR-BY-NAME\x00m\nSENTINEL\x00MYID\x00x", "SUBSCRIBE\x00a\nRESET\nSUBSCRIBE"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st := &connState{authed: true, local: "127.0.0.1:6379"}
		for _, line := range bytes.SplitN(b, []byte{'\n'}, 32) {
			if len(line) == 0 {
				continue
			}
			args := bytes.SplitN(line, []byte{0}, 16)
			name := strings.ToUpper(string(args[0]))
			switch name {
			case "SHUTDOWN", "SAVE", "BGSAVE", "BGREWRITEAOF", "FLUSHALL", "FLUSHDB", "DEL", "UNLINK":
				continue // not on the shared server's data
			}
			subscribed := st.sub.count() > 0
			r, _ := s.exec(st, args)
			if n := st.sub.count(); n > maxSubscriptions {
				t.Fatalf("%q left %d subscriptions, bound %d", args, n, maxSubscriptions)
			}
			switch name {
			case "SUBSCRIBE", "PSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "PING", "RESET", "QUIT", "AUTH", "HELLO":
			default:
				if subscribed && (r.kind != replyError || !strings.Contains(r.str, "allowed in this context")) {
					t.Fatalf("%q while subscribed answered kind %d %q, want the refusal", args, r.kind, r.str)
				}
			}
		}
	})
}
