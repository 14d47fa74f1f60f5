package route

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// Endpoint is an OpenAI-compatible endpoint the router routes by prompt.
type Endpoint uint8

// The routed endpoints.
const (
	// Completions is POST /v1/completions (prompt: text, token ids, or a
	// batch of either).
	Completions Endpoint = iota + 1
	// ChatCompletions is POST /v1/chat/completions (messages).
	ChatCompletions
)

// Request is what the router reads from a completion request body; the body
// itself is forwarded unchanged.
type Request struct {
	Endpoint Endpoint
	Model    string
	Stream   bool
	// Tokens are the prompt's token ids when the request carries them
	// (HasTokens): nvext.token_data, then prompt_token_ids, then a token-id
	// prompt of /v1/completions, in that order of precedence.
	Tokens    []uint32
	HasTokens bool
	// Text is a text prompt of /v1/completions (HasText), for the
	// tokenizer.
	Text    string
	HasText bool
	// Messages is the raw JSON array of /v1/chat/completions, for the
	// tokenizer; nil when absent.
	Messages json.RawMessage
	// LoRA and Namespace are the body's lora_name and cache_salt; the
	// router's headers fill them when empty.
	LoRA, Namespace string
}

// wireRequest is the part of an OpenAI request body the router reads.
// prompt_token_ids and nvext.token_data are [unverified] carriers of token
// ids: nvext.token_data is Dynamo's documented pre-tokenized field (u32[]);
// prompt_token_ids is the name vLLM's engine-side prompts use; neither is
// checked against a live frontend.
type wireRequest struct {
	Model          string          `json:"model"`
	Stream         bool            `json:"stream"`
	Prompt         json.RawMessage `json:"prompt"`
	Messages       json.RawMessage `json:"messages"`
	PromptTokenIDs json.RawMessage `json:"prompt_token_ids"`
	NVExt          *struct {
		TokenData json.RawMessage `json:"token_data"`
	} `json:"nvext"`
	LoRAName  string `json:"lora_name"`
	CacheSalt string `json:"cache_salt"`
}

// ParseRequest reads the routing fields of a completion request body of at
// most maxTokens prompt tokens. The body must be one JSON object; a field
// of the wrong type is ErrMalformed; more token ids than maxTokens is
// ErrTooManyTokens. The caller bounds len(body) (Config.MaxBodyBytes)
// before reading it. A batch prompt (a list of prompts) is routed by its
// first element.
func ParseRequest(ep Endpoint, body []byte, maxTokens int) (*Request, error) {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("%w: body must be a JSON object", ErrMalformed)
	}
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("%w: body is not valid JSON of the endpoint's shape: %v", ErrMalformed, err)
	}
	r := &Request{Endpoint: ep, Model: w.Model, Stream: w.Stream, LoRA: w.LoRAName, Namespace: w.CacheSalt}
	switch ep {
	case Completions:
		if err := r.readPrompt(w.Prompt); err != nil {
			return nil, err
		}
	case ChatCompletions:
		if m := bytes.TrimSpace(w.Messages); len(m) > 0 && !bytes.Equal(m, []byte("null")) {
			if m[0] != '[' {
				return nil, fmt.Errorf("%w: messages must be an array", ErrMalformed)
			}
			r.Messages = m
		}
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"prompt_token_ids", w.PromptTokenIDs}, {"nvext.token_data", w.tokenData()}} {
		if isAbsent(f.raw) {
			continue
		}
		ids, err := decodeIDs(f.raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %s must be a list of u32 token ids: %v", ErrMalformed, f.name, err)
		}
		r.Tokens, r.HasTokens, r.HasText = ids, true, false
	}
	if len(r.Tokens) > maxTokens {
		return nil, fmt.Errorf("%w: %d prompt tokens, limit %d", ErrTooManyTokens, len(r.Tokens), maxTokens)
	}
	return r, nil
}

