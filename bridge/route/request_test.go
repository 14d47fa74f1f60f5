package route

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseRequest_PromptForms(t *testing.T) {
	cases := []struct {
		name      string
		ep        Endpoint
		body      string
		tokens    []uint32
		hasTokens bool
		text      string
		hasText   bool
		messages  string
	}{
		{"text", Completions, `{"prompt":"hi"}`, nil, false, "hi", true, ""},
		{"token ids", Completions, `{"prompt":[1,2,3]}`, []uint32{1, 2, 3}, true, "", false, ""},
		{"batch of texts routes by the first", Completions, `{"prompt":["a","b"]}`, nil, false, "a", true, ""},
		{"batch of id lists routes by the first", Completions, `{"prompt":[[4,5],[6]]}`, []uint32{4, 5}, true, "", false, ""},
		{"empty list", Completions, `{"prompt":[]}`, nil, false, "", false, ""},
		{"no prompt", Completions, `{"model":"m"}`, nil, false, "", false, ""},
		{"null prompt", Completions, `{"prompt":null}`, nil, false, "", false, ""},
		{"max u32", Completions, `{"prompt":[4294967295]}`, []uint32{4294967295}, true, "", false, ""},
		{"prompt_token_ids beat text", Completions, `{"prompt":"hi","prompt_token_ids":[9]}`, []uint32{9}, true, "hi", false, ""},
		{"nvext beats prompt_token_ids", Completions, `{"prompt":[1],"prompt_token_ids":[9],"nvext":{"token_data":[7,8]}}`, []uint32{7, 8}, true, "", false, ""},
		{"chat messages", ChatCompletions, `{"messages": [{"role":"user","content":"x"}] }`, nil, false, "", false, `[{"role":"user","content":"x"}]`},
		{"chat token_data", ChatCompletions, `{"messages":[],"nvext":{"token_data":[3]}}`, []uint32{3}, true, "", false, `[]`},
		{"chat ignores prompt", ChatCompletions, `{"prompt":[1,2]}`, nil, false, "", false, ""},
	}
	for _, c := range cases {
		r, err := ParseRequest(c.ep, []byte(c.body), 100)
		if err != nil {
			t.Errorf("%s: ParseRequest(%s) = %v", c.name, c.body, err)
			continue
		}
		if !slices.Equal(r.Tokens, c.tokens) || r.HasTokens != c.hasTokens || r.Text != c.text || r.HasText != c.hasText || string(r.Messages) != c.messages {
			t.Errorf("%s: ParseRequest(%s) = tokens %v/%v text %q/%v messages %s, want %v/%v %q/%v %s", c.name, c.body,
				r.Tokens, r.HasTokens, r.Text, r.HasText, r.Messages, c.tokens, c.hasTokens, c.text, c.hasText, c.messages)
		}
	}
	r, err := ParseRequest(Completions, []byte(`{"model":"x","stream":true,"lora_name":"a","cache_salt":"b"}`), 1)
	if err != nil || r.Model != "x" || !r.Stream || r.LoRA != "a" || r.Namespace != "b" {
		t.Errorf("ParseRequest(model, stream, salts) = %+v, %v, want x, stream, a, b", r, err)
	}
}

func TestParseRequest_RejectsBadShapes(t *testing.T) {
	cases := map[string]error{
		``:                                   ErrMalformed,
		`null`:                               ErrMalformed,
		`{"prompt":[1,2]`:                    ErrMalformed,
		`{"prompt":[1.5]}`:                   ErrMalformed,
		`{"prompt":[4294967296]}`:            ErrMalformed,
		`{"prompt":[1,"a"]}`:                 ErrMalformed,
		`{"prompt":[[1],["a"]]}`:             ErrMalformed,
		`{"prompt":true}`:                    ErrMalformed,
		`{"stream":"yes"}`:                   ErrMalformed,
		`{"prompt":"a"} trailing`:            ErrMalformed,
		`{"prompt_token_ids":[1,null]}`:      ErrMalformed,
		`{"prompt":[1,2,3,4]}`:               ErrTooManyTokens,
		`{"nvext":{"token_data":[1,2,3,4]}}`: ErrTooManyTokens,
	}
	for body, want := range cases {
		if _, err := ParseRequest(Completions, []byte(body), 3); !errors.Is(err, want) {
			t.Errorf("ParseRequest(%q) = %v, want %v", body, err, want)
		}
	}
}

