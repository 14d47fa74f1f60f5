package wsplugin

import (
	"testing"
	"unsafe"
)

// FuzzPluginCreate feeds arbitrary config bytes to the plugin's create:
// it returns OK with a live state or INVALID_INPUT with none, never
// anything else, and a created state answers required_candidate_inputs.
func FuzzPluginCreate(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"policy":"credit","credit":0.5}`, `{"policy":"load-only"}`, `{"prefill_tokens_per_ms":1e308}`,
		`{"polcy":1}`, `{} {}`, ` `, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, cfg []byte) {
		var st cU64
		var p *inU8
		if len(cfg) > 0 {
			p = (*inU8)(unsafe.Pointer(&cfg[0]))
		}
		eb, buf := errBuf(128)
		switch rc := dynamoSelectorCreate(p, cSize(len(cfg)), 1, &st, eb); {
		case rc == wsOK && st != 0:
			var need cU64
			if rc := dynamoSelectorRequiredInputs(st, &need, nil); rc != wsOK || uint64(need)&1 == 0 {
				t.Errorf("required_candidate_inputs after create(%q) = %d, %#x; want OK with the identity bit", cfg, rc, uint64(need))
			}
			dynamoSelectorDestroy(st)
		case rc == wsInvalid && st == 0:
			if eb.written == 0 {
				t.Errorf("create(%q) = INVALID_INPUT without a message", cfg)
			}
		default:
			t.Errorf("create(%q) = %d, state %d: want OK with a state or INVALID_INPUT without (%s)", cfg, rc, st, errText(eb, buf))
		}
	})
}
