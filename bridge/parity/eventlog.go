package parity

import (
	"bufio"
	"bytes"
	"errors"
	"io"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
)

// MaxLogLineBytes bounds one event-log line (newline excluded): Dynamo's own
// bound on one wire message, which a 128k-token stored prompt fits with
// room to spare.
const MaxLogLineBytes = dynamo.MaxMessageBytes

// logReadChunkBytes is the reader's initial line buffer; it grows, one
// doubling at a time, only as far as the longest line needs.
const logReadChunkBytes = 64 << 10

// LogReader reads an event log: one Dynamo JSON RouterEvent per line (the
// CUR or G2025 shape dynamo.DecodeJSON accepts, as `dynamo.AppendJSON`
// writes it), in the order the router consumed them. Blank lines are
// skipped; events the primary index does not take (another storage tier, a
// cache owner's, an unsupported residency: dynamo.RouterEvent.TargetsPrimary)
// are skipped and counted, as the router ignores them. A LogReader is not safe for
// concurrent use.
type LogReader struct {
	sc      *bufio.Scanner
	line    int
	skipped int
	err     error // sticky: the first error
}

// NewLogReader returns a LogReader over r.
func NewLogReader(r io.Reader) *LogReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, logReadChunkBytes), MaxLogLineBytes+1)
	return &LogReader{sc: sc}
}

// Line returns the 1-based number of the last line read.
func (r *LogReader) Line() int { return r.line }

// Skipped returns how many valid events were skipped as not for the
// primary index.
func (r *LogReader) Skipped() int { return r.skipped }

// Next returns the next device-tier event as a kv.Event, io.EOF after the
// last one, or a *LineError; after an error the reader stays at that error.
func (r *LogReader) Next() (kv.Event, error) {
	if r.err != nil {
		return kv.Event{}, r.err
	}
	for {
		if !r.sc.Scan() {
			err := r.sc.Err()
			if err == nil {
				return kv.Event{}, io.EOF
			}
			if errors.Is(err, bufio.ErrTooLong) {
				err = ErrLineTooLong
			}
			r.line++
			return kv.Event{}, r.fail(err)
		}
		r.line++
		b := bytes.TrimSpace(r.sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if len(b) > MaxLogLineBytes {
			return kv.Event{}, r.fail(ErrLineTooLong)
		}
		re, err := dynamo.DecodeJSON(b)
		if err != nil {
			return kv.Event{}, r.fail(err)
		}
		if primary, err := re.TargetsPrimary(); err != nil || !primary {
			r.skipped++
			continue
		}
		ev, err := re.KV()
		if err == nil {
			err = ev.Validate()
		}
		if err != nil {
			return kv.Event{}, r.fail(err)
		}
		return ev, nil
	}
}

// fail records err at the current line and makes every later Next return it.
func (r *LogReader) fail(err error) error {
	r.err = &LineError{Line: r.line, Err: err}
	return r.err
}
