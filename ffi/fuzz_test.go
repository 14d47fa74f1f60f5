package main

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzParseConfig feeds goindex_open's decoder arbitrary bytes: it never
// panics, every rejection is errConfig, and an accepted config is valid and
// survives a round trip through its own JSON.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"mode":"ckf","lanes":3,"expected_blocks_per_lane":17}`, `{"seed":18446744073709551615}`,
		`{"policy":"credit","clear_scope":"worker"}`, `{"block_size":1e3}`,
		`{"mode":"global","dcs":[3,1],"buckets":64,"max_staleness_ms":1,"replica_check_ms":0}`, `{"dcs":[1,1]}`, `{"mdoe":1}`, `{} {}`, `[`, `{"lanes":-1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, err := parseConfig(src)
		if err != nil {
			if !errors.Is(err, errConfig) {
				t.Fatalf("parseConfig(%q) = %v, not errConfig", src, err)
			}
			return
		}
		if err := cfg.check(); err != nil {
			t.Fatalf("parseConfig(%q) accepted %+v, which check rejects: %v", src, cfg, err)
		}
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal %+v: %v", cfg, err)
		}
		again, err := parseConfig(out)
		if err != nil || !reflect.DeepEqual(again, cfg) {
			t.Fatalf("round trip of %s = %+v, %v; want %+v", out, again, err, cfg)
		}
	})
}
