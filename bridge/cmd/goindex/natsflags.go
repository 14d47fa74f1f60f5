package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/goindex/goindex/bridge/natslink"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/nats-io/nats.go"
)

// natsSecurityUsage is the usage paragraph of the --nats-* group, appended
// to the synopsis of every command that connects.
const natsSecurityUsage = `
NATS security (with --nats; refused credentials and failed TLS stop the
command at once, an unreachable server is retried):
  one of --nats-user/--nats-password, --nats-token, --nats-nkey SEEDFILE,
  --nats-creds FILE; TLS with --nats-ca, --nats-cert/--nats-key (mutual TLS),
  --nats-server-name. Prefer GOINDEX_NATS_PASSWORD / GOINDEX_NATS_TOKEN or
  --config for secrets.`

// natsFlags are the connection flags every command that talks to NATS
// shares (relay, consume, record): where NATS is, or the embedded server
// to start instead, the subject prefix, and the security group.
type natsFlags struct {
	url, listen, store, prefix *string
	sec                        natsSecurityFlags
}

func addNATSFlags(fs *flag.FlagSet) natsFlags {
	return natsFlags{
		url:    fs.String("nats", "", "NATS URL, or several comma-separated (empty: start an embedded nats-server with JetStream)"),
		listen: fs.String("listen", "127.0.0.1:4222", "embedded server: client address (port 0: a free one)"),
		store:  fs.String("store", "", "embedded server: JetStream store directory (empty: a temporary one)"),
		prefix: fs.String("prefix", relay.DefaultPrefix, "first subject token(s) of every goindex subject and asset name ([A-Za-z0-9_-] tokens joined by dots)"),
		sec:    addNATSSecurityFlags(fs),
	}
}

// natsSecurityFlags are the authentication and TLS flags of a NATS client.
type natsSecurityFlags struct {
	user, password, token, nkey, creds, ca, cert, key, serverName *string
}

// addNATSSecurityFlags defines the --nats-* security flags on fs. Secrets
// are better given as GOINDEX_NATS_PASSWORD / GOINDEX_NATS_TOKEN or in the
// --config file than on a command line other users can read.
func addNATSSecurityFlags(fs *flag.FlagSet) natsSecurityFlags {
	return natsSecurityFlags{
		user:       fs.String("nats-user", "", "NATS auth: user name (with --nats-password)"),
		password:   fs.String("nats-password", "", "NATS auth: password (prefer GOINDEX_NATS_PASSWORD or --config)"),
		token:      fs.String("nats-token", "", "NATS auth: bearer token (prefer GOINDEX_NATS_TOKEN or --config)"),
		nkey:       fs.String("nats-nkey", "", "NATS auth: `file` holding an NKey user seed (SU…)"),
		creds:      fs.String("nats-creds", "", "NATS auth: .creds `file` (user JWT and seed, operator mode)"),
		ca:         fs.String("nats-ca", "", "NATS TLS: PEM `file` of the CAs that sign the server (empty: system roots)"),
		cert:       fs.String("nats-cert", "", "NATS TLS: client certificate PEM `file` (mutual TLS, with --nats-key)"),
		key:        fs.String("nats-key", "", "NATS TLS: client private key PEM `file` (with --nats-cert)"),
		serverName: fs.String("nats-server-name", "", "NATS TLS: name the server certificate must carry (empty: the URL's host)"),
	}
}

// security returns the flags as a natslink.Security.
func (s natsSecurityFlags) security() natslink.Security {
	return natslink.Security{User: *s.user, Password: *s.password, Token: *s.token, NKeySeedFile: *s.nkey,
		CredsFile: *s.creds, CAFile: *s.ca, CertFile: *s.cert, KeyFile: *s.key, ServerName: *s.serverName}
}

