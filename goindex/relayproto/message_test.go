package relayproto

import "testing"

func TestLoadReport_SupersedesALaterSampleOrTheCountedLayout(t *testing.T) {
	for _, c := range []struct {
		name                     string
		at, stored, keptAt, kept uint64
		want                     bool
	}{
		{"later sample", 2, 0, 1, 5, true},
		{"later sample with a counter", 2, 9, 1, 0, true},
		{"earlier sample", 1, 9, 2, 0, false},
		{"same sample, counted over uncounted", 1, 9, 1, 0, true},
		{"same sample, uncounted over counted", 1, 0, 1, 9, false},
		{"a repeat, counted", 1, 9, 1, 9, false},
		{"a repeat, uncounted", 1, 0, 1, 0, false},
	} {
		r := LoadReport{TimestampUnixNano: c.at, StoredBlocks: c.stored}
		kept := LoadReport{TimestampUnixNano: c.keptAt, StoredBlocks: c.kept}
		if got := r.Supersedes(&kept); got != c.want {
			t.Errorf("%s: (at %d, stored %d).Supersedes(at %d, stored %d) = %v, want %v", c.name, c.at, c.stored, c.keptAt, c.kept, got, c.want)
		}
	}
}
