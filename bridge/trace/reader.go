package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
)

// Reader limits. A Mooncake line is ~8 bytes per hash id, so the default line
// limit admits the default id limit with room to spare; 65,536 ids are a
// 32M-token prompt, far beyond any served context.
const (
	// DefaultMaxLineBytes bounds one JSONL line, newline excluded.
	DefaultMaxLineBytes = 1 << 20
	// DefaultMaxIDs bounds the hash ids of one request.
	DefaultMaxIDs = 1 << 16
	// maxLength bounds input_length and output_length so that token
	// arithmetic in int never overflows on 32-bit platforms.
	maxLength = math.MaxInt32
)

// Request is one Mooncake trace line: an arrival time, the prompt and output
// lengths, and one hash id per 512-token prompt block (the last block is
// usually partial). Equal ids at equal positions mean a shared prefix.
type Request struct {
	TimestampMs  uint64   // arrival, ms from trace start; equal values arrive together
	InputLength  int      // prompt tokens
	OutputLength int      // generated tokens
	HashIDs      []uint64 // one per 512-token block
}

// ReaderConfig bounds what a Reader accepts.
type ReaderConfig struct {
	MaxLineBytes int // optional; default: DefaultMaxLineBytes
	MaxIDs       int // optional; default: DefaultMaxIDs
}

// Reader streams Requests from Mooncake JSONL: one JSON object per line with
// the keys timestamp, input_length, output_length and hash_ids, in any order.
// timestamp and hash_ids are required, the lengths default to 0, unknown keys
// are ignored, a repeated key is an error, blank lines are skipped. Numbers
// must be non-negative integers; they are parsed exactly, never through
// float64. A Reader is not safe for concurrent use.
type Reader struct {
	sc      *bufio.Scanner
	maxLine int
	maxIDs  int
	line    int
	err     error // sticky: the first failure
}

// NewReader returns a Reader over r with cfg's limits.
func NewReader(r io.Reader, cfg ReaderConfig) *Reader {
	if cfg.MaxLineBytes <= 0 {
		cfg.MaxLineBytes = DefaultMaxLineBytes
	}
	if cfg.MaxIDs <= 0 {
		cfg.MaxIDs = DefaultMaxIDs
	}
	sc := bufio.NewScanner(r)
	// The scanner's limit counts its buffer, which must also hold the line
	// end ("\r\n"), hence the +2; Next checks the exact limit.
	sc.Buffer(make([]byte, 0, min(cfg.MaxLineBytes+2, 64<<10)), cfg.MaxLineBytes+2)
	return &Reader{sc: sc, maxLine: cfg.MaxLineBytes, maxIDs: cfg.MaxIDs}
}

// Line returns the 1-based line number of the request Next returned last.
func (r *Reader) Line() int { return r.line }

// Next returns the next request, io.EOF after the last one, or a *LineError
// naming the line that failed. After an error the Reader is done: every later
// call returns the same error.
func (r *Reader) Next() (Request, error) {
	if r.err != nil {
		return Request{}, r.err
	}
	for r.sc.Scan() {
		r.line++
		if len(r.sc.Bytes()) > r.maxLine {
			r.err = &LineError{Line: r.line, Err: fmt.Errorf("%w: over %d bytes", ErrLineTooLong, r.maxLine)}
			return Request{}, r.err
		}
		b := bytes.TrimSpace(r.sc.Bytes())
		if len(b) == 0 {
			continue
		}
		req, err := parseRequest(b, r.maxIDs)
		if err != nil {
			r.err = &LineError{Line: r.line, Err: err}
			return Request{}, r.err
		}
		return req, nil
	}
	r.err = io.EOF
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("%w: over %d bytes", ErrLineTooLong, r.maxLine)
		}
		r.err = &LineError{Line: r.line + 1, Err: err}
	}
	return Request{}, r.err
}

// ReadAll reads every request of r.
func ReadAll(r io.Reader, cfg ReaderConfig) ([]Request, error) {
	rd := NewReader(r, cfg)
	var out []Request
	for {
		req, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, req)
	}
}

