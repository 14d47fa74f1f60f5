package dynkv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

const testKey = "dynamo:kv-router:ns:component-backend:scope-backend:block-size-16"

func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	s, err := NewServer(cfg)
	require.NoError(t, err, "NewServer(%+v)", cfg)
	go s.Serve()
	t.Cleanup(func() { s.Close() })
	return s
}

func client(t *testing.T, s *Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestServer_GoldenExchangeWithARedisClient(t *testing.T) {
	for _, b := range testBackings() {
		t.Run("index="+string(b.Index), func(t *testing.T) {
			s := startServer(t, Config{Backing: b})
			c := client(t, s)
			ctx := context.Background()
			got, err := c.Do(ctx, "DYNKV.APPLY", testKey, mustHex(t, goldenStore)).Result()
			require.NoError(t, err, "APPLY golden store")
			require.Equal(t, "OK", got, "APPLY golden store reply")
			got, err = c.Do(ctx, "DYNKV.APPLY", testKey, mustHex(t, goldenStore)).Result()
			require.NoError(t, err, "APPLY duplicate")
			require.Equal(t, "NOOP", got, "APPLY duplicate reply")
			for _, cmd := range []string{"DYNKV.MATCH", "DYNKV.MATCH_PRIMARY"} {
				reply, err := c.Do(ctx, cmd, testKey, mustHex(t, goldenMatchReq)).Text()
				require.NoError(t, err, cmd)
				require.Equal(t, goldenMatchReply, fmt.Sprintf("%x", reply), "%s golden reply", cmd)
			}
			stats, err := c.Do(ctx, "DYNKV.STATS", testKey).Int64Slice()
			require.NoError(t, err, "STATS")
			require.Equal(t, []int64{2, 1, 1}, stats, "STATS [nodes, rank states, mutations]")
			n, err := c.Do(ctx, "WAIT", "1", "0").Int64()
			require.NoError(t, err, "WAIT")
			require.Equal(t, int64(0), n, "WAIT acks without replicas")
			role, err := c.Do(ctx, "ROLE").Slice()
			require.NoError(t, err, "ROLE")
			require.Equal(t, "master", role[0], "ROLE[0]")
			require.Equal(t, "PONG", c.Ping(ctx).Val(), "PING")
			// Other keys are independent indexes.
			reply, err := c.Do(ctx, "DYNKV.MATCH", testKey+"x", mustHex(t, goldenMatchReq)).Text()
			require.NoError(t, err, "MATCH other key")
			require.Equal(t, "0100000000", fmt.Sprintf("%x", reply), "MATCH on an empty key")
		})
	}
}

// TestServer_ErrorRepliesAreTheModules: each error reply is the module's
// exact line (its bare error name, or the server's arity and unknown
// command lines), and the connection keeps working after every one.
func TestServer_ErrorRepliesAreTheModules(t *testing.T) {
	s := startServer(t, Config{})
	c := client(t, s)
	ctx := context.Background()
	cases := []struct {
		args []any
		want string
	}{
		{[]any{"DYNKV.APPLY", testKey, []byte{1, 2, 3}}, "DYNKV_INVALID_EVENT"},
		{[]any{"DYNKV.APPLY", testKey, AppendEvent(nil, chainStore(r10, 1, []uint64{5}, []uint64{6}))}, "DYNKV_MISSING_PARENT"},
		{[]any{"DYNKV.MATCH", testKey, []byte{1, 0, 0}}, "DYNKV_INVALID_MATCH"},
		{[]any{"DYNKV.RESET_WORKER", testKey, u64(1), []byte{0, 0}}, "DYNKV_INVALID_WORKER"},
		{[]any{"DYNKV.APPLY", testKey}, "ERR wrong number of arguments for 'dynkv.apply' command"},
		{[]any{"dynkv.stats"}, "ERR wrong number of arguments for 'dynkv.stats' command"},
		{[]any{"DYNKV.GC", testKey, "CURRENT", []byte{0, 0, 0, 0}}, "DYNKV_INVALID_GC_REQUEST"},
		{[]any{"DYNKV.RESTORE", testKey, "x"}, "DYNKV_RESTORE_LOADING_ONLY"},
		{[]any{"DYNKV.APPLY_OWNED_AT", testKey, "a", "b", "c"}, "DYNKV_APPLY_OWNED_AT_INTERNAL_ONLY"},
		{[]any{"DYNKV.NOPE", testKey}, "ERR unknown command 'DYNKV.NOPE', with args beginning with: '" + testKey + "' "},
		{[]any{"REPLICAOF", "h", "1"}, replicationText},
		{[]any{"DYNKV.APPLY", strings.Repeat("k", MaxKeyBytes+1), mustHex(t, goldenStore)}, "ERR goindex dynkv: dynkv: more than 4096 keys"},
	}
	for _, tc := range cases {
		if err := c.Do(ctx, tc.args...).Err(); err == nil || err.Error() != tc.want {
			t.Errorf("%v: err = %v, want %q", tc.args[0], err, tc.want)
		}
	}
	// The server still works after every error.
	require.Equal(t, "OK", c.Do(ctx, "DYNKV.APPLY", testKey, mustHex(t, goldenStore)).Val(), "APPLY after errors")
}

func TestServer_RankLifecycleCommands(t *testing.T) {
	for _, b := range testBackings() {
		t.Run("index="+string(b.Index), func(t *testing.T) {
			s := startServer(t, Config{Backing: b})
			c := client(t, s)
			ctx := context.Background()
			do := func(args ...any) any {
				t.Helper()
				v, err := c.Do(ctx, args...).Result()
				require.NoError(t, err, "%v", args[0])
				return v
			}
			do("DYNKV.APPLY", testKey, mustHex(t, goldenStore))
			ticket := do("DYNKV.RANK_GENERATION", testKey, u64(1), u32(0)).(string)
			require.Len(t, ticket, 8, "RANK_GENERATION is an 8-byte ticket")
			snap := AppendSnapshot(nil, []Event{{Kind: KindStore, Rank: Rank{1, 0}, EventID: 1, Parent: RootParent, Blocks: []Block{{101, 11}}}})
			next := do("DYNKV.REPLACE_RANK_IF_GENERATION", testKey, u64(1), u32(0), []byte(ticket), snap).(string)
			require.NotEqual(t, ticket, next, "REPLACE returns a new ticket")
			err := c.Do(ctx, "DYNKV.REPLACE_RANK_IF_GENERATION", testKey, u64(1), u32(0), []byte(ticket), snap).Err()
			require.ErrorContains(t, err, "DYNKV_STALE_GENERATION", "REPLACE with the old ticket")
			m, _ := c.Do(ctx, "DYNKV.MATCH", testKey, mustHex(t, goldenMatchReq)).Text()
			entries, err := DecodeMatchReply([]byte(m))
			require.NoError(t, err, "decode MATCH reply")
			require.Equal(t, []MatchEntry{{Rank{1, 0}, 1, 101}}, entries, "MATCH after replace")
			require.Equal(t, "OK", do("DYNKV.REMOVE_WORKER", testKey, u64(1), u32(0)), "REMOVE_WORKER")
			require.Equal(t, "OK", do("DYNKV.APPLY", testKey, mustHex(t, goldenStore)), "APPLY while retired (a ticket, no owner)")
			require.Equal(t, "OK", do("DYNKV.RESET_WORKER", testKey, u64(1), u32(0)), "RESET_WORKER")
			require.Equal(t, "OK", do("DYNKV.APPLY", testKey, mustHex(t, goldenStore)), "APPLY after reset")
			require.Equal(t, "OK", do("DYNKV.REGISTER_WORKER", testKey, u64(3), u32(0)), "REGISTER_WORKER")
			require.Equal(t, "NOOP", do("DYNKV.REGISTER_WORKER", testKey, u64(3), u32(0)), "REGISTER_WORKER again")
			reg := AppendRegistration(nil, Registration{Version: 1, Ranks: []uint32{0, 1}})
			require.Equal(t, "OK", do("DYNKV.REGISTER_WORKER_RANKS", testKey, u64(4), reg), "REGISTER_WORKER_RANKS")
			require.Equal(t, "OK", do("DYNKV.BARRIER", testKey), "BARRIER")
			sel := AppendSelectRequest(nil, []uint64{11, 12}, []SelectCandidate{{Rank{9, 0}, 0}, {Rank{1, 0}, 7}})
			r, _ := c.Do(ctx, "DYNKV.SELECT", testKey, sel).Text()
			require.Equal(t, goldenSelectReply, fmt.Sprintf("%x", r), "SELECT picks the longest prefix")
			require.Equal(t, "OK", do("DYNKV.REMOVE_WORKER_ALL", testKey, u64(1)), "REMOVE_WORKER_ALL")
		})
	}
}

func TestServer_HostileConnectionsGetErrorsNotCrashes(t *testing.T) {
	s := startServer(t, Config{MaxConns: 8})
	addr := s.Addr().String()
	// A declared bulk string over the request limit is cut off.
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err, "dial")
	fmt.Fprintf(conn, "*3\r\n$11\r\nDYNKV.APPLY\r\n$3\r\nkey\r\n$%d\r\n", MaxRequestBytes*4)
	chunk := make([]byte, 1<<20)
	wrote := 0
	conn.SetWriteDeadline(time.Now().Add(20 * time.Second))
	for wrote < MaxRequestBytes*2 {
		n, err := conn.Write(chunk)
		wrote += n
		if err != nil {
			break
		}
	}
	require.Less(t, wrote, MaxRequestBytes*2, "server kept reading an oversized request (%d bytes)", wrote)
	conn.Close()
	// Garbage protocol bytes.
	conn, err = net.Dial("tcp", addr)
	require.NoError(t, err, "dial")
	fmt.Fprint(conn, "*-5\r\n$abc\r\n")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(conn).ReadString('\n')
	require.True(t, strings.HasPrefix(line, "-"), "garbage got %q, want an error reply", line)
	conn.Close()
	// More connections than allowed.
	var held []net.Conn
	for i := 0; i < 12; i++ {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err, "dial %d", i)
		held = append(held, c)
	}
	for _, c := range held {
		c.Close()
	}
	// The server still answers.
	c := client(t, s)
	require.Eventually(t, func() bool { return c.Ping(context.Background()).Val() == "PONG" }, 10*time.Second, 20*time.Millisecond, "PING after hostile clients")
}

