package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// slicePath is a shipped 400-request slice of the synthetic workload.
var slicePath = filepath.Join("..", "..", "testdata", "mooncake", "synthetic_head400.jsonl")

func readSlice(t testing.TB) []Request {
	t.Helper()
	f, err := os.Open(slicePath)
	if err != nil {
		t.Fatalf("open %s: %v", slicePath, err)
	}
	defer f.Close()
	reqs, err := ReadAll(f, ReaderConfig{})
	if err != nil {
		t.Fatalf("ReadAll(%s): %v", slicePath, err)
	}
	return reqs
}

func TestReadAll_ShippedSlices(t *testing.T) {
	reqs := readSlice(t)
	if len(reqs) != 400 {
		t.Fatalf("ReadAll(%s) = %d requests, want 400", slicePath, len(reqs))
	}
	// The first line: timestamp 0, 40160 input tokens (79 blocks, the last
	// partial), 6 output tokens, ids 0..78.
	first := reqs[0]
	if first.TimestampMs != 0 || first.InputLength != 40160 || first.OutputLength != 6 || len(first.HashIDs) != 79 {
		t.Errorf("request 0 = {ts %d, in %d, out %d, %d ids}, want {0, 40160, 6, 79}", first.TimestampMs, first.InputLength, first.OutputLength, len(first.HashIDs))
	}
	for i, h := range first.HashIDs {
		if h != uint64(i) {
			t.Fatalf("request 0 id %d = %d, want %d", i, h, i)
		}
	}
	var prev uint64
	for i, r := range reqs {
		if want := (r.InputLength + TokensPerID - 1) / TokensPerID; len(r.HashIDs) != want {
			t.Errorf("request %d: %d ids for %d tokens, want %d", i, len(r.HashIDs), r.InputLength, want)
		}
		if r.TimestampMs < prev {
			t.Errorf("request %d: timestamp %d before %d", i, r.TimestampMs, prev)
		}
		prev = r.TimestampMs
	}
	conv := filepath.Join("..", "..", "testdata", "mooncake", "conversation_head400.jsonl")
	f, err := os.Open(conv)
	if err != nil {
		t.Fatalf("open %s: %v", conv, err)
	}
	defer f.Close()
	if reqs, err := ReadAll(f, ReaderConfig{}); err != nil || len(reqs) != 400 {
		t.Errorf("ReadAll(%s) = %d requests, %v; want 400, nil", conv, len(reqs), err)
	}
}

func TestReader_AcceptsAnyKeyOrderUnknownKeysAndBlankLines(t *testing.T) {
	in := "\n" +
		`{"hash_ids":[18446744073709551615,0],"extra":{"a":[1,{"b":null}],"c":"x"},"timestamp":7}` + "\r\n" +
		"   \n" +
		`{"timestamp": 9, "input_length": 3, "output_length": 4, "hash_ids": []}` + "\n"
	rd := NewReader(strings.NewReader(in), ReaderConfig{})
	want := []struct {
		line int
		req  Request
	}{
		{2, Request{TimestampMs: 7, HashIDs: []uint64{1<<64 - 1, 0}}},
		{4, Request{TimestampMs: 9, InputLength: 3, OutputLength: 4, HashIDs: []uint64{}}},
	}
	for _, w := range want {
		got, err := rd.Next()
		if err != nil {
			t.Fatalf("Next() at line %d: %v", w.line, err)
		}
		if !reflect.DeepEqual(got, w.req) || rd.Line() != w.line {
			t.Errorf("Next() = %+v at line %d, want %+v at line %d", got, rd.Line(), w.req, w.line)
		}
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Errorf("Next() after the last line = %v, want io.EOF", err)
	}
}

func TestReader_ErrorsNameTheLine(t *testing.T) {
	good := `{"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[1]}`
	cases := []struct {
		name string
		line string
		want error
	}{
		{"not json", `hello`, ErrMalformed},
		{"array", `[1,2]`, ErrMalformed},
		{"truncated", `{"timestamp":0,"hash_ids":[1,`, ErrMalformed},
		{"trailing", good + ` {}`, ErrMalformed},
		{"missing ids", `{"timestamp":0}`, ErrMalformed},
		{"missing timestamp", `{"hash_ids":[1]}`, ErrMalformed},
		{"repeated key", `{"timestamp":0,"timestamp":1,"hash_ids":[1]}`, ErrMalformed},
		{"negative id", `{"timestamp":0,"hash_ids":[-1]}`, ErrMalformed},
		{"float id", `{"timestamp":0,"hash_ids":[1.5]}`, ErrMalformed},
		{"exponent id", `{"timestamp":0,"hash_ids":[1e3]}`, ErrMalformed},
		{"id past u64", `{"timestamp":0,"hash_ids":[18446744073709551616]}`, ErrMalformed},
		{"string id", `{"timestamp":0,"hash_ids":["1"]}`, ErrMalformed},
		{"null ids", `{"timestamp":0,"hash_ids":null}`, ErrMalformed},
		{"ids not array", `{"timestamp":0,"hash_ids":{}}`, ErrMalformed},
		{"negative length", `{"timestamp":0,"input_length":-4,"hash_ids":[1]}`, ErrMalformed},
		{"huge length", `{"timestamp":0,"output_length":4294967296,"hash_ids":[1]}`, ErrMalformed},
		{"float timestamp", `{"timestamp":0.5,"hash_ids":[1]}`, ErrMalformed},
		{"too many ids", `{"timestamp":0,"hash_ids":[1,2,3,4,5]}`, ErrTooManyIDs},
		{"too long", `{"timestamp":0,"hash_ids":[1],"pad":"` + strings.Repeat("x", 200) + `"}`, ErrLineTooLong},
	}
	for _, c := range cases {
		in := good + "\n\n" + good + "\n" + c.line + "\n" + good + "\n"
		rd := NewReader(strings.NewReader(in), ReaderConfig{MaxLineBytes: 128, MaxIDs: 4})
		for i := 0; i < 2; i++ {
			if _, err := rd.Next(); err != nil {
				t.Fatalf("%s: Next() #%d on a good line: %v", c.name, i, err)
			}
		}
		_, err := rd.Next()
		var le *LineError
		if !errors.As(err, &le) || le.Line != 4 || !errors.Is(err, c.want) {
			t.Errorf("%s: Next() on %q = %v, want a *LineError at line 4 wrapping %v", c.name, c.line, err, c.want)
			continue
		}
		if _, again := rd.Next(); again != err {
			t.Errorf("%s: Next() after an error = %v, want the same error %v", c.name, again, err)
		}
	}
}