func TestParseDC_FormsAndErrors(t *testing.T) {
	d, err := ParseDC("fra=http://fra.example:8000/")
	if err != nil || d.ID != DCID("fra") || d.Name != "fra" || d.URL.String() != "http://fra.example:8000" {
		t.Errorf("ParseDC(fra=…) = %+v, %v, want id DCID(fra), trailing slash trimmed", d, err)
	}
	d, err = ParseDC("3:lon=https://lon.example/api")
	if err != nil || d.ID != 3 || d.Name != "lon" || d.URL.Path != "/api" {
		t.Errorf("ParseDC(3:lon=…) = %+v, %v, want id 3 with path prefix /api", d, err)
	}
	if back, err := ParseDC(d.String()); err != nil || back.ID != d.ID || back.Name != d.Name || back.URL.String() != d.URL.String() {
		t.Errorf("ParseDC(%q) = %+v, %v, want it back", d.String(), back, err)
	}
	if DCID("fra") == DCID("lon") || DCID("fra") != DCID("fra") {
		t.Errorf("DCID is not a stable, distinguishing hash")
	}
	for _, bad := range []string{"fra", "=http://x", "0:fra=http://x", "x:fra=http://x", "fr a=http://x",
		strings.Repeat("a", MaxDCNameBytes+1) + "=http://x", "fra=ftp://x", "fra=http://", "fra=http://x?a=1",
		"fra=http://u:p@x", "fra=://x"} {
		if _, err := ParseDC(bad); !errors.Is(err, ErrBadConfig) {
			t.Errorf("ParseDC(%q) = %v, want ErrBadConfig", bad, err)
		}
	}
}

func TestDecodeTokenizerReply_Forms(t *testing.T) {
	for body, want := range map[string][]uint32{
		`{"count":2,"max_model_len":10,"tokens":[5,6]}`: {5, 6},
		`{"token_ids":[7]}`:                             {7},
		`{"tokens":["a"],"token_ids":[8]}`:              {8}, // token_ids win (strings next to ids)
		`{"tokens":[]}`:                                 {},
	} {
		got, err := DecodeTokenizerReply([]byte(body), 10)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("DecodeTokenizerReply(%s) = %v, %v, want %v", body, got, err, want)
		}
	}
	for body, want := range map[string]error{
		`[1,2]`:               ErrTokenizer,
		`{"count":2}`:         ErrTokenizer,
		`{"tokens":[1,-1]}`:   ErrTokenizer,
		`{"tokens":"abc"}`:    ErrTokenizer,
		`{"tokens":[1,2,3]}`:  ErrTooManyTokens,
		`{"tokens":[1,null]}`: ErrTokenizer,
	} {
		if _, err := DecodeTokenizerReply([]byte(body), 2); !errors.Is(err, want) {
			t.Errorf("DecodeTokenizerReply(%s) = %v, want %v", body, err, want)
		}
	}
	huge := make([]byte, MaxTokenizerReplyBytes+1)
	if _, err := DecodeTokenizerReply(huge, 2); !errors.Is(err, ErrTokenizer) || !strings.Contains(err.Error(), "limit") {
		t.Errorf("DecodeTokenizerReply(%d bytes) = %v, want the size limit", len(huge), err)
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{`{"prompt":"hi"}`, `{"prompt":[1,2,3]}`, `{"prompt":[[1],[2]]}`, `{"prompt":["a"]}`,
		`{"messages":[{"role":"user","content":"x"}],"nvext":{"token_data":[1]}}`, `{"prompt_token_ids":[4294967295]}`,
		`{"prompt":[]}`, `[]`, `{"prompt":[null]}`, `{"lora_name":"a","cache_salt":"b","stream":true}`} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		ep := Completions
		if chat {
			ep = ChatCompletions
		}
		const limit = 64
		r, err := ParseRequest(ep, body, limit)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooManyTokens) {
				t.Fatalf("ParseRequest(%q) = %v, want ErrMalformed or ErrTooManyTokens", body, err)
			}
			return
		}
		if len(r.Tokens) > limit || (r.HasTokens && r.HasText) || (!r.HasTokens && r.Tokens != nil) {
			t.Fatalf("ParseRequest(%q) = %+v: over the limit or inconsistent flags", body, r)
		}
		if r.Messages != nil && r.Messages[0] != '[' {
			t.Fatalf("ParseRequest(%q): messages %q not an array", body, r.Messages)
		}
	})
}