func TestServer_PasswordRequired(t *testing.T) {
	s := startServer(t, Config{Password: "sekret"})
	c := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Protocol: 2, DisableIdentity: true})
	defer c.Close()
	ctx := context.Background()
	require.ErrorContains(t, c.Do(ctx, "DYNKV.STATS", testKey).Err(), "NOAUTH", "STATS without AUTH")
	authed := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Protocol: 2, DisableIdentity: true, Password: "sekret"})
	defer authed.Close()
	require.NoError(t, authed.Do(ctx, "DYNKV.STATS", testKey).Err(), "STATS with AUTH")
}

func TestServer_RestartRecoversFromLog(t *testing.T) {
	for _, b := range testBackings() {
		t.Run("index="+string(b.Index), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "dynkv.aof")
			s, err := NewServer(Config{Addr: "127.0.0.1:0", LogPath: path, Backing: b})
			require.NoError(t, err, "NewServer")
			go s.Serve()
			c := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Protocol: 2, DisableIdentity: true})
			ctx := context.Background()
			events := []Event{
				chainStore(r10, 1, nil, []uint64{1, 2, 3, 4}),
				chainStore(r20, 1, nil, []uint64{1, 2}),
				{Kind: KindRemove, Rank: r10, EventID: 2, Hashes: []uint64{chainHash(1, 2, 3)}},
				chainStore(Rank{3, 0}, 1, nil, []uint64{1}),
				{Kind: KindClear, Rank: Rank{3, 0}, EventID: 3},
			}
			for _, ev := range events {
				require.NoError(t, c.Do(ctx, "DYNKV.APPLY", testKey, AppendEvent(nil, ev)).Err(), "APPLY %+v", ev)
			}
			require.NoError(t, c.Do(ctx, "DYNKV.REMOVE_WORKER", testKey, u64(2), u32(0)).Err(), "REMOVE_WORKER")
			query := AppendMatchRequest(nil, []uint64{1, 2, 3, 4})
			before, _ := c.Do(ctx, "DYNKV.MATCH", testKey, query).Text()
			statsBefore, _ := c.Do(ctx, "DYNKV.STATS", testKey).Int64Slice()
			c.Close()
			require.NoError(t, s.Close(), "Close")

			s2 := startServer(t, Config{LogPath: path, Backing: b})
			c2 := client(t, s2)
			after, err := c2.Do(ctx, "DYNKV.MATCH", testKey, query).Text()
			require.NoError(t, err, "MATCH after restart")
			require.Equal(t, before, after, "MATCH after restart")
			statsAfter, _ := c2.Do(ctx, "DYNKV.STATS", testKey).Int64Slice()
			require.Equal(t, statsBefore, statsAfter, "STATS after restart")
			// Rank 2/0 stays retired across the restart.
			wantEntries, _ := DecodeMatchReply([]byte(before))
			require.Equal(t, "OK", c2.Do(ctx, "DYNKV.APPLY", testKey, AppendEvent(nil, chainStore(r20, 9, nil, []uint64{1}))).Val(), "APPLY for a retired rank after restart")
			entries, _ := DecodeMatchReply([]byte(after))
			require.True(t, reflect.DeepEqual(entries, wantEntries), "entries after restart = %+v, want %+v", entries, wantEntries)
			require.Equal(t, []MatchEntry{{r10, 2, chainHash(1, 2)}}, entries, "entries after restart")
		})
	}
}

