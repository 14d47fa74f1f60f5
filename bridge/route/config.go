package route

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/score"
	"github.com/zeebo/xxh3"
)

// Defaults and bounds of Config.
const (
	// DefaultBlockSize is vLLM's and Dynamo's default KV block size.
	DefaultBlockSize = 16
	// DefaultMaxStaleness is how old a load report or RTT sample may be:
	// relays report load and consumers ping every second, so 5 s is four
	// missed updates.
	DefaultMaxStaleness = 5 * time.Second
	// DefaultMaxBodyBytes bounds a buffered request body (8 MiB holds a
	// 1M-token id list written compactly, or ~2M characters of text).
	DefaultMaxBodyBytes = 8 << 20
	// DefaultMaxPromptTokens bounds a prompt's token ids (in the request
	// or from the tokenizer).
	DefaultMaxPromptTokens = 1 << 20
	// DefaultConnectTimeout bounds one TCP connect to a DC frontend, and
	// for https its TLS handshake; past it the next DC is tried.
	DefaultConnectTimeout = 2 * time.Second
	// DefaultResponseTimeout bounds the wait for a DC's response headers:
	// queueing plus prefill for a stream, but the whole generation for a
	// request without "stream": true, whose headers come with its last
	// token; 0 in Config means this. It matches the OpenAI Python client's
	// default request timeout (600 s), so the router does not cut a
	// generation its client is still waiting for.
	DefaultResponseTimeout = 10 * time.Minute
	// DefaultIdleTimeout bounds the silence of a DC's response body once
	// its headers came: a stream whose DC stops sending mid-way is cut
	// after it rather than left hanging until the client gives up. It
	// bounds each write to the client too: one that stops reading is cut.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultBodyTimeout bounds reading a client's request body, from the
	// end of its headers; the headers themselves must come within
	// min(10 s, BodyTimeout).
	DefaultBodyTimeout = 30 * time.Second
	// DefaultReplicaPoll is how often Serve re-attaches a missing replica
	// file or checks the attached one for a newer generation.
	DefaultReplicaPoll = time.Second
	// DefaultShutdownGrace is how long Serve lets in-flight requests (and
	// streams) finish after its context ends.
	DefaultShutdownGrace = 10 * time.Second
	// MaxDCs is the most DCs a router forwards to (a replica's lane limit).
	MaxDCs = 64
	// MaxDCNameBytes bounds a DC name.
	MaxDCNameBytes = 64
)

// DC is one data center the router forwards to: its id (the replica lane's
// DC id, as the relay and consumer are configured), its name (shown in
// X-Goindex-DC) and the base URL of its OpenAI-compatible frontend.
type DC struct {
	ID   uint64
	Name string
	URL  *url.URL
}

// DCID returns the DC id a DC named name has when its spec gives no
// explicit id: XXH3-64 of the name's bytes, seed 0. Configure the relay's
// and consumer's DC ids with the same function (or give explicit ids on
// both sides) so the router finds each DC's replica lane.
func DCID(name string) uint64 { return xxh3.HashString(name) }

