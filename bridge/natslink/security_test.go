package natslink

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/internal/testcert"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// startSecured starts a server whose options configure edits.
func startSecured(t *testing.T, configure func(*server.Options)) *Server {
	t.Helper()
	s, err := Start(ServerConfig{Configure: configure})
	if err != nil {
		t.Fatalf("Start(secured): %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// roundTrip proves a connection works: a request answered by a
// subscription on the same connection.
func roundTrip(t *testing.T, nc *nats.Conn) {
	t.Helper()
	sub, err := nc.Subscribe("probe", func(m *nats.Msg) { m.Respond([]byte("pong")) })
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Unsubscribe()
	m, err := nc.Request("probe", nil, 5*time.Second)
	if err != nil || string(m.Data) != "pong" {
		t.Fatalf("Request(probe) = %v, %v; want pong", m, err)
	}
}

// writeFile writes data to a new file in dir and returns its path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	return p
}

func TestConnectSecure_UserPassword(t *testing.T) {
	s := startSecured(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "relay", Password: "s3cret"}}
	})
	nc, err := ConnectSecure(s.ClientURL(), "t", Security{User: "relay", Password: "s3cret"}, nil)
	if err != nil {
		t.Fatalf("ConnectSecure(right password) = %v, want success", err)
	}
	roundTrip(t, nc)
	nc.Close()
	for _, sec := range []Security{{User: "relay", Password: "wrong"}, {User: "nobody", Password: "s3cret"}, {}} {
		nc, err := ConnectSecure(s.ClientURL(), "t", sec, nil)
		if !errors.Is(err, ErrAuth) {
			if nc != nil {
				nc.Close()
			}
			t.Errorf("ConnectSecure(user %q, password %q) = %v, want ErrAuth", sec.User, sec.Password, err)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ConnectSecure error %q shows the password", err)
		}
	}
}

func TestConnectSecure_PasswordInURLIsRedacted(t *testing.T) {
	s := startSecured(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "relay", Password: "s3cret"}}
	})
	u := strings.Replace(s.ClientURL(), "nats://", "nats://relay:topsecret@", 1)
	_, err := ConnectSecure(u, "t", Security{}, nil)
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("ConnectSecure(wrong password in URL) = %v, want ErrAuth", err)
	}
	if strings.Contains(err.Error(), "topsecret") {
		t.Errorf("ConnectSecure error %q shows the URL's password", err)
	}
}

func TestConnectSecure_Token(t *testing.T) {
	s := startSecured(t, func(o *server.Options) { o.Authorization = "tok-123" })
	nc, err := ConnectSecure(s.ClientURL(), "t", Security{Token: "tok-123"}, nil)
	if err != nil {
		t.Fatalf("ConnectSecure(right token) = %v, want success", err)
	}
	roundTrip(t, nc)
	nc.Close()
	if _, err := ConnectSecure(s.ClientURL(), "t", Security{Token: "tok-999"}, nil); !errors.Is(err, ErrAuth) {
		t.Errorf("ConnectSecure(wrong token) = %v, want ErrAuth", err)
	}
}

func TestConnectSecure_NKeySeedFile(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	s := startSecured(t, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} })
	dir := t.TempDir()
	good := writeFile(t, dir, "user.nk", seed)
	nc, err := ConnectSecure(s.ClientURL(), "t", Security{NKeySeedFile: good}, nil)
	if err != nil {
		t.Fatalf("ConnectSecure(registered nkey) = %v, want success", err)
	}
	roundTrip(t, nc)
	nc.Close()
	bad := writeFile(t, dir, "other.nk", otherSeed)
	if _, err := ConnectSecure(s.ClientURL(), "t", Security{NKeySeedFile: bad}, nil); !errors.Is(err, ErrAuth) {
		t.Errorf("ConnectSecure(unregistered nkey) = %v, want ErrAuth", err)
	}
	junk := writeFile(t, dir, "junk.nk", []byte("not a seed\n"))
	if _, err := ConnectSecure(s.ClientURL(), "t", Security{NKeySeedFile: junk}, nil); !errors.Is(err, ErrBadSecurity) {
		t.Errorf("ConnectSecure(junk seed file) = %v, want ErrBadSecurity", err)
	}
}

// operatorServer starts a server in operator mode trusting a fresh
// operator with one account, and returns it with a .creds file of a user
// of that account and one of a user signed by an unknown account.
func operatorServer(t *testing.T) (s *Server, good, foreign string) {
	t.Helper()
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	opJWT, err := jwt.NewOperatorClaims(opPub).Encode(op)
	if err != nil {
		t.Fatalf("operator JWT: %v", err)
	}
	opClaims, err := jwt.DecodeOperatorClaims(opJWT)
	if err != nil {
		t.Fatalf("decode operator JWT: %v", err)
	}
	userCreds := func(acc nkeys.KeyPair) []byte {
		u, _ := nkeys.CreateUser()
		uPub, _ := u.PublicKey()
		uSeed, _ := u.Seed()
		uJWT, err := jwt.NewUserClaims(uPub).Encode(acc)
		if err != nil {
			t.Fatalf("user JWT: %v", err)
		}
		creds, err := jwt.FormatUserConfig(uJWT, uSeed)
		if err != nil {
			t.Fatalf("creds: %v", err)
		}
		return creds
	}
	acc, _ := nkeys.CreateAccount()
	accPub, _ := acc.PublicKey()
	accJWT, err := jwt.NewAccountClaims(accPub).Encode(op)
	if err != nil {
		t.Fatalf("account JWT: %v", err)
	}
	stranger, _ := nkeys.CreateAccount()
	s = startSecured(t, func(o *server.Options) {
		r := &server.MemAccResolver{}
		if err := r.Store(accPub, accJWT); err != nil {
			t.Fatalf("resolver: %v", err)
		}
		o.TrustedOperators = []*jwt.OperatorClaims{opClaims}
		o.AccountResolver = r
	})
	dir := t.TempDir()
	return s, writeFile(t, dir, "good.creds", userCreds(acc)), writeFile(t, dir, "foreign.creds", userCreds(stranger))
}