func TestServer_ConcurrentClients(t *testing.T) {
	for _, b := range testBackings() {
		t.Run("index="+string(b.Index), func(t *testing.T) {
			s := startServer(t, Config{Backing: b})
			ctx := context.Background()
			const workers, events = 6, 200
			errs := make(chan error, workers*2)
			for w := 0; w < workers; w++ {
				go func(w int) {
					c := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Protocol: 2, DisableIdentity: true})
					defer c.Close()
					r := Rank{uint64(w + 1), 0}
					var prefix []uint64
					for i := 0; i < events; i++ {
						l := uint64(i%7 + 1)
						if err := c.Do(ctx, "DYNKV.APPLY", testKey, AppendEvent(nil, chainStore(r, uint64(i+1), prefix, []uint64{l}))).Err(); err != nil {
							errs <- fmt.Errorf("worker %d apply %d: %w", w, i, err)
							return
						}
						prefix = append(prefix, l)
						if len(prefix) > 20 {
							prefix = prefix[:0]
						}
					}
					errs <- nil
				}(w)
				go func() {
					c := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Protocol: 2, DisableIdentity: true})
					defer c.Close()
					for i := 0; i < events; i++ {
						b, err := c.Do(ctx, "DYNKV.MATCH", testKey, AppendMatchRequest(nil, []uint64{1, 2, 3, 4, 5})).Text()
						if err != nil {
							errs <- fmt.Errorf("match %d: %w", i, err)
							return
						}
						entries, err := DecodeMatchReply([]byte(b))
						if err != nil {
							errs <- err
							return
						}
						for _, e := range entries {
							if e.Matched > 5 {
								errs <- fmt.Errorf("match depth %d > query length 5", e.Matched)
								return
							}
						}
					}
					errs <- nil
				}()
			}
			for i := 0; i < workers*2; i++ {
				require.NoError(t, <-errs, "concurrent client")
			}
		})
	}
}