func TestReader_LineLimitIsExact(t *testing.T) {
	line := `{"timestamp":0,"hash_ids":[1]}`
	for _, end := range []string{"\n", "\r\n", ""} {
		in := line + end
		if _, err := NewReader(strings.NewReader(in), ReaderConfig{MaxLineBytes: len(line)}).Next(); err != nil {
			t.Errorf("Next(%q) with MaxLineBytes=%d: %v, want nil", in, len(line), err)
		}
		_, err := NewReader(strings.NewReader(in), ReaderConfig{MaxLineBytes: len(line) - 1}).Next()
		if !errors.Is(err, ErrLineTooLong) {
			t.Errorf("Next(%q) with MaxLineBytes=%d: %v, want ErrLineTooLong", in, len(line)-1, err)
		}
	}
}

func TestReader_DefaultLimitsAdmitTheDefaultIDCount(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"timestamp":1,"hash_ids":[`)
	for i := range DefaultMaxIDs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, 99999+i) // ~6 digits, beyond any shipped trace's ids
	}
	b.WriteString("]}")
	if b.Len() > DefaultMaxLineBytes {
		t.Fatalf("test line is %d bytes, over DefaultMaxLineBytes %d", b.Len(), DefaultMaxLineBytes)
	}
	req, err := NewReader(bytes.NewReader(b.Bytes()), ReaderConfig{}).Next()
	if err != nil || len(req.HashIDs) != DefaultMaxIDs {
		t.Errorf("Next(%d ids) = %d ids, %v; want %d, nil", DefaultMaxIDs, len(req.HashIDs), err, DefaultMaxIDs)
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte(`{"timestamp": 0, "input_length": 40160, "output_length": 6, "hash_ids": [0, 1, 2]}` + "\n"))
	f.Add([]byte(`{"hash_ids":[18446744073709551615],"timestamp":1,"x":{"y":[null,true,"z"]}}`))
	f.Add([]byte("\n\r\n{\"timestamp\":1,\"hash_ids\":[]}\n{"))
	f.Add([]byte(`{"timestamp":1,"hash_ids":[1,2,3,4,5,6,7,8,9]}`))
	f.Add([]byte(`{"timestamp":-1,"hash_ids":[1e9]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := ReaderConfig{MaxLineBytes: 256, MaxIDs: 8}
		rd := NewReader(bytes.NewReader(data), cfg)
		for {
			req, err := rd.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				var le *LineError
				if !errors.As(err, &le) || le.Line < 1 {
					t.Fatalf("Next() error %v is not a *LineError with a line", err)
				}
				return
			}
			if len(req.HashIDs) > cfg.MaxIDs {
				t.Fatalf("Next() = %d ids, over MaxIDs %d", len(req.HashIDs), cfg.MaxIDs)
			}
			// What was accepted must re-encode to a line that parses back
			// to the same request.
			again, err := parseRequest(encodeRequest(req), cfg.MaxIDs)
			if err != nil || !reflect.DeepEqual(again, req) {
				t.Fatalf("round trip of %+v = %+v, %v", req, again, err)
			}
		}
	})
}

// encodeRequest writes req as a Mooncake line.
func encodeRequest(req Request) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"timestamp":%d,"input_length":%d,"output_length":%d,"hash_ids":[`, req.TimestampMs, req.InputLength, req.OutputLength)
	for i, h := range req.HashIDs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, h)
	}
	b.WriteString("]}")
	return b.Bytes()
}

func TestReadFile_APrefixOrTheWholeFile(t *testing.T) {
	all := readSlice(t)
	for _, n := range []int{0, 1, 37, 400, 500} {
		got, err := ReadFile(slicePath, n, ReaderConfig{})
		want := all
		if n > 0 && n < len(all) {
			want = all[:n]
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ReadFile(%s, %d) = %d requests, %v; want the first %d", slicePath, n, len(got), err, len(want))
		}
	}
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(empty, []byte("\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(empty, 0, ReaderConfig{}); !errors.Is(err, ErrEmpty) || !strings.Contains(err.Error(), empty) {
		t.Errorf("ReadFile(blank lines) = %v, want ErrEmpty naming the file", err)
	}
	var le *LineError
	if _, err := ReadFile(bad, 0, ReaderConfig{}); !errors.As(err, &le) || le.Line != 2 {
		t.Errorf("ReadFile(bad line 2) = %v, want a LineError at line 2", err)
	}
	if got, err := ReadFile(bad, 1, ReaderConfig{}); err != nil || len(got) != 1 {
		t.Errorf("ReadFile(bad line 2, 1) = %d, %v; want the first request only", len(got), err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing"), 0, ReaderConfig{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v, want os.ErrNotExist", err)
	}
}