func TestConnectSecure_CredsFile(t *testing.T) {
	s, good, foreign := operatorServer(t)
	nc, err := ConnectSecure(s.ClientURL(), "t", Security{CredsFile: good}, nil)
	if err != nil {
		t.Fatalf("ConnectSecure(creds of a trusted account) = %v, want success", err)
	}
	roundTrip(t, nc)
	nc.Close()
	if _, err := ConnectSecure(s.ClientURL(), "t", Security{CredsFile: foreign}, nil); !errors.Is(err, ErrAuth) {
		t.Errorf("ConnectSecure(creds of an unknown account) = %v, want ErrAuth", err)
	}
	if _, err := ConnectSecure(s.ClientURL(), "t", Security{}, nil); !errors.Is(err, ErrAuth) {
		t.Errorf("ConnectSecure(no creds, operator mode) = %v, want ErrAuth", err)
	}
}

func TestConnectSecure_MutualTLS(t *testing.T) {
	const name = "nats.goindex.internal"
	p := testcert.New(t, name)
	s := startSecured(t, func(o *server.Options) {
		o.TLS, o.TLSVerify = true, true
		o.TLSConfig = p.ServerTLS(t)
	})
	url := strings.Replace(s.ClientURL(), "nats://", "tls://", 1)
	full := Security{CAFile: p.CA, CertFile: p.ClientCert, KeyFile: p.ClientKey, ServerName: name}
	nc, err := ConnectSecure(url, "t", full, nil)
	if err != nil {
		t.Fatalf("ConnectSecure(CA, client cert, server name) = %v, want success", err)
	}
	roundTrip(t, nc)
	nc.Close()

	noName := full
	noName.ServerName = ""
	noCert := full
	noCert.CertFile, noCert.KeyFile = "", ""
	noCA := full
	noCA.CAFile = ""
	plainURL := s.ClientURL()
	for _, c := range []struct {
		what string
		url  string
		sec  Security
	}{
		{"server name not in the certificate (127.0.0.1)", url, noName},
		{"no client certificate", url, noCert},
		{"server's CA not trusted (system roots)", url, noCA},
		{"no TLS settings against a TLS-only server", plainURL, Security{}},
	} {
		nc, err := ConnectSecure(c.url, "t", c.sec, nil)
		if !errors.Is(err, ErrTLS) {
			if nc != nil {
				nc.Close()
			}
			t.Errorf("ConnectSecure(%s) = %v, want ErrTLS", c.what, err)
		}
	}
}

func TestSecurity_ValidateNamesTheProblem(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, dir, "f", []byte("x"))
	missing := filepath.Join(dir, "missing.creds")
	for _, c := range []struct {
		sec  Security
		want string
	}{
		{Security{User: "u", Token: "t"}, "exclude each other"},
		{Security{Token: "t", CredsFile: f}, "exclude each other"},
		{Security{Password: "p"}, "password needs a user"},
		{Security{CertFile: f}, "needs its key"},
		{Security{KeyFile: f}, "needs its key"},
		{Security{CredsFile: missing}, "creds file"},
		{Security{CAFile: f}, ""}, // readable: Validate does not parse
	} {
		err := c.sec.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Validate(%+v) = %v, want nil", c.sec, err)
		case c.want != "" && (!errors.Is(err, ErrBadSecurity) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("Validate(%+v) = %v, want ErrBadSecurity naming %q", c.sec, err, c.want)
		}
	}
	if _, err := (Security{CAFile: f}).Options(); !errors.Is(err, ErrBadSecurity) || !strings.Contains(err.Error(), "no PEM") {
		t.Errorf("Options(CA file without PEM) = %v, want ErrBadSecurity naming the missing PEM", err)
	}
}

// A client started before its server comes back reconnecting, and connects
// once the server is up. AwaitConnected returns then, and with the reason
// when its caller stops waiting or the connection is closed first.
func TestConnectSecure_UnreachableServerReconnectsLater(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	nc, err := ConnectSecure("nats://127.0.0.1:"+strconv.Itoa(port), "t", Security{}, nil, nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatalf("ConnectSecure(nothing listening yet) = %v, want a reconnecting connection", err)
	}
	defer nc.Close()
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	if err := AwaitConnected(stopped, nc, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("AwaitConnected(cancelled, no server) = %v, want context.Canceled", err)
	}
	s, err := Start(ServerConfig{Port: port})
	if err != nil {
		t.Fatalf("Start on port %d: %v", port, err)
	}
	t.Cleanup(s.Shutdown)
	waitFor(t, 10*time.Second, "client connected once the server is up", func() bool { return nc.Status() == nats.CONNECTED })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := AwaitConnected(ctx, nc, nil); err != nil {
		t.Errorf("AwaitConnected(server up) = %v, want nil", err)
	}
	nc.Close()
	if err := AwaitConnected(ctx, nc, nil); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Errorf("AwaitConnected(closed connection) = %v, want nats.ErrConnectionClosed", err)
	}
}
