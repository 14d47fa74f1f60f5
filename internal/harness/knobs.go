package harness

import (
	"os"
	"strconv"
)

// Short-mode defaults, used under testing.Short() (the race pass) unless a
// knob overrides them: a fifth of the seeds and of the steps.
const (
	DefaultSeeds      = 40
	DefaultShortSeeds = 8
	DefaultShortSteps = 400
)

// Knobs are the run parameters a developer sets from the environment
// (dynamo-compat §3.7).
type Knobs struct {
	Seeds    int    // HARNESS_SEEDS: seeds per run (default 40; short 8)
	SeedBase uint64 // HARNESS_SEED_BASE: first seed (default 1)
	// Seed and OneSeed come from HARNESS_SEED: run only that seed.
	Seed    uint64
	OneSeed bool
	Steps   int  // HARNESS_STEPS: generator steps per seed (default 2000; short 400)
	DocLen  int  // HARNESS_DOC_LEN: pool document length cap (default 6)
	Shrink  bool // HARNESS_SHRINK: shrink the first failing seed (default 1)
	Strict  bool // HARNESS_STRICT: undercounts and apply errors fail (default 1)
	Trace   bool // HARNESS_TRACE: log every op and checkpoint (default 0)
}

// DefaultKnobs returns the defaults; short selects the short-mode seed and
// step counts.
func DefaultKnobs(short bool) Knobs {
	k := Knobs{Seeds: DefaultSeeds, SeedBase: 1, Steps: DefaultSteps, DocLen: DefaultDocLen, Shrink: true, Strict: true}
	if short {
		k.Seeds, k.Steps = DefaultShortSeeds, DefaultShortSteps
	}
	return k
}

// KnobsFromEnv returns DefaultKnobs(short) overridden by the HARNESS_*
// variables that are set. A malformed value is a *KnobError.
func KnobsFromEnv(short bool) (Knobs, error) { return knobsFrom(os.LookupEnv, short) }

func knobsFrom(lookup func(string) (string, bool), short bool) (Knobs, error) {
	k := DefaultKnobs(short)
	ints := []struct {
		name string
		dst  *int
	}{{"HARNESS_SEEDS", &k.Seeds}, {"HARNESS_STEPS", &k.Steps}, {"HARNESS_DOC_LEN", &k.DocLen}}
	for _, v := range ints {
		raw, ok := lookup(v.name)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 {
			return k, &KnobError{Name: v.name, Value: raw, Reason: "want an integer ≥ 1"}
		}
		*v.dst = n
	}
	seeds := []struct {
		name string
		dst  *uint64
		set  *bool
	}{{"HARNESS_SEED_BASE", &k.SeedBase, nil}, {"HARNESS_SEED", &k.Seed, &k.OneSeed}}
	for _, v := range seeds {
		raw, ok := lookup(v.name)
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(raw, 0, 64)
		if err != nil {
			return k, &KnobError{Name: v.name, Value: raw, Reason: "want an unsigned 64-bit integer"}
		}
		*v.dst = n
		if v.set != nil {
			*v.set = true
		}
	}
	flags := []struct {
		name string
		dst  *bool
	}{{"HARNESS_SHRINK", &k.Shrink}, {"HARNESS_STRICT", &k.Strict}, {"HARNESS_TRACE", &k.Trace}}
	for _, v := range flags {
		raw, ok := lookup(v.name)
		if !ok {
			continue
		}
		switch raw {
		case "0":
			*v.dst = false
		case "1":
			*v.dst = true
		default:
			return k, &KnobError{Name: v.name, Value: raw, Reason: "want 0 or 1"}
		}
	}
	return k, nil
}

// SeedList returns the seeds to run: Seed alone when OneSeed, else Seeds
// consecutive seeds from SeedBase.
func (k Knobs) SeedList() []uint64 {
	if k.OneSeed {
		return []uint64{k.Seed}
	}
	seeds := make([]uint64, k.Seeds)
	for i := range seeds {
		seeds[i] = k.SeedBase + uint64(i)
	}
	return seeds
}