// readPrompt reads /v1/completions' prompt: a string, a list of token ids,
// a list of strings or a list of token-id lists (the first one routes).
func (r *Request) readPrompt(raw json.RawMessage) error {
	if isAbsent(raw) {
		return nil
	}
	p := bytes.TrimSpace(raw)
	bad := func(err error) error {
		return fmt.Errorf("%w: prompt must be a string, a list of token ids, or a list of either: %v", ErrMalformed, err)
	}
	switch p[0] {
	case '"':
		if err := json.Unmarshal(p, &r.Text); err != nil {
			return bad(err)
		}
		r.HasText = true
		return nil
	case '[':
	default:
		return bad(fmt.Errorf("got %.20q", p))
	}
	// p is valid JSON (the body decoded), so the byte after '[' tells the
	// form: decoding into []json.RawMessage to look would allocate once
	// per token id (BenchmarkForward).
	rest := bytes.TrimLeft(p[1:], " \t\r\n")
	if len(rest) == 0 || rest[0] == ']' {
		return nil
	}
	switch rest[0] {
	case '"':
		var texts []string
		if err := json.Unmarshal(p, &texts); err != nil {
			return bad(err)
		}
		r.Text, r.HasText = texts[0], true
	case '[':
		if bytes.Contains(p, []byte("null")) {
			return bad(fmt.Errorf("null among the token ids"))
		}
		var lists [][]uint32
		if err := json.Unmarshal(p, &lists); err != nil {
			return bad(err)
		}
		r.Tokens, r.HasTokens = lists[0], true
	default:
		ids, err := decodeIDs(p)
		if err != nil {
			return bad(err)
		}
		r.Tokens, r.HasTokens = ids, true
	}
	return nil
}

func (w *wireRequest) tokenData() json.RawMessage {
	if w.NVExt == nil {
		return nil
	}
	return w.NVExt.TokenData
}

// isAbsent reports a field that is missing or null.
func isAbsent(raw json.RawMessage) bool {
	p := bytes.TrimSpace(raw)
	return len(p) == 0 || bytes.Equal(p, []byte("null"))
}

// decodeIDs decodes a JSON array of u32 token ids. It scans the array
// itself, over 10x faster than encoding/json on a 1024-token prompt
// (BenchmarkDecodeIDs, BENCHMARKS.md), and asks encoding/json only to word the error of a
// list it refuses; TestDecodeIDs_MatchesEncodingJSON and FuzzDecodeIDs hold
// the two to the same answers. encoding/json would read a null element as
// 0; this refuses it.
func decodeIDs(raw []byte) ([]uint32, error) {
	if ids, ok := scanIDs(raw); ok {
		return ids, nil
	}
	if bytes.Contains(raw, []byte("null")) {
		return nil, fmt.Errorf("null among the token ids")
	}
	var ids []uint32
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("not a list of u32 token ids")
}

// scanIDs parses raw as exactly one JSON array of integers in [0, 2^32)
// (JSON number syntax: no sign, no leading zero, no fraction or exponent),
// with JSON whitespace anywhere between tokens. ok is false for anything
// else.
func scanIDs(raw []byte) (ids []uint32, ok bool) {
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '[' {
		return nil, false
	}
	// One id per comma plus one: the count bounds the allocation by the
	// input, which the caller has already bounded.
	ids = make([]uint32, 0, bytes.Count(raw, []byte{','})+1)
	if i = skipSpace(raw, i+1); i < len(raw) && raw[i] == ']' {
		return ids, skipSpace(raw, i+1) == len(raw)
	}
	for {
		if i == len(raw) || raw[i] < '0' || raw[i] > '9' || (raw[i] == '0' && i+1 < len(raw) && '0' <= raw[i+1] && raw[i+1] <= '9') {
			return nil, false
		}
		var v uint64
		for ; i < len(raw) && '0' <= raw[i] && raw[i] <= '9'; i++ {
			if v = v*10 + uint64(raw[i]-'0'); v > math.MaxUint32 {
				return nil, false
			}
		}
		ids = append(ids, uint32(v))
		if i = skipSpace(raw, i); i == len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case ']':
			return ids, skipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