// TestServer_ConnectionsOverTheLimitGetAnError: with MaxConns connections
// open, the next one is answered with an error and closed; the open ones
// keep working.
func TestServer_ConnectionsOverTheLimitGetAnError(t *testing.T) {
	const limit = 3
	s := startServer(t, Config{MaxConns: limit})
	ping := func(c net.Conn) string {
		t.Helper()
		fmt.Fprint(c, "*1\r\n$4\r\nPING\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line
	}
	var open []net.Conn
	for i := 0; i <= limit; i++ {
		c, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err, "dial %d", i)
		defer c.Close()
		got := ping(c)
		switch {
		case i < limit && got != "+PONG\r\n":
			t.Errorf("connection %d of %d: PING = %q, want +PONG", i+1, limit, got)
		case i == limit && !strings.HasPrefix(got, "-ERR max number of clients reached"):
			t.Errorf("connection %d over the limit %d: PING = %q, want -ERR max number of clients reached", i+1, limit, got)
		}
		open = append(open, c)
	}
	if got := ping(open[0]); got != "+PONG\r\n" {
		t.Errorf("first connection after the refused one: PING = %q, want +PONG", got)
	}
}

// TestServer_StalledClientsLoseTheirConnections: 200 clients stop in the
// middle of a command and 10 pipeline replies they never read; each loses
// its connection (the server frees the descriptor) once CommandTimeout or
// WriteTimeout passes, while a normal client is served all along.
func TestServer_StalledClientsLoseTheirConnections(t *testing.T) {
	s := startServer(t, Config{CommandTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	addr := s.Addr().String()
	var stalled []net.Conn
	for i := 0; i < 200; i++ {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err, "dial stalled client %d", i)
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "*3\r\n$11\r\nDYNKV.MATCH\r\n$3\r\nkey\r\n$100\r\npartial") // 93 bytes never come
		stalled = append(stalled, c)
	}
	echo := strings.Repeat("x", 4096)
	var pipeline strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&pipeline, "*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(echo), echo)
	}
	for i := 0; i < 10; i++ {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err, "dial non-reading client %d", i)
		t.Cleanup(func() { c.Close() })
		go func() {
			for j := 0; j < 10; j++ { // 80 MiB of replies, never read
				if _, err := c.Write([]byte(pipeline.String())); err != nil {
					return
				}
			}
		}()
	}
	normal := client(t, s)
	ctx := context.Background()
	served := 0
	require.Eventually(t, func() bool {
		if got, err := normal.Do(ctx, "DYNKV.STATS", testKey).Int64Slice(); err != nil || len(got) != 3 {
			t.Errorf("STATS while clients stall = %v, %v", got, err)
		}
		served++
		return s.conns.Load() == 1
	}, 60*time.Second, 20*time.Millisecond, "connections held: %d (want only the normal client's)", s.conns.Load())
	for i, c := range stalled {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("stalled client %d read %d bytes, want its connection closed", i, n)
		}
	}
	t.Logf("normal client served %d commands while the stalled ones were cut", served)
}

