package parity

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzLogReader feeds arbitrary bytes to the event-log reader: it must
// never panic, every event it returns must be valid, and it must end in
// io.EOF or a *LineError that stays.
func FuzzLogReader(f *testing.F) {
	f.Add([]byte(`{"worker_id":1,"event":{"event_id":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":5,"tokens_hash":5}]}},"dp_rank":0}}` + "\n"))
	f.Add([]byte(`{"worker_id":2,"storage_tier":"disk","event":{"event_id":1,"data":{"removed":{"block_hashes":[5]}},"dp_rank":1}}` + "\n\n"))
	f.Add([]byte(`{"worker_id":3,"event":{"event_id":2,"data":"cleared","dp_rank":0}}`))
	f.Add([]byte("{\n}\n[1,2]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewLogReader(bytes.NewReader(b))
		for range bytes.Count(b, []byte{'\n'}) + 2 {
			ev, err := r.Next()
			if err == io.EOF {
				return
			}
			var le *LineError
			if errors.As(err, &le) {
				if _, again := r.Next(); again != err {
					t.Fatalf("Next after %v = %v, want the same error", err, again)
				}
				return
			}
			if err != nil {
				t.Fatalf("Next = %v, want io.EOF or a *LineError", err)
			}
			if verr := ev.Validate(); verr != nil {
				t.Fatalf("Next returned an invalid event %+v: %v", ev, verr)
			}
		}
		t.Fatalf("Next returned more events than lines in %q", b)
	})
}