// ParseDC parses a DC spec "NAME=URL" (id DCID(NAME)) or "ID:NAME=URL"
// (explicit decimal id, as `goindex consume --dc` takes them). NAME is
// 1..MaxDCNameBytes of [A-Za-z0-9_.-]; URL is an absolute http or https
// URL without query or fragment (a path is a prefix for every forwarded
// path).
func ParseDC(spec string) (DC, error) {
	head, rawURL, ok := strings.Cut(spec, "=")
	if !ok {
		return DC{}, fmt.Errorf("%w: dc %q: want NAME=URL or ID:NAME=URL", ErrBadConfig, spec)
	}
	var dc DC
	if idText, name, ok := strings.Cut(head, ":"); ok {
		id, err := strconv.ParseUint(idText, 10, 64)
		if err != nil || id == 0 {
			return DC{}, fmt.Errorf("%w: dc %q: id %q must be a non-zero decimal u64", ErrBadConfig, spec, idText)
		}
		dc.ID, dc.Name = id, name
	} else {
		dc.Name = head
		dc.ID = DCID(head)
	}
	if err := checkName(dc.Name); err != nil {
		return DC{}, fmt.Errorf("%w: dc %q: %v", ErrBadConfig, spec, err)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return DC{}, fmt.Errorf("%w: dc %q: %v", ErrBadConfig, spec, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return DC{}, fmt.Errorf("%w: dc %q: url must be http(s)://host[:port][/prefix] without credentials, query or fragment", ErrBadConfig, spec)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	dc.URL = u
	return dc, nil
}

// String returns the spec ParseDC reads back: "ID:NAME=URL".
func (d DC) String() string {
	return strconv.FormatUint(d.ID, 10) + ":" + d.Name + "=" + d.URL.String()
}

func checkName(name string) error {
	if name == "" || len(name) > MaxDCNameBytes {
		return fmt.Errorf("name must be 1..%d bytes", MaxDCNameBytes)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("name byte %q is not one of [A-Za-z0-9_.-]", c)
		}
	}
	return nil
}

// Config configures a Router.
type Config struct {
	// ReplicaPath is the shared-memory replica file `goindex consume`
	// writes; optional; default: none (every request is routed without
	// signals: degraded, or 503 with FailClosed, except under round-robin
	// and single-dc, which need none).
	ReplicaPath string
	// DCs are the DCs forwarded to, in preference order for ties and
	// fallbacks; 1..MaxDCs with distinct ids and names; required.
	DCs []DC
	// Score configures the scorer: policy (default ttft), throughput model,
	// credit, Home (a DC id, for single-dc). BlockSize is ignored: the
	// router's BlockSize is used.
	Score score.Config
	// PriceOthers makes the ttft policy also price the wait a request's
	// prefill adds for the requests behind it, at the fleet's utilization
	// the router measures from the prefill work it sends (score.Demand);
	// optional; default: false (each request's own TTFT only).
	PriceOthers bool
	// Calibrate makes the ttft policy also scale each DC's queue and
	// prefill estimates by the compute factor the router learns from the
	// first-token times of the streams it relays (score.Calibration); the
	// DCs' KV hold time (score.Holding) and residence, from the streams'
	// ends, are learned and used regardless. optional; default: false (see score.Calibration and
	// BENCHMARKS.md for why it is opt-in).
	Calibrate bool
	// Temperature is the routing temperature (dynamo-compat §4.3); optional;
	// default: 0 (minimum cost, ties at random).
	Temperature float64
	// BlockSize is the KV block size in tokens the DCs' engines hash with;
	// optional; default: 16.
	BlockSize int
	// LoRAHeader and NamespaceHeader name request headers that carry the
	// LoRA adapter and the cache namespace salting the hashes when the body
	// has no lora_name / cache_salt; optional; default: none.
	LoRAHeader, NamespaceHeader string
	// MaxStaleness is the age past which a DC's load report or RTT sample
	// counts as missing; optional; default: 5s.
	MaxStaleness time.Duration
	// Tokenizer turns text prompts into token ids; optional; default: none
	// (text prompts are routed load-only).
	Tokenizer Tokenizer
	// MaxBodyBytes bounds a request body; optional; default: 8 MiB.
	MaxBodyBytes int64
	// MaxPromptTokens bounds a prompt's token ids; optional; default: 2^20.
	MaxPromptTokens int
	// TLS is the client TLS configuration for https DCs (root CAs, client
	// certificates); the router sets the server name and HTTP/1.1 on a
	// copy; optional; default: the system's roots.
	TLS *tls.Config
	// ConnectTimeout bounds one connect to a DC, and for an https DC its
	// TLS handshake too; optional; default: 2s.
	ConnectTimeout time.Duration
	// ResponseTimeout bounds the wait for a DC's response headers (for a
	// request that does not stream, the whole generation); past it the
	// client gets 504 and the request is not retried; optional; default:
	// 10m.
	ResponseTimeout time.Duration
	// IdleTimeout bounds the wait for the next bytes of a DC's response
	// body (a stream's next event); past it the DC's request is cancelled
	// and the client's connection aborted, so a cut stream never looks
	// complete. It also bounds each write of the answer to a client that
	// stops reading, with the same outcome; optional; default: 2m.
	IdleTimeout time.Duration
	// BodyTimeout bounds reading a request: its headers within
	// min(10s, BodyTimeout), then its whole body within BodyTimeout, read
	// or not (a refused request's body is drained under the same
	// deadline); past it the client gets 408 (ErrSlowBody) and the
	// connection is closed; optional; default: 30s.
	BodyTimeout time.Duration
	// ReplicaPoll is Serve's re-attach period; optional; default: 1s.
	ReplicaPoll time.Duration
	// ShutdownGrace bounds Serve's graceful shutdown; optional; default: 10s.
	ShutdownGrace time.Duration
	// Logger receives attach, fallback and tokenizer logs; optional;
	// default: discard.
	Logger *slog.Logger
	// FailClosed answers 503 (ErrNoEligibleDC) when no DC has the fresh
	// signals the policy needs, and tries only eligible DCs, as before
	// fail-open routing (`--on-stale=fail`); optional; default: false (fail
	// open: route on the last known load and RTT, then on DefaultDC, and
	// say so in HeaderDegraded).
	FailClosed bool
	// DefaultDC names the DC a degraded request goes to when no DC has any
	// load or RTT known; it is also the first tried of the DCs the policy
	// found ineligible; optional; default: the first of DCs.
	DefaultDC string
	// Observe, when set, is called once for every completion request a DC
	// answered, with the decision and the choice that served it (the
	// metrics' routing decisions and cost parts). It runs on the request's
	// goroutine before the answer is relayed, so it must be quick; it must
	// not keep d or served. Optional; default: none.
	Observe func(d *Decision, served *Choice)
}

func (c *Config) setDefaults() error {
	if len(c.DCs) == 0 || len(c.DCs) > MaxDCs {
		return fmt.Errorf("%w: %d DCs, want 1..%d", ErrBadConfig, len(c.DCs), MaxDCs)
	}
	ids, names := map[uint64]bool{}, map[string]bool{}
	for _, dc := range c.DCs {
		if dc.ID == 0 || dc.URL == nil || checkName(dc.Name) != nil {
			return fmt.Errorf("%w: dc %q needs a non-zero id, a valid name and a URL", ErrBadConfig, dc.Name)
		}
		if ids[dc.ID] || names[dc.Name] {
			return fmt.Errorf("%w: dc %q (id %d) listed twice", ErrBadConfig, dc.Name, dc.ID)
		}
		ids[dc.ID], names[dc.Name] = true, true
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.BlockSize < 0 || c.BlockSize > dynamo.MaxBlockSize {
		return fmt.Errorf("%w: block size %d, want 1..%d", ErrBadConfig, c.BlockSize, dynamo.MaxBlockSize)
	}
	if c.Temperature < 0 {
		return fmt.Errorf("%w: temperature %g must be ≥ 0", ErrBadConfig, c.Temperature)
	}
	if c.DefaultDC == "" {
		c.DefaultDC = c.DCs[0].Name
	}
	if !names[c.DefaultDC] {
		return fmt.Errorf("%w: default DC %q is not among the DCs", ErrBadConfig, c.DefaultDC)
	}
	if c.Score.Policy == score.SingleDC && !ids[c.Score.Home] {
		return fmt.Errorf("%w: single-dc needs a home DC among the DCs (home id %d)", ErrBadConfig, c.Score.Home)
	}
	for _, d := range []struct {
		p    *time.Duration
		def  time.Duration
		what string
	}{
		{&c.MaxStaleness, DefaultMaxStaleness, "max staleness"},
		{&c.ConnectTimeout, DefaultConnectTimeout, "connect timeout"},
		{&c.ResponseTimeout, DefaultResponseTimeout, "response timeout"},
		{&c.IdleTimeout, DefaultIdleTimeout, "idle timeout"},
		{&c.BodyTimeout, DefaultBodyTimeout, "body timeout"},
		{&c.ReplicaPoll, DefaultReplicaPoll, "replica poll"},
		{&c.ShutdownGrace, DefaultShutdownGrace, "shutdown grace"},
	} {
		if *d.p < 0 {
			return fmt.Errorf("%w: %s %v must be ≥ 0", ErrBadConfig, d.what, *d.p)
		}
		if *d.p == 0 {
			*d.p = d.def
		}
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxPromptTokens == 0 {
		c.MaxPromptTokens = DefaultMaxPromptTokens
	}
	if c.MaxBodyBytes < 0 || c.MaxPromptTokens < 0 {
		return fmt.Errorf("%w: body and prompt limits must be > 0", ErrBadConfig)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
