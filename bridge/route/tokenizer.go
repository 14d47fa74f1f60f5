package route

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Tokenizer limits and defaults.
const (
	// MaxTokenizerReplyBytes bounds a tokenizer's reply: 2^20 token ids of
	// up to 10 digits and a separator, with room for other fields.
	MaxTokenizerReplyBytes = 16 << 20
	// maxTokenizerStderrBytes bounds the stderr of a tokenizer command kept
	// for its error message.
	maxTokenizerStderrBytes = 4096
	// DefaultTokenizerTimeout bounds one tokenizer call.
	DefaultTokenizerTimeout = 2 * time.Second
	// DefaultTokenizerProcesses bounds concurrent tokenizer commands.
	DefaultTokenizerProcesses = 8
)

// Tokenizer is the hook that turns a text prompt into the token ids the DCs'
// engines will hash, so text requests can be routed by cache. It must
// tokenize exactly as the engines do (same tokenizer, same chat template,
// same special tokens), or the hashes match nothing. It is called
// concurrently. An error routes the request load-only.
type Tokenizer interface {
	Tokenize(ctx context.Context, in *TokenizeInput) ([]uint32, error)
}

// TokenizeInput is the hook's request, sent as this JSON object: vLLM's
// /tokenize request shape, so a vLLM server's /tokenize endpoint answers it
// directly. A completion sends {"model", "prompt"}; a chat sends {"model",
// "messages", "add_generation_prompt": true} with the request's messages
// verbatim.
type TokenizeInput struct {
	Model               string          `json:"model,omitempty"`
	Prompt              *string         `json:"prompt,omitempty"`
	Messages            json.RawMessage `json:"messages,omitempty"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt,omitempty"`
}

// tokenizeInput returns the hook's input for r, or nil when r has no text.
func tokenizeInput(r *Request) *TokenizeInput {
	switch {
	case r.HasText:
		text := r.Text
		return &TokenizeInput{Model: r.Model, Prompt: &text}
	case r.Messages != nil:
		yes := true
		return &TokenizeInput{Model: r.Model, Messages: r.Messages, AddGenerationPrompt: &yes}
	}
	return nil
}

// DecodeTokenizerReply decodes a tokenizer's reply of at most
// MaxTokenizerReplyBytes: a JSON object whose "tokens" (vLLM's /tokenize
// reply) or "token_ids" field is the list of u32 token ids, at most
// maxTokens of them. Other fields are ignored.
func DecodeTokenizerReply(b []byte, maxTokens int) ([]uint32, error) {
	if len(b) > MaxTokenizerReplyBytes {
		return nil, fmt.Errorf("%w: reply of %d bytes, limit %d", ErrTokenizer, len(b), MaxTokenizerReplyBytes)
	}
	var reply struct {
		Tokens   json.RawMessage `json:"tokens"`
		TokenIDs json.RawMessage `json:"token_ids"`
	}
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("%w: reply is not a JSON object", ErrTokenizer)
	}
	if err := json.Unmarshal(b, &reply); err != nil {
		return nil, fmt.Errorf("%w: reply: %v", ErrTokenizer, err)
	}
	raw := reply.TokenIDs
	if isAbsent(raw) {
		raw = reply.Tokens
	}
	if isAbsent(raw) {
		return nil, fmt.Errorf("%w: reply has neither tokens nor token_ids", ErrTokenizer)
	}
	ids, err := decodeIDs(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: reply token ids: %v", ErrTokenizer, err)
	}
	if len(ids) > maxTokens {
		return nil, fmt.Errorf("%w: %d tokens, limit %d", ErrTooManyTokens, len(ids), maxTokens)
	}
	return ids, nil
}

// HTTPTokenizer POSTs the TokenizeInput JSON to a URL and decodes the
// reply with DecodeTokenizerReply; a status other than 200 is an error.
type HTTPTokenizer struct {
	url       string
	client    *http.Client
	timeout   time.Duration
	maxTokens int
}

// NewHTTPTokenizer returns an HTTPTokenizer for rawURL (http or https);
// timeout and maxTokens of 0 take the defaults (2s, DefaultMaxPromptTokens).
func NewHTTPTokenizer(rawURL string, timeout time.Duration, maxTokens int) (*HTTPTokenizer, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: tokenizer url %q must be an absolute http(s) URL", ErrBadConfig, rawURL)
	}
	if timeout < 0 || maxTokens < 0 {
		return nil, fmt.Errorf("%w: tokenizer timeout and token limit must be ≥ 0", ErrBadConfig)
	}
	return &HTTPTokenizer{url: u.String(), client: &http.Client{}, timeout: orDuration(timeout, DefaultTokenizerTimeout),
		maxTokens: orInt(maxTokens, DefaultMaxPromptTokens)}, nil
}

// Tokenize implements Tokenizer.
func (t *HTTPTokenizer) Tokenize(ctx context.Context, in *TokenizeInput) ([]uint32, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTokenizer, err)
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTokenizer, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTokenizer, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxTokenizerReplyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read reply: %v", ErrTokenizer, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s answered %s: %.200s", ErrTokenizer, t.url, resp.Status, b)
	}
	return DecodeTokenizerReply(b, t.maxTokens)
}