// ReadFile reads the first n requests of the trace file at path (all of
// them when n is 0). A file without any request is an error (ErrEmpty).
func ReadFile(path string, n int, cfg ReaderConfig) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := NewReader(f, cfg)
	var reqs []Request
	for n == 0 || len(reqs) < n {
		req, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		reqs = append(reqs, req)
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%s: %w", path, ErrEmpty)
	}
	return reqs, nil
}

// parseRequest decodes one non-blank line token by token, so that the id
// limit is checked before each append rather than after json.Unmarshal has
// allocated the whole array.
func parseRequest(line []byte, maxIDs int) (Request, error) {
	var req Request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := expectDelim(dec, '{', "request"); err != nil {
		return req, err
	}
	var seenTS, seenIn, seenOut, seenIDs bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return req, malformed("%v", err)
		}
		key, _ := tok.(string) // object keys are always strings
		switch key {
		case "timestamp":
			if err = firstTime(&seenTS, key); err == nil {
				req.TimestampMs, err = readUint(dec, key, math.MaxUint64)
			}
		case "input_length":
			if err = firstTime(&seenIn, key); err == nil {
				req.InputLength, err = readLength(dec, key)
			}
		case "output_length":
			if err = firstTime(&seenOut, key); err == nil {
				req.OutputLength, err = readLength(dec, key)
			}
		case "hash_ids":
			if err = firstTime(&seenIDs, key); err == nil {
				req.HashIDs, err = readIDs(dec, maxIDs)
			}
		default:
			err = skipValue(dec)
		}
		if err != nil {
			return Request{}, err
		}
	}
	if err := expectDelim(dec, '}', "request"); err != nil {
		return Request{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Request{}, malformed("trailing data after the request object")
	}
	switch {
	case !seenTS:
		return Request{}, malformed("missing timestamp")
	case !seenIDs:
		return Request{}, malformed("missing hash_ids")
	}
	return req, nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// firstTime marks key as seen and fails if it was seen before on this line.
func firstTime(seen *bool, key string) error {
	if *seen {
		return malformed("repeated key %q", key)
	}
	*seen = true
	return nil
}

// expectDelim consumes one token and fails unless it is want; where names
// the place for the message.
func expectDelim(dec *json.Decoder, want json.Delim, where string) error {
	tok, err := dec.Token()
	if err != nil {
		return malformed("%s: %v", where, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return malformed("%s: want %q, got %v", where, want, tok)
	}
	return nil
}

// readUint reads one JSON integer in [0, max].
func readUint(dec *json.Decoder, key string, max uint64) (uint64, error) {
	tok, err := dec.Token()
	if err != nil {
		return 0, malformed("%s: %v", key, err)
	}
	n, ok := tok.(json.Number)
	if !ok {
		return 0, malformed("%s: want a non-negative integer, got %v", key, tok)
	}
	v, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil || v > max {
		return 0, malformed("%s: want an integer in [0, %d], got %s", key, max, n)
	}
	return v, nil
}

func readLength(dec *json.Decoder, key string) (int, error) {
	v, err := readUint(dec, key, maxLength)
	return int(v), err
}

func readIDs(dec *json.Decoder, maxIDs int) ([]uint64, error) {
	if err := expectDelim(dec, '[', "hash_ids"); err != nil {
		return nil, err
	}
	ids := []uint64{}
	for dec.More() {
		if len(ids) == maxIDs {
			return nil, fmt.Errorf("%w: more than %d", ErrTooManyIDs, maxIDs)
		}
		v, err := readUint(dec, "hash_ids", math.MaxUint64)
		if err != nil {
			return nil, err
		}
		ids = append(ids, v)
	}
	if err := expectDelim(dec, ']', "hash_ids"); err != nil {
		return nil, err
	}
	return ids, nil
}

// skipValue consumes one JSON value of an unknown key, however nested.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return malformed("%v", err)
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			default:
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}
