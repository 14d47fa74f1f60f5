package relay

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/zeebo/xxh3"
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

// FuzzDecodeCheckpoint decodes arbitrary bytes as a checkpoint, as they
// are and with their checksum made right (so the fuzzer reaches the
// records behind it): no input panics, every refusal wraps ErrCheckpoint,
// and what decodes never holds more mappings than its bytes could.
func FuzzDecodeCheckpoint(f *testing.F) {
	path := f.TempDir() + "/ckpt"
	if _, err := writeCheckpoint(path, func(cw *checkpointWriter) {
		cw.header(&checkpointHeader{Domain: 1, DC: 2, Seed: 3, Buckets: 64, Publishers: 1})
		cw.publisher(9, 4, 2)
		cw.member(kv.Member{Worker: 1}, []ckf.Mapping{{Source: 1, Canonical: 2}})
		cw.member(kv.Member{Worker: 2, Rank: 1}, nil)
	}); err != nil {
		f.Fatalf("writeCheckpoint: %v", err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		f.Fatalf("read seed: %v", err)
	}
	f.Add(good)
	f.Add(good[:len(good)-checkpointSumBytes])
	f.Add([]byte(checkpointMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		fixed := append(slices.Clone(b), 0, 0, 0, 0, 0, 0, 0, 0)
		binary.LittleEndian.PutUint64(fixed[len(b):], xxh3.Hash(b))
		for _, in := range [][]byte{b, fixed} {
			mappings := 0
			err := decodeCheckpoint(in, func(*checkpointHeader) error { return nil }, func(p *checkpointPublisher) error {
				for _, m := range p.Members {
					mappings += len(m.Mappings)
				}
				return nil
			})
			if err != nil && !errors.Is(err, ErrCheckpoint) {
				t.Fatalf("decodeCheckpoint error %v does not wrap ErrCheckpoint", err)
			}
			if mappings > len(in)/checkpointMappingBytes {
				t.Fatalf("decodeCheckpoint handed on %d mappings from %d bytes", mappings, len(in))
			}
		}
	})
}
