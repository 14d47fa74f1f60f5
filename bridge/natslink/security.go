package natslink

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
)

// Security is the client side of NATS authentication and TLS. At most one
// of the four authentication methods may be set: User (with Password),
// Token, NKeySeedFile or CredsFile. TLS is engaged when any of CAFile,
// CertFile/KeyFile or ServerName is set, or when the URL says tls://.
// The zero value connects without credentials and with nats.go's TLS
// defaults (system roots, only if the server asks for TLS).
type Security struct {
	// User and Password authenticate with a user name and password;
	// optional.
	User, Password string
	// Token authenticates with a bearer token; optional.
	Token string
	// NKeySeedFile is a file holding an NKey user seed ("SU…"), which signs
	// the server's nonce; optional.
	NKeySeedFile string
	// CredsFile is a .creds file (a user JWT and its NKey seed, as nsc
	// writes them) for servers in operator mode; optional.
	CredsFile string
	// CAFile is a PEM bundle of the CAs that sign the server's certificate;
	// optional; default: the system roots.
	CAFile string
	// CertFile and KeyFile are this client's PEM certificate and key for
	// servers that verify clients (mutual TLS); optional, both or neither.
	CertFile, KeyFile string
	// ServerName is the name the server's certificate must carry; optional;
	// default: the host of the URL being dialed.
	ServerName string
}

// AuthMethod names the configured authentication method: "user",
// "token", "nkey", "creds", or "none".
func (s Security) AuthMethod() string {
	switch {
	case s.User != "":
		return "user"
	case s.Token != "":
		return "token"
	case s.NKeySeedFile != "":
		return "nkey"
	case s.CredsFile != "":
		return "creds"
	}
	return "none"
}

// TLS reports whether s configures TLS.
func (s Security) TLS() bool {
	return s.CAFile != "" || s.CertFile != "" || s.KeyFile != "" || s.ServerName != ""
}

// Validate checks s without connecting: one authentication method at
// most, a password only with a user, a certificate only with its key, and
// every named file readable. Errors wrap ErrBadSecurity and name the field.
func (s Security) Validate() error {
	methods := 0
	for _, set := range []bool{s.User != "", s.Token != "", s.NKeySeedFile != "", s.CredsFile != ""} {
		if set {
			methods++
		}
	}
	switch {
	case methods > 1:
		return fmt.Errorf("%w: user/password, token, nkey seed and creds file exclude each other", ErrBadSecurity)
	case s.Password != "" && s.User == "":
		return fmt.Errorf("%w: a password needs a user", ErrBadSecurity)
	case (s.CertFile == "") != (s.KeyFile == ""):
		return fmt.Errorf("%w: a client certificate needs its key and a key its certificate", ErrBadSecurity)
	}
	for _, f := range []struct{ what, path string }{
		{"nkey seed file", s.NKeySeedFile}, {"creds file", s.CredsFile}, {"CA file", s.CAFile},
		{"client certificate", s.CertFile}, {"client key", s.KeyFile},
	} {
		if f.path == "" {
			continue
		}
		fh, err := os.Open(f.path)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrBadSecurity, f.what, err)
		}
		fh.Close()
	}
	return nil
}

// Options validates s and returns the nats.go options that apply it: the
// credentials, and a TLS configuration (minimum TLS 1.2) with the CA pool,
// client certificate and server name loaded now, so a bad PEM file fails
// here with its name rather than on every reconnect.
func (s Security) Options() ([]nats.Option, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var opts []nats.Option
	switch s.AuthMethod() {
	case "user":
		opts = append(opts, nats.UserInfo(s.User, s.Password))
	case "token":
		opts = append(opts, nats.Token(s.Token))
	case "nkey":
		o, err := nats.NkeyOptionFromSeed(s.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("%w: nkey seed file %s: %w", ErrBadSecurity, s.NKeySeedFile, err)
		}
		opts = append(opts, o)
	case "creds":
		// nats.go reads the file on every (re)connect, so a rotated creds
		// file is picked up without a restart.
		opts = append(opts, nats.UserCredentials(s.CredsFile))
	}
	if s.TLS() {
		cfg, err := s.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(cfg))
	}
	return opts, nil
}

// tlsConfig loads the CA pool and client certificate.
func (s Security) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: CA file: %w", ErrBadSecurity, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: CA file %s: no PEM certificate in it", ErrBadSecurity, s.CAFile)
		}
		cfg.RootCAs = pool
	}
	if s.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: client certificate %s / key %s: %w", ErrBadSecurity, s.CertFile, s.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