// TestServer_HelloAnswersAsTheServer checks HELLO byte for byte where a
// client reads it: proto and id are integers (they were bulk strings), a
// server with a password answers NOAUTH to a HELLO without credentials
// (it used to answer it in full) and takes only the default user's, and
// a protocol version other than 2 is NOPROTO whatever the credentials.
func TestServer_HelloAnswersAsTheServer(t *testing.T) {
	exchange := func(addr, req string) string {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err, "dial")
		defer conn.Close()
		_, err = fmt.Fprint(conn, req+"PING\r\n")
		require.NoError(t, err, "write %q", req)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		var out strings.Builder
		r := bufio.NewReader(conn)
		for !strings.HasSuffix(out.String(), "+PONG\r\n") && !strings.HasSuffix(out.String(), "-NOAUTH Authentication required.\r\n") {
			line, err := r.ReadString('\n')
			require.NoError(t, err, "reply to %q after %q", req, out.String())
			out.WriteString(line)
		}
		return out.String()
	}
	const hello2 = "*14\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.2.4\r\n$5\r\nproto\r\n:2\r\n$2\r\nid\r\n:1\r\n" +
		"$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"
	open := startServer(t, Config{}).Addr().String()
	locked := startServer(t, Config{Password: "sekret"}).Addr().String()
	for _, c := range []struct{ addr, req, want string }{
		{open, "HELLO\r\n", hello2 + "+PONG\r\n"},
		{open, "HELLO 2\r\n", hello2 + "+PONG\r\n"},
		{open, "HELLO 3\r\n", "-NOPROTO unsupported protocol version\r\n+PONG\r\n"},
		{locked, "HELLO 2\r\n", "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH " +
			"<user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n" +
			"-NOAUTH Authentication required.\r\n"},
		{locked, "HELLO 3 AUTH default sekret\r\n", "-NOPROTO unsupported protocol version\r\n-NOAUTH Authentication required.\r\n"},
		{locked, "HELLO 2 AUTH someone sekret\r\n", "-WRONGPASS invalid username-password pair or user is disabled.\r\n" +
			"-NOAUTH Authentication required.\r\n"},
		{locked, "HELLO 2 AUTH default sekret\r\n", hello2 + "+PONG\r\n"},
	} {
		if got := exchange(c.addr, c.req); got != c.want {
			t.Errorf("%q then PING (password set: %v) answered\n%q\nwant\n%q", c.req, c.addr == locked, got, c.want)
		}
	}
}

