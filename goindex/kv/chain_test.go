package kv

import "testing"

func TestAppendChain_MatchesSpecVectors(t *testing.T) {
	cases := []struct {
		name   string
		locals []uint64
		want   []uint64
	}{
		// dynamo-compat.md V5: tokens 0..7, block size 4.
		{"V5", []uint64{9143094415614847814, 12124091508212882195}, []uint64{9143094415614847814, 9510318385840434533}},
		// V25: chain over local values [1,2,3,4,5].
		{"V25", []uint64{1, 2, 3, 4, 5}, []uint64{1, 16740963408272063728, 5417695437591212399, 15413681679220706959, 16713516116484648481}},
	}
	for _, c := range cases {
		got := AppendChain(nil, false, 0, c.locals)
		if len(got) != len(c.want) {
			t.Fatalf("%s: AppendChain(%v) len = %d, want %d", c.name, c.locals, len(got), len(c.want))
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: AppendChain(%v)[%d] = %d, want %d", c.name, c.locals, i, got[i], c.want[i])
			}
		}
	}
}

func TestAppendChain_ContinuesBelowParent(t *testing.T) {
	full := AppendChain(nil, false, 0, []uint64{1, 2, 3, 4, 5})
	tail := AppendChain(nil, true, full[2], []uint64{4, 5})
	if tail[0] != full[3] || tail[1] != full[4] {
		t.Errorf("AppendChain(parent=%d, [4 5]) = %v, want %v", full[2], tail, full[3:])
	}
}

func TestEvent_ValidateRejectsMixedShapes(t *testing.T) {
	bad := []Event{
		{Kind: 0},
		{Kind: Stored, Removed: []uint64{1}},
		{Kind: Removed, Blocks: []Block{{1, 2}}},
		{Kind: Cleared, Removed: []uint64{1}},
	}
	for i, e := range bad {
		if err := e.Validate(); err == nil {
			t.Errorf("case %d: Validate(%+v) = nil, want error", i, e)
		}
	}
	good := Event{Kind: Stored, Blocks: []Block{{1, 2}}}
	if err := good.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v, want nil", good, err)
	}
}
