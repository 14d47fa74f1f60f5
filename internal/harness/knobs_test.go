package harness

import (
	"errors"
	"slices"
	"testing"
)

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// TestKnobs_DefaultsAndOverrides checks the defaults (full and short) and
// that each variable overrides its knob, in short mode too.
func TestKnobs_DefaultsAndOverrides(t *testing.T) {
	full, err := knobsFrom(lookupIn(nil), false)
	if err != nil || full != (Knobs{Seeds: 40, SeedBase: 1, Steps: 2000, DocLen: 6, Shrink: true, Strict: true}) {
		t.Errorf("knobsFrom(empty, full) = %+v, %v; want 40 seeds from 1, 2000 steps, doc 6, shrink, strict", full, err)
	}
	short, _ := knobsFrom(lookupIn(nil), true)
	if short.Seeds != DefaultShortSeeds || short.Steps != DefaultShortSteps {
		t.Errorf("knobsFrom(empty, short) = %+v, want %d seeds × %d steps", short, DefaultShortSeeds, DefaultShortSteps)
	}
	env := map[string]string{
		"HARNESS_SEEDS": "3", "HARNESS_SEED_BASE": "100", "HARNESS_STEPS": "50", "HARNESS_DOC_LEN": "2",
		"HARNESS_SHRINK": "0", "HARNESS_STRICT": "0", "HARNESS_TRACE": "1",
	}
	k, err := knobsFrom(lookupIn(env), true)
	want := Knobs{Seeds: 3, SeedBase: 100, Steps: 50, DocLen: 2, Trace: true}
	if err != nil || k != want {
		t.Errorf("knobsFrom(%v, short) = %+v, %v; want %+v", env, k, err, want)
	}
	if got := k.SeedList(); !slices.Equal(got, []uint64{100, 101, 102}) {
		t.Errorf("SeedList() = %v, want [100 101 102]", got)
	}
	env["HARNESS_SEED"] = "0xff"
	k, _ = knobsFrom(lookupIn(env), false)
	if got := k.SeedList(); !slices.Equal(got, []uint64{255}) {
		t.Errorf("HARNESS_SEED=0xff: SeedList() = %v, want [255]", got)
	}
}

// TestKnobs_RejectMalformedValues checks that every malformed value is a
// *KnobError naming its variable.
func TestKnobs_RejectMalformedValues(t *testing.T) {
	for name, val := range map[string]string{
		"HARNESS_SEEDS": "0", "HARNESS_STEPS": "-5", "HARNESS_DOC_LEN": "x",
		"HARNESS_SEED_BASE": "-1", "HARNESS_SEED": "seven", "HARNESS_SHRINK": "yes",
		"HARNESS_STRICT": "2", "HARNESS_TRACE": "",
	} {
		_, err := knobsFrom(lookupIn(map[string]string{name: val}), false)
		var ke *KnobError
		if !errors.As(err, &ke) || ke.Name != name || ke.Value != val {
			t.Errorf("knobsFrom(%s=%q) = %v, want a *KnobError for it", name, val, err)
		}
	}
}