// respCommand encodes args as a RESP array of bulk strings.
func respCommand(args ...string) string {
	out := fmt.Sprintf("*%d\r\n", len(args))
	for _, a := range args {
		out += fmt.Sprintf("$%d\r\n%s\r\n", len(a), a)
	}
	return out
}

// exchangeRaw writes req on a fresh connection to addr (TCP host:port, or
// an absolute Unix socket path) and reads back exactly as many bytes as
// want holds.
func exchangeRaw(t *testing.T, addr, req string, want int) string {
	t.Helper()
	network := "tcp"
	if filepath.IsAbs(addr) {
		network = "unix"
	}
	conn, err := net.Dial(network, addr)
	require.NoError(t, err, "dial")
	defer conn.Close()
	_, err = io.WriteString(conn, req)
	require.NoError(t, err, "write %q", req)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, want)
	n, err := io.ReadFull(conn, got)
	if err != nil {
		return string(got[:n]) + "<" + err.Error() + ">"
	}
	return string(got)
}

// play sends an exchange's requests on one connection and returns the
// replies read and the replies wanted.
func play(t *testing.T, addr string, exchange [][2]string) (got, want string) {
	t.Helper()
	var req string
	for _, x := range exchange {
		req, want = req+x[0], want+x[1]
	}
	return exchangeRaw(t, addr, req, len(want)), want
}

// clientNameExchange is CLIENT SETNAME and GETNAME with the replies
// redis-server 7.0.15 (Debian's) gives, byte for byte: no name is a null
// bulk string, an empty name clears it, a name with a space or a byte
// outside '!'…'~' is refused, and each subcommand's arity has its
// "client|…" error.
var clientNameExchange = [][2]string{
	{respCommand("CLIENT", "GETNAME"), "$-1\r\n"},
	{respCommand("CLIENT", "SETNAME", "relay-1"), "+OK\r\n"},
	{respCommand("CLIENT", "GETNAME"), "$7\r\nrelay-1\r\n"},
	{respCommand("CLIENT", "SETNAME", "a b"), "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"},
	{respCommand("CLIENT", "SETNAME", "a\x7f"), "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"},
	{respCommand("CLIENT", "GETNAME"), "$7\r\nrelay-1\r\n"},
	{respCommand("CLIENT", "SETNAME"), "-ERR wrong number of arguments for 'client|setname' command\r\n"},
	{respCommand("CLIENT", "SETNAME", "a", "b"), "-ERR wrong number of arguments for 'client|setname' command\r\n"},
	{respCommand("CLIENT", "GETNAME", "x"), "-ERR wrong number of arguments for 'client|getname' command\r\n"},
	{respCommand("CLIENT", "SETNAME", ""), "+OK\r\n"},
	{respCommand("CLIENT", "GETNAME"), "$-1\r\n"},
	{respCommand("PING"), "+PONG\r\n"},
}