// validate checks the flag combinations, naming the flags: one
// authentication method, certificate with key, and no security flags for
// the embedded server (it runs without authentication on --listen).
func (s natsSecurityFlags) validate(url string) error {
	given := map[string]string{"--nats-user": *s.user, "--nats-password": *s.password, "--nats-token": *s.token,
		"--nats-nkey": *s.nkey, "--nats-creds": *s.creds, "--nats-ca": *s.ca, "--nats-cert": *s.cert,
		"--nats-key": *s.key, "--nats-server-name": *s.serverName}
	var set []string
	for _, name := range []string{"--nats-user", "--nats-password", "--nats-token", "--nats-nkey", "--nats-creds",
		"--nats-ca", "--nats-cert", "--nats-key", "--nats-server-name"} {
		if given[name] != "" {
			set = append(set, name)
		}
	}
	if url == "" && len(set) > 0 {
		return fmt.Errorf("%s given without --nats (the embedded server has no authentication or TLS): %w",
			strings.Join(set, ", "), errUsage)
	}
	var methods []string
	for _, name := range []string{"--nats-user", "--nats-token", "--nats-nkey", "--nats-creds"} {
		if given[name] != "" {
			methods = append(methods, name)
		}
	}
	switch {
	case len(methods) > 1:
		return fmt.Errorf("%s exclude each other (one authentication method): %w", strings.Join(methods, " and "), errUsage)
	case *s.password != "" && *s.user == "":
		return fmt.Errorf("--nats-password needs --nats-user: %w", errUsage)
	case (*s.cert == "") != (*s.key == ""):
		return fmt.Errorf("--nats-cert and --nats-key go together: %w", errUsage)
	}
	if err := s.security().Validate(); err != nil {
		return fmt.Errorf("%v: %w", err, errUsage)
	}
	return nil
}

// validPrefixFlag checks --prefix with relay.ValidPrefix, naming the flag.
func validPrefixFlag(p string) error {
	if err := relay.ValidPrefix(p); err != nil {
		return fmt.Errorf("--prefix: %v: %w", err, errUsage)
	}
	return nil
}

// connect opens the NATS connection, starting an embedded server first when
// no URL is given; the returned function closes both. Bad security flags
// are usage errors; refused credentials and failed TLS name the flags to
// check.
func (f natsFlags) connect(name string, log *slog.Logger) (*nats.Conn, func(), error) {
	url := *f.url
	if err := f.sec.validate(url); err != nil {
		return nil, nil, err
	}
	if f.prefix != nil && *f.prefix != "" {
		if err := validPrefixFlag(*f.prefix); err != nil {
			return nil, nil, err
		}
	}
	var srv *natslink.Server
	if url == "" {
		host, port, err := splitHostPort(*f.listen)
		if err != nil {
			return nil, nil, err
		}
		srv, err = natslink.Start(natslink.ServerConfig{Host: host, Port: port, JetStream: true, StoreDir: *f.store})
		if err != nil {
			return nil, nil, err
		}
		url = srv.ClientURL()
		log.Info("embedded nats-server up", "url", url, "jetstream", true)
	}
	nc, err := natslink.ConnectSecure(url, name, f.sec.security(), log)
	if err != nil {
		if srv != nil {
			srv.Shutdown()
		}
		switch {
		case errors.Is(err, natslink.ErrAuth):
			err = fmt.Errorf("%w (check --nats-user/--nats-password, --nats-token, --nats-nkey or --nats-creds)", err)
		case errors.Is(err, natslink.ErrTLS):
			err = fmt.Errorf("%w (check --nats-ca, --nats-cert/--nats-key and --nats-server-name)", err)
		}
		return nil, nil, err
	}
	return nc, func() {
		nc.Close()
		if srv != nil {
			srv.Shutdown()
		}
	}, nil
}

func splitHostPort(addr string) (string, int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("--listen %q: want host:port: %w", addr, errUsage)
	}
	var port int
	if _, err := fmt.Sscanf(addr[i+1:], "%d", &port); err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("--listen %q: bad port: %w", addr, errUsage)
	}
	return addr[:i], port, nil
}
