package hostindex

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestConfig_DefaultsAndEveryKey(t *testing.T) {
	def, err := ParseConfig(nil)
	if err != nil || !reflect.DeepEqual(def, DefaultConfig()) {
		t.Errorf("ParseConfig(nil) = %+v, %v; want the defaults", def, err)
	}
	got, err := ParseConfig([]byte(`{"mode":"global","lanes":8,"expected_blocks_per_lane":4096,"buckets":1024,"block_size":64,
		"clear_scope":"worker","seed":18446744073709551615,"max_kicks":7,"domain":7,"consumer_instance":9,"dcs":[5,3,11],
		"max_staleness_ms":250.5,"replica_check_ms":0,"policy":"credit","prefill_tokens_per_ms":5.5,"queue_tokens_per_ms":80,
		"decode_blocks_per_ms":2}`))
	want := Config{Mode: "global", Lanes: 8, ExpectedBlocksPerLane: 4096, Buckets: 1024, BlockSize: 64, ClearScope: "worker",
		Seed: 1<<64 - 1, MaxKicks: 7, Domain: 7, ConsumerInstance: 9, DCs: []uint64{5, 3, 11}, MaxStalenessMs: 250.5,
		ReplicaCheckMs: 0, Policy: "credit", PrefillTokensPerMs: 5.5, QueueTokensPerMs: 80, DecodeBlocksPerMs: 2}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseConfig(every key) = %+v, %v; want %+v", got, err, want)
	}
}

func TestConfig_RejectsUnknownKeysTrailingDataAndRanges(t *testing.T) {
	for _, src := range []string{
		`{`, `[]`, `null x`, `{} {}`, `{"Mode":"exact","mdoe":1}`, `{"mode":"fuzzy"}`, `{"lanes":0}`, `{"lanes":65}`,
		`{"expected_blocks_per_lane":0}`, `{"expected_blocks_per_lane":1e12}`, `{"block_size":0}`, `{"block_size":65537}`,
		`{"clear_scope":"pool"}`, `{"seed":-1}`, `{"max_kicks":0}`, `{"max_kicks":4097}`, `{"policy":"single-dc"}`,
		`{"prefill_tokens_per_ms":0}`, `{"decode_blocks_per_ms":-1}`, `{"queue_tokens_per_ms":-1}`, `{"buckets":1000}`,
		`{"buckets":1}`, `{"buckets":33554432}`, `{"dcs":[1,2,1]}`, `{"dcs":[-1]}`, `{"dcs":[` + strings.Repeat("1,", 64) + `65]}`,
		`{"max_staleness_ms":0}`, `{"max_staleness_ms":1e12}`, `{"replica_check_ms":-1}`, `{"replica_check_ms":1e12}`,
	} {
		if _, err := ParseConfig([]byte(src)); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseConfig(%s) = %v, want ErrConfig", src, err)
		}
	}
}

// FuzzParseConfig feeds goindex_open's decoder arbitrary bytes: it never
// panics, every rejection is ErrConfig, and an accepted config is valid and
// survives a round trip through its own JSON.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"mode":"ckf","lanes":3,"expected_blocks_per_lane":17}`, `{"seed":18446744073709551615}`,
		`{"policy":"credit","clear_scope":"worker"}`, `{"block_size":1e3}`,
		`{"mode":"global","dcs":[3,1],"buckets":64,"max_staleness_ms":1,"replica_check_ms":0}`, `{"dcs":[1,1]}`, `{"mdoe":1}`, `{} {}`, `[`, `{"lanes":-1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, err := ParseConfig(src)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("ParseConfig(%q) = %v, not ErrConfig", src, err)
			}
			return
		}
		if err := cfg.Check(); err != nil {
			t.Fatalf("ParseConfig(%q) accepted %+v, which Check rejects: %v", src, cfg, err)
		}
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal %+v: %v", cfg, err)
		}
		again, err := ParseConfig(out)
		if err != nil || !reflect.DeepEqual(again, cfg) {
			t.Fatalf("round trip of %s = %+v, %v; want %+v", out, again, err, cfg)
		}
	})
}