func FuzzDecodeTokenizerReply(f *testing.F) {
	for _, s := range []string{`{"tokens":[1,2]}`, `{"token_ids":[3]}`, `{"tokens":null}`, `{}`, `[`, `{"tokens":[1e3]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := DecodeTokenizerReply(b, 16)
		if err != nil {
			if !errors.Is(err, ErrTokenizer) && !errors.Is(err, ErrTooManyTokens) {
				t.Fatalf("DecodeTokenizerReply(%q) = %v, want a tokenizer or limit error", b, err)
			}
			return
		}
		if len(ids) > 16 || ids == nil {
			t.Fatalf("DecodeTokenizerReply(%q) = %v: nil or over the limit", b, ids)
		}
	})
}

// jsonIDs is decodeIDs' slow reference: encoding/json, with null elements
// refused as decodeIDs refuses them.
func jsonIDs(raw []byte) ([]uint32, bool) {
	var ids []uint32
	if bytes.Contains(raw, []byte("null")) || json.Unmarshal(raw, &ids) != nil || ids == nil {
		return nil, false
	}
	return ids, true
}

func TestDecodeIDs_MatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 10))
	pieces := []string{"0", "7", "42", "4294967295", "4294967296", "01", "-1", "1.5", "1e3", " ", "\t", "\n", ",", "[", "]",
		"null", `"7"`, "x", "18446744073709551616", "00", "9"}
	cases := 20000
	if testing.Short() {
		cases = 4000
	}
	for c := range cases {
		var b strings.Builder
		if rng.IntN(2) == 0 {
			// Mostly well-formed: an array of ids with random spacing.
			b.WriteString(" [")
			for i := range rng.IntN(6) {
				if i > 0 {
					b.WriteString(pieces[9+rng.IntN(3)] + ",")
				}
				b.WriteString(strconv.FormatUint(uint64(rng.Uint32()), 10))
			}
			b.WriteString("] ")
		}
		for range rng.IntN(4) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		raw := []byte(b.String())
		got, err := decodeIDs(raw)
		want, ok := jsonIDs(raw)
		if (err == nil) != ok || (ok && !slices.Equal(got, want)) {
			t.Errorf("case %d: decodeIDs(%q) = %v, %v; encoding/json: %v, ok %v", c, raw, got, err, want, ok)
		}
	}
}

func FuzzDecodeIDs(f *testing.F) {
	for _, s := range []string{"[1,2,3]", "[]", " [ 0 , 4294967295 ] ", "[01]", "[1,]", "[null]", "[1.0]", "[-0]", "[[1]]", "[1]x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := decodeIDs(raw)
		want, ok := jsonIDs(raw)
		if (err == nil) != ok || (ok && !slices.Equal(got, want)) {
			t.Fatalf("decodeIDs(%q) = %v, %v; encoding/json: %v, ok %v", raw, got, err, want, ok)
		}
	})
}
