package dynamo

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

func TestRouterEvent_KVConvertsEveryKind(t *testing.T) {
	mm := &MMExtraInfo{Objects: []MMObject{{Hash: 42}}}
	cases := []struct {
		name string
		in   RouterEvent
		want kv.Event
	}{
		{"stored", RouterEvent{WorkerID: 7, Event: CacheEvent{EventID: 42, Kind: kv.Stored, DpRank: 2, Stored: StoreData{
			HasParent: true, Parent: 99, HasStart: true, StartPosition: 3,
			Blocks: []StoredBlock{{BlockHash: 1, TokensHash: 11, MM: mm}, {BlockHash: 2, TokensHash: 12}},
		}}}, kv.Event{Member: kv.Member{Worker: 7, Rank: 2}, EventID: 42, Kind: kv.Stored, HasParent: true, Parent: 99,
			HasStart: true, StartPosition: 3, Blocks: []kv.Block{{External: 1, Local: 11}, {External: 2, Local: 12}}}},
		{"removed", RouterEvent{WorkerID: 7, StorageTier: TierDisk, Event: CacheEvent{EventID: 43, Kind: kv.Removed, Removed: []uint64{1, 2}}},
			kv.Event{Member: kv.Member{Worker: 7}, EventID: 43, Kind: kv.Removed, Removed: []uint64{1, 2}}},
		{"cleared", RouterEvent{WorkerID: 8, Residency: ResidencyWorker, Event: CacheEvent{EventID: 44, Kind: kv.Cleared, DpRank: 1}},
			kv.Event{Member: kv.Member{Worker: 8, Rank: 1}, EventID: 44, Kind: kv.Cleared}},
	}
	for _, c := range cases {
		got, err := c.in.KV()
		if err != nil {
			t.Errorf("%s: KV() error %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: KV() = %+v, want %+v", c.name, got, c.want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("%s: KV() result fails kv.Event.Validate: %v", c.name, err)
		}
	}
}

func TestRouterEvent_KVCopiesRemovedHashes(t *testing.T) {
	in := RouterEvent{Event: CacheEvent{Kind: kv.Removed, Removed: []uint64{1, 2}}}
	got, err := in.KV()
	if err != nil {
		t.Fatal(err)
	}
	got.Removed[0] = 100
	if in.Event.Removed[0] != 1 {
		t.Errorf("KV() result aliases RouterEvent.Removed: source now %v", in.Event.Removed)
	}
}

func TestRouterEvent_ValidateRejectsOutOfRangeFields(t *testing.T) {
	cases := []struct {
		name string
		in   RouterEvent
		want error
	}{
		{"zero kind", RouterEvent{}, ErrMalformed},
		{"tier", RouterEvent{StorageTier: TierUnknown + 1, Event: CacheEvent{Kind: kv.Cleared}}, ErrUnknownStorageTier},
		{"residency", RouterEvent{Residency: residencyCount, Event: CacheEvent{Kind: kv.Cleared}}, ErrUnsupportedResidency},
	}
	for _, c := range cases {
		if err := c.in.Validate(); !errors.Is(err, c.want) {
			t.Errorf("%s: Validate() = %v, want %v", c.name, err, c.want)
		}
		if _, err := c.in.KV(); !errors.Is(err, c.want) {
			t.Errorf("%s: KV() error = %v, want %v", c.name, err, c.want)
		}
	}
	big := RouterEvent{Event: CacheEvent{Kind: kv.Removed, Removed: make([]uint64, MaxBlocksPerEvent+1)}}
	var le *LimitError
	if err := big.Validate(); !errors.As(err, &le) {
		t.Errorf("Validate(%d removed hashes) = %v, want *LimitError", MaxBlocksPerEvent+1, err)
	}
}

func TestStorageTier_ParseAndString(t *testing.T) {
	for tier := TierDevice; tier < TierUnknown; tier++ {
		got, err := ParseStorageTier(tier.String())
		if err != nil || got != tier {
			t.Errorf("ParseStorageTier(%q) = %v, %v; want %v", tier.String(), got, err, tier)
		}
	}
	for _, s := range []string{"", "Device", "gpu", "ssd", TierUnknown.String()} {
		if _, err := ParseStorageTier(s); !errors.Is(err, ErrUnknownStorageTier) {
			t.Errorf("ParseStorageTier(%q) error = %v, want ErrUnknownStorageTier", s, err)
		}
	}
}

// TestRouterEvent_TargetsPrimaryFollowsDynamo checks every combination of
// tier, residency and kind against Dynamo's RouterEvent::targets_primary:
// clears ignore the tier and skip only the cache-owner domain, stores and
// removes need the device tier and the worker domain, a cache owner's on
// the device tier and an invalid residency are unsupported.
func TestRouterEvent_TargetsPrimaryFollowsDynamo(t *testing.T) {
	for tier := TierDevice; tier <= TierUnknown; tier++ {
		for r := ResidencyAbsent; r < residencyCount; r++ {
			for _, k := range []kv.Kind{kv.Stored, kv.Removed, kv.Cleared} {
				var want bool
				var wantErr error
				switch {
				case tier == TierUnknown:
					wantErr = ErrUnknownStorageTier
				case r == ResidencyUnsupported:
					wantErr = ErrUnsupportedResidency
				case k == kv.Cleared:
					want = r != ResidencyCacheOwner
				case r == ResidencyCacheOwner && tier == TierDevice:
					wantErr = ErrUnsupportedResidency
				default:
					want = r != ResidencyCacheOwner && tier == TierDevice
				}
				ev := RouterEvent{StorageTier: tier, Residency: r, Event: CacheEvent{Kind: k}}
				got, err := ev.TargetsPrimary()
				if got != want || !errors.Is(err, wantErr) || (wantErr == nil) != (err == nil) {
					t.Errorf("%v %q %v: TargetsPrimary() = %v, %v; want %v, %v", tier, r, k, got, err, want, wantErr)
				}
			}
		}
	}
}

// TestRouterEvent_TargetsPrimaryMatchesSharedTable checks TargetsPrimary
// against testdata/targets_primary.txt, the table the Rust crate
// (dynamo/rust/goindex-dynamo) checks its RouterEvent::targets_primary and
// Indexer::apply_event against, so the two sides keep one rule. The table
// must name every tier × residency × kind exactly once.
func TestRouterEvent_TargetsPrimaryMatchesSharedTable(t *testing.T) {
	tiers := map[string]StorageTier{}
	for tier := TierDevice; tier <= TierUnknown; tier++ {
		tiers[tier.String()] = tier
	}
	residencies := map[string]Residency{"absent": ResidencyAbsent}
	for r := ResidencyWorker; r < residencyCount; r++ {
		residencies[r.String()] = r
	}
	kinds := map[string]kv.Kind{}
	for _, k := range []kv.Kind{kv.Stored, kv.Removed, kv.Cleared} {
		kinds[k.String()] = k
	}
	type result struct {
		primary bool
		err     error
	}
	wants := map[string]result{
		"apply":                 {true, nil},
		"skip":                  {false, nil},
		"unknown_storage_tier":  {false, ErrUnknownStorageTier},
		"unsupported_residency": {false, ErrUnsupportedResidency},
	}
	type combo struct {
		tier StorageTier
		r    Residency
		k    kv.Kind
	}
	seen := map[combo]int{}
	for i, line := range strings.Split(string(golden(t, "targets_primary.txt")), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		tier, okT := tiers[f[0]]
		r, okR := residencies[f[min(1, len(f)-1)]]
		k, okK := kinds[f[min(2, len(f)-1)]]
		want, okW := wants[f[len(f)-1]]
		if len(f) != 4 || !okT || !okR || !okK || !okW {
			t.Fatalf("targets_primary.txt:%d: bad row %q", i+1, line)
		}
		if prev, dup := seen[combo{tier, r, k}]; dup {
			t.Errorf("targets_primary.txt:%d: repeats line %d", i+1, prev)
		}
		seen[combo{tier, r, k}] = i + 1
		ev := RouterEvent{StorageTier: tier, Residency: r, Event: CacheEvent{Kind: k}}
		got, err := ev.TargetsPrimary()
		if got != want.primary || !errors.Is(err, want.err) || (err == nil) != (want.err == nil) {
			t.Errorf("targets_primary.txt:%d: %v %q %v: TargetsPrimary() = %v, %v; want %s", i+1, tier, r, k, got, err, f[3])
		}
	}
	if n := int(TierUnknown+1) * int(residencyCount) * len(kinds); len(seen) != n {
		t.Errorf("targets_primary.txt has %d combinations, want all %d", len(seen), n)
	}
}

func TestResidency_ParseAndString(t *testing.T) {
	for _, r := range []Residency{ResidencyWorker, ResidencyCacheOwner} {
		got, err := ParseResidency(r.String())
		if err != nil || got != r {
			t.Errorf("ParseResidency(%q) = %v, %v; want %v", r.String(), got, err, r)
		}
	}
	for _, s := range []string{"", "Worker", "owner"} {
		if _, err := ParseResidency(s); !errors.Is(err, ErrUnsupportedResidency) {
			t.Errorf("ParseResidency(%q) error = %v, want ErrUnsupportedResidency", s, err)
		}
	}
}

func TestMMExtraInfo_AppendHashes(t *testing.T) {
	var none *MMExtraInfo
	if got := none.AppendHashes(nil); len(got) != 0 {
		t.Errorf("nil.AppendHashes = %v, want empty", got)
	}
	m := &MMExtraInfo{Objects: []MMObject{{Hash: 3}, {Hash: 1}}}
	if got := m.AppendHashes([]uint64{9}); !reflect.DeepEqual(got, []uint64{9, 3, 1}) {
		t.Errorf("AppendHashes([9]) = %v, want [9 3 1]", got)
	}
}
