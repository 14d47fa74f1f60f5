package relay

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func FuzzDecodeInfo(f *testing.F) {
	good, _ := json.Marshal(Info{Domain: 1, DC: 2, Incarnation: 3, LayoutGeneration: 1, Seed: 5, Buckets: 1024, Stream: "s"})
	f.Add(good)
	f.Add([]byte(`{"buckets":3}`))
	f.Add([]byte(`{`))
	f.Add([]byte(strings.Repeat(" ", MaxInfoBytes+1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := DecodeInfo(b)
		if err != nil {
			if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeInfo error %v is neither ErrTooLarge nor ErrMalformed", err)
			}
			return
		}
		if len(b) > MaxInfoBytes {
			t.Fatalf("DecodeInfo accepted %d bytes, limit %d", len(b), MaxInfoBytes)
		}
		if _, err := info.Identity(); err != nil {
			t.Fatalf("decoded Info has no valid identity: %v", err)
		}
	})
}

func FuzzDecodeWorkerLoad(f *testing.F) {
	f.Add([]byte(`{"worker_id":7,"queued_prefill_tokens":100,"active_decode_blocks":3,"capacity_blocks":1000}`))
	f.Add([]byte(`{"worker_id":-1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := DecodeWorkerLoad(b)
		if err != nil {
			if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeWorkerLoad error %v is neither ErrTooLarge nor ErrMalformed", err)
			}
			if w != (WorkerLoad{}) {
				t.Fatalf("failed DecodeWorkerLoad returned %+v", w)
			}
			return
		}
		if len(b) > MaxWorkerLoadBytes {
			t.Fatalf("DecodeWorkerLoad accepted %d bytes", len(b))
		}
	})
}