// arrayExchange is empty and null command arrays with redis-server
// 7.0.15's (Debian's) replies, byte for byte: none; the connection stays
// open and the next command is answered. A "*0" inside a bulk string is
// data.
var arrayExchange = [][2]string{
	{"*0\r\n", ""},
	{respCommand("PING"), "+PONG\r\n"},
	{"*-1\r\n", ""},
	{"*-5\r\n", ""},
	{respCommand("ECHO", "*0\r\n"), "$4\r\n*0\r\n\r\n"},
	{"*0\r\n*0\r\n", ""},
	{respCommand("PING"), "+PONG\r\n"},
}

// TestServer_EmptyAndNullArraysAreIgnoredAsValkeyIgnoresThem plays
// arrayExchange. redcon refused the arrays with a protocol error and
// closed the connection.
func TestServer_EmptyAndNullArraysAreIgnoredAsValkeyIgnoresThem(t *testing.T) {
	addr := startServer(t, Config{}).Addr().String()
	if got, want := play(t, addr, arrayExchange); got != want {
		t.Errorf("empty and null arrays exchange:\n got %q\nwant %q", got, want)
	}
}

// TestServer_ClientNameIsKeptAsValkeyKeepsIt plays clientNameExchange on
// one connection, and HELLO 2 SETNAME then GETNAME on another. GETNAME
// used to answer null whatever SETNAME had set.
func TestServer_ClientNameIsKeptAsValkeyKeepsIt(t *testing.T) {
	addr := startServer(t, Config{}).Addr().String()
	if got, want := play(t, addr, clientNameExchange); got != want {
		t.Errorf("CLIENT SETNAME/GETNAME exchange:\n got %q\nwant %q", got, want)
	}
	req := respCommand("HELLO", "2", "SETNAME", "nm") + respCommand("CLIENT", "GETNAME")
	const hello = "*14\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.2.4\r\n$5\r\nproto\r\n:2\r\n$2\r\nid\r\n:1\r\n" +
		"$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"
	if got := exchangeRaw(t, addr, req, len(hello)+len("$2\r\nnm\r\n")); got != hello+"$2\r\nnm\r\n" {
		t.Errorf("HELLO 2 SETNAME nm, CLIENT GETNAME = %q, want the HELLO map then $2 nm", got)
	}
}

// TestServer_ExchangesMatchARealServer plays clientNameExchange,
// arrayExchange and selectExchange against Debian's redis-server as well
// (a build.sh package), on a Unix socket in the test's directory: no TCP
// port to pick and free for it, which another process could take
// meanwhile.
func TestServer_ExchangesMatchARealServer(t *testing.T) {
	addr := filepath.Join(t.TempDir(), "redis.sock")
	startRedis(t, addr, "", "--port", "0", "--unixsocket", addr)
	for name, exchange := range map[string][][2]string{"CLIENT SETNAME/GETNAME": clientNameExchange, "empty and null arrays": arrayExchange,
		"SELECT": selectExchange} {
		if got, want := play(t, addr, exchange); got != want {
			t.Errorf("redis-server's %s exchange:\n got %q\nwant %q (recorded)", name, got, want)
		}
	}
}

// selectExchange is SELECT with redis-server 7.0.15's (Debian's) replies,
// byte for byte: databases 0 to 15 exist; an index outside them, one that
// is not an integer as the server parses them (spaces, leading zeros) and
// a wrong argument count have their errors.
var selectExchange = [][2]string{
	{respCommand("SELECT", "15"), "+OK\r\n"},
	{respCommand("SELECT", "16"), "-ERR DB index is out of range\r\n"},
	{respCommand("SELECT", "-1"), "-ERR DB index is out of range\r\n"},
	{respCommand("SELECT", "abc"), "-ERR value is not an integer or out of range\r\n"},
	{respCommand("SELECT", "0"), "+OK\r\n"},
	{respCommand("SELECT"), "-ERR wrong number of arguments for 'select' command\r\n"},
	{respCommand("SELECT", " 1"), "-ERR value is not an integer or out of range\r\n"},
	{respCommand("SELECT", "01"), "-ERR value is not an integer or out of range\r\n"},
	{respCommand("CONFIG", "GET", "databases"), "*2\r\n$9\r\ndatabases\r\n$2\r\n16\r\n"},
}

