package testcert

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/goindex/goindex/internal/doccheck"
)

func TestDoc_FileMapMatchesDirectory(t *testing.T) { doccheck.FileMap(t, ".") }

// handshake runs one TLS handshake over loopback TCP and returns the
// client's and the server's errors.
func handshake(t *testing.T, client, server *tls.Config) (error, error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer l.Close()
	srvErr := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer c.Close()
		srvErr <- tls.Server(c, server).Handshake()
	}()
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	err = tls.Client(raw, client).Handshake()
	raw.Close()
	return err, <-srvErr
}

func TestNew_LeavesHandshakeForTheirHostsOnly(t *testing.T) {
	f := New(t, "127.0.0.1", "svc.test.internal")
	for _, host := range []string{"127.0.0.1", "svc.test.internal"} {
		c := f.ClientTLS(t)
		c.ServerName = host
		if cErr, sErr := handshake(t, c, f.ServerTLS(t)); cErr != nil || sErr != nil {
			t.Errorf("handshake(server name %s) = client %v, server %v; want both nil", host, cErr, sErr)
		}
	}
	c := f.ClientTLS(t)
	c.ServerName = "other.test.internal"
	if cErr, _ := handshake(t, c, f.ServerTLS(t)); cErr == nil {
		t.Errorf("handshake(server name not in the certificate) = nil, want a verification error")
	}
	anon := f.ClientTLS(t)
	anon.ServerName, anon.Certificates = "127.0.0.1", nil
	if _, sErr := handshake(t, anon, f.ServerTLS(t)); sErr == nil {
		t.Errorf("handshake(client without certificate): server = nil, want a refusal")
	}
}
