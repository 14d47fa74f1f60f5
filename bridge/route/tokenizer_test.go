package route

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// tokenizerChildEnv makes the test binary act as a tokenizer command (see
// TestMain): its value is the mode.
const tokenizerChildEnv = "GOINDEX_ROUTE_TOKENIZER_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(tokenizerChildEnv); mode != "" {
		os.Exit(tokenizerChild(mode))
	}
	os.Exit(m.Run())
}

// tokenizerChild is a tokenizer command: every byte of the prompt (or of
// the messages JSON) becomes one token id. Modes other than "bytes"
// misbehave on purpose.
func tokenizerChild(mode string) int {
	var in TokenizeInput
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "bad input:", err)
		return 2
	}
	switch mode {
	case "fail":
		fmt.Fprintln(os.Stderr, "model not loaded")
		return 3
	case "huge":
		os.Stdout.WriteString(`{"tokens":[` + strings.Repeat("1,", MaxTokenizerReplyBytes/2) + `1]}`)
		return 0
	case "slow":
		time.Sleep(time.Minute)
		return 0
	}
	text := string(in.Messages)
	if in.Prompt != nil {
		text = *in.Prompt
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"token_ids": byteTokens(text)})
	return 0
}

func byteTokens(s string) []uint32 {
	out := make([]uint32, len(s))
	for i := range len(s) {
		out[i] = uint32(s[i])
	}
	return out
}

func TestCommandTokenizer_RoutesTextByCache(t *testing.T) {
	t.Setenv(tokenizerChildEnv, "bytes")
	tok, err := NewCommandTokenizer([]string{os.Args[0]}, 10*time.Second, 2, 0)
	if err != nil {
		t.Fatalf("NewCommandTokenizer: %v", err)
	}
	text := strings.Repeat("the quick brown fox ", 205) // 4100 bytes: 256 full blocks
	s := setupTwoDCs(t, func(c *Config) { c.Tokenizer = tok })
	s.fx.cache(1, hasher(t, "", ""), byteTokens(text))
	body, _ := json.Marshal(map[string]any{"model": "m", "prompt": text})
	resp, got := s.post(body, nil)
	if resp.StatusCode != 200 || resp.Header.Get(HeaderDC) != "far" || resp.Header.Get(HeaderCachedTokens) != "4096" {
		t.Errorf("command-tokenized text: status %d dc %q cached %q (%s), want far with 4096 cached",
			resp.StatusCode, resp.Header.Get(HeaderDC), resp.Header.Get(HeaderCachedTokens), got)
	}
}

func TestCommandTokenizer_Failures(t *testing.T) {
	prompt := "hello"
	in := &TokenizeInput{Model: "m", Prompt: &prompt}
	for _, c := range []struct {
		mode, msg string
		timeout   time.Duration
	}{
		{"fail", "model not loaded", 10 * time.Second},
		{"huge", "reply over", 10 * time.Second},
		{"slow", "signal: killed", 200 * time.Millisecond},
	} {
		t.Setenv(tokenizerChildEnv, c.mode)
		tok, err := NewCommandTokenizer([]string{os.Args[0]}, c.timeout, 1, 0)
		if err != nil {
			t.Fatalf("NewCommandTokenizer: %v", err)
		}
		if _, err := tok.Tokenize(context.Background(), in); !errors.Is(err, ErrTokenizer) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("mode %s: Tokenize = %v, want ErrTokenizer saying %q", c.mode, err, c.msg)
		}
	}
	t.Setenv(tokenizerChildEnv, "bytes")
	tok, _ := NewCommandTokenizer([]string{os.Args[0]}, 10*time.Second, 1, 3)
	if _, err := tok.Tokenize(context.Background(), in); !errors.Is(err, ErrTooManyTokens) {
		t.Errorf("5 tokens over a limit of 3: Tokenize = %v, want ErrTooManyTokens", err)
	}
	if _, err := NewCommandTokenizer(nil, 0, 0, 0); !errors.Is(err, ErrBadConfig) {
		t.Errorf("NewCommandTokenizer(no argv) = %v, want ErrBadConfig", err)
	}
}

func TestHTTPTokenizer_StatusAndLimits(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in TokenizeInput
		json.NewDecoder(r.Body).Decode(&in)
		if in.Prompt == nil || *in.Prompt != "ok" {
			http.Error(w, "no such model", http.StatusNotFound)
			return
		}
		w.Write([]byte(`{"tokens":[1,2,3]}`))
	}))
	t.Cleanup(srv.Close)
	tok, err := NewHTTPTokenizer(srv.URL, 0, 0)
	if err != nil {
		t.Fatalf("NewHTTPTokenizer: %v", err)
	}
	ok, bad := "ok", "nope"
	if ids, err := tok.Tokenize(context.Background(), &TokenizeInput{Prompt: &ok}); err != nil || !slices.Equal(ids, []uint32{1, 2, 3}) {
		t.Errorf("Tokenize(ok) = %v, %v, want [1 2 3]", ids, err)
	}
	if _, err := tok.Tokenize(context.Background(), &TokenizeInput{Prompt: &bad}); !errors.Is(err, ErrTokenizer) || !strings.Contains(err.Error(), "404") {
		t.Errorf("Tokenize(404) = %v, want ErrTokenizer naming the status", err)
	}
	for _, u := range []string{"", "ftp://x", "/tokenize"} {
		if _, err := NewHTTPTokenizer(u, 0, 0); !errors.Is(err, ErrBadConfig) {
			t.Errorf("NewHTTPTokenizer(%q) = %v, want ErrBadConfig", u, err)
		}
	}
}