// CommandTokenizer runs Argv once per call with the TokenizeInput JSON on
// stdin; the command writes the reply (as DecodeTokenizerReply reads it) on
// stdout and exits 0. At most Processes commands run at once; a call that
// cannot start one before its timeout fails.
type CommandTokenizer struct {
	argv      []string
	timeout   time.Duration
	maxTokens int
	slots     chan struct{}
}

// NewCommandTokenizer returns a CommandTokenizer for argv (program and
// arguments); timeout, processes and maxTokens of 0 take the defaults (2s,
// 8, DefaultMaxPromptTokens).
func NewCommandTokenizer(argv []string, timeout time.Duration, processes, maxTokens int) (*CommandTokenizer, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("%w: tokenizer command is empty", ErrBadConfig)
	}
	if timeout < 0 || processes < 0 || maxTokens < 0 {
		return nil, fmt.Errorf("%w: tokenizer timeout, processes and token limit must be ≥ 0", ErrBadConfig)
	}
	return &CommandTokenizer{
		argv:      append([]string(nil), argv...),
		timeout:   orDuration(timeout, DefaultTokenizerTimeout),
		maxTokens: orInt(maxTokens, DefaultMaxPromptTokens),
		slots:     make(chan struct{}, orInt(processes, DefaultTokenizerProcesses)),
	}, nil
}

// Tokenize implements Tokenizer.
func (t *CommandTokenizer) Tokenize(ctx context.Context, in *TokenizeInput) ([]uint32, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTokenizer, err)
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	select {
	case t.slots <- struct{}{}:
		defer func() { <-t.slots }()
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: no free tokenizer process: %v", ErrTokenizer, ctx.Err())
	}
	cmd := exec.CommandContext(ctx, t.argv[0], t.argv[1:]...)
	cmd.Stdin = bytes.NewReader(body)
	stdout := &cappedBuffer{limit: MaxTokenizerReplyBytes}
	stderr := &cappedBuffer{limit: maxTokenizerStderrBytes, truncate: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		if stdout.over {
			return nil, fmt.Errorf("%w: %s: reply over %d bytes", ErrTokenizer, t.argv[0], MaxTokenizerReplyBytes)
		}
		return nil, fmt.Errorf("%w: %s: %v: %s", ErrTokenizer, t.argv[0], err, strings.TrimSpace(stderr.buf.String()))
	}
	return DecodeTokenizerReply(stdout.buf.Bytes(), t.maxTokens)
}

// errCapped stops copying a command's output past its cap.
var errCapped = errors.New("output over its cap")

// cappedBuffer keeps at most limit bytes: past it, a write fails and sets
// over (the command's stdout pipe breaks) or, with truncate, is dropped. It
// wraps rather than embeds its buffer so io.Copy cannot bypass Write
// through bytes.Buffer's ReadFrom.
type cappedBuffer struct {
	buf      bytes.Buffer
	limit    int
	truncate bool
	over     bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.buf.Len(); len(p) > room {
		if !b.truncate {
			b.over = true
			return 0, errCapped
		}
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

func orDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func orInt(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// The tokenizer's circuit breaker: after tokenizerTrip failed calls in a
// row the router stops calling the tokenizer for tokenizerCooldown, then
// lets one call through, whose success closes the breaker again.
const (
	tokenizerTrip     = 5
	tokenizerCooldown = 10 * time.Second
)

// errTokenizerSkipped reports a tokenizer call not made: the breaker is
// open (the request goes load-only at once).
var errTokenizerSkipped = errors.New("route: tokenizer skipped while failing")

// guardedTokenizer puts a Tokenizer behind a circuit breaker
// (sony/gobreaker): a tokenizer that is down or hangs would otherwise cost
// every text request its timeout (2 s by default) before the request went
// load-only anyway. A prompt over the token limit and a client that left
// are not the tokenizer's failures and do not count.
type guardedTokenizer struct {
	inner Tokenizer
	cb    *gobreaker.CircuitBreaker[[]uint32]
}

// newGuardedTokenizer wraps t; log receives the breaker's state changes.
func newGuardedTokenizer(t Tokenizer, log *slog.Logger) *guardedTokenizer {
	return &guardedTokenizer{inner: t, cb: gobreaker.NewCircuitBreaker[[]uint32](gobreaker.Settings{
		Name:        "tokenizer",
		MaxRequests: 1,
		Timeout:     tokenizerCooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= tokenizerTrip },
		IsExcluded: func(err error) bool {
			return errors.Is(err, ErrTooManyTokens) || errors.Is(err, context.Canceled)
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				log.Warn("tokenizer failing; text requests go load-only without calling it", "for", tokenizerCooldown,
					"after_failures_in_a_row", tokenizerTrip)
				return
			}
			log.Info("tokenizer breaker", "from", from.String(), "to", to.String())
		},
	})}
}

// Tokenize implements Tokenizer: the inner tokenizer's answer, or
// errTokenizerSkipped while the breaker is open.
func (g *guardedTokenizer) Tokenize(ctx context.Context, in *TokenizeInput) ([]uint32, error) {
	ids, err := g.cb.Execute(func() ([]uint32, error) { return g.inner.Tokenize(ctx, in) })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return nil, fmt.Errorf("%w: %w", errTokenizerSkipped, err)
	}
	return ids, err
}