func TestServer_SelectAnswersAsValkey(t *testing.T) {
	addr := startServer(t, Config{}).Addr().String()
	if got, want := play(t, addr, selectExchange); got != want {
		t.Errorf("SELECT exchange:\n got %q\nwant %q", got, want)
	}
}

// TestServer_DatabasesKeepTheirKeysApart writes the same key in databases
// 0, 3 and 5 (go-redis selecting them as a frontend given
// redis://host/N does), empties 5 with FLUSHDB and restarts from the log:
// each database answers for its own index only, before and after. SELECT
// of any database but 0 used to be refused.
func TestServer_DatabasesKeepTheirKeysApart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dynkv.aof")
	ctx := context.Background()
	query := AppendMatchRequest(nil, []uint64{1, 2})
	apply := map[int]Event{0: chainStore(r10, 1, nil, []uint64{1}), 3: chainStore(r20, 1, nil, []uint64{1, 2}),
		5: chainStore(Rank{3, 0}, 1, nil, []uint64{1, 2})}
	want := map[int][]MatchEntry{0: {{r10, 1, chainHash(1)}}, 3: {{r20, 2, chainHash(1, 2)}}, 5: nil}
	check := func(s *Server, when string) {
		t.Helper()
		for _, db := range []int{0, 3, 5, 7} {
			c := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Protocol: 2, DisableIdentity: true, DB: db})
			raw, err := c.Do(ctx, "DYNKV.MATCH", testKey, query).Text()
			require.NoError(t, err, "%s: MATCH in db %d", when, db)
			entries, err := DecodeMatchReply([]byte(raw))
			require.NoError(t, err, "%s: MATCH reply in db %d", when, db)
			if len(entries) == 0 {
				entries = nil
			}
			if !reflect.DeepEqual(entries, want[db]) {
				t.Errorf("%s: MATCH in db %d = %+v, want %+v", when, db, entries, want[db])
			}
			size, _ := c.DBSize(ctx).Result()
			if wantSize := int64(len(want[db])); size != wantSize {
				t.Errorf("%s: DBSIZE in db %d = %d, want %d", when, db, size, wantSize)
			}
			c.Close()
		}
	}
	s, err := NewServer(Config{Addr: "127.0.0.1:0", LogPath: path})
	require.NoError(t, err, "NewServer")
	go s.Serve()
	for db, ev := range apply {
		c := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Protocol: 2, DisableIdentity: true, DB: db})
		require.Equal(t, "OK", c.Do(ctx, "DYNKV.APPLY", testKey, AppendEvent(nil, ev)).Val(), "APPLY in db %d", db)
		if db == 5 {
			require.Equal(t, int64(1), c.Exists(ctx, testKey).Val(), "EXISTS in db 5 before FLUSHDB")
			require.Equal(t, "OK", c.FlushDB(ctx).Val(), "FLUSHDB in db 5")
		}
		c.Close()
	}
	info, _ := client(t, s).Info(ctx, "keyspace").Result()
	for _, line := range []string{"db0:keys=1,", "db3:keys=1,"} {
		if !strings.Contains(info, line) {
			t.Errorf("INFO keyspace = %q, want a line %q", info, line)
		}
	}
	if strings.Contains(info, "db5:") {
		t.Errorf("INFO keyspace = %q lists db 5 after its FLUSHDB", info)
	}
	check(s, "before the restart")
	require.NoError(t, s.Close(), "Close")
	check(startServer(t, Config{LogPath: path}), "after the restart")
}
