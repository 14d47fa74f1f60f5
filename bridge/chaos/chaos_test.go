package chaos

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseKinds_ReadsEveryNameBackAndTheGroups(t *testing.T) {
	var names []string
	for _, k := range AllKinds() {
		names = append(names, k.String())
	}
	got, err := ParseKinds(strings.Join(names, ", "))
	if err != nil || !slices.Equal(got, AllKinds()) {
		t.Errorf("ParseKinds(every name) = %v, %v; want %v", got, err, AllKinds())
	}
	if got, err := ParseKinds("default,kill-hub-nats"); err != nil || !slices.Equal(got, append(DefaultKinds(), KillHubNATS)) {
		t.Errorf("ParseKinds(default,kill-hub-nats) = %v, %v; want DefaultKinds then KillHubNATS", got, err)
	}
	if got, err := ParseKinds("all"); err != nil || len(got) != int(kindCount) {
		t.Errorf("ParseKinds(all) = %v, %v; want all %d", got, err, kindCount)
	}
	if _, err := ParseKinds("kill-relay,kill-everything"); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "kill-everything") {
		t.Errorf("ParseKinds(unknown) = %v, want ErrConfig naming it", err)
	}
}

// fakeBuild returns a build directory holding empty stand-ins for the
// binaries Run checks for.
func fakeBuild(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"goindex", "nats-server", "libgoindex.so"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRun_RefusesABadConfigBeforeStartingAnything(t *testing.T) {
	build := fakeBuild(t)
	for name, cfg := range map[string]Config{
		"no build":        {Root: "../.."},
		"build not built": {Build: t.TempDir(), Root: "../.."},
		"not a checkout":  {Build: build, Root: t.TempDir()},
		"one DC":          {Build: build, Root: "../..", DCs: 1},
		"too many DCs":    {Build: build, Root: "../..", DCs: MaxDCs + 1},
		"no clients":      {Build: build, Root: "../..", Clients: -1},
		"negative hold":   {Build: build, Root: "../..", Hold: -time.Second},
		"unknown fault":   {Build: build, Root: "../..", Faults: []Kind{kindCount}},
	} {
		rep, err := Run(context.Background(), cfg)
		if !errors.Is(err, ErrConfig) || rep != nil {
			t.Errorf("%s: Run = %v, %v; want no report and ErrConfig", name, rep, err)
		}
	}
}

func TestReport_TableSumsTheRowsAndListsViolations(t *testing.T) {
	rep := &Report{DCs: 2, Rounds: 1, Rows: []Row{
		{Fault: "warm-up", Served: 10},
		{Fault: "kill-router", Injected: 2, Served: 50, RouterDown: 7, Recoveries: []time.Duration{time.Second, 3 * time.Second, 2 * time.Second}},
		{Fault: "partition", Injected: 1, Served: 40, Failed: 1, Recoveries: []time.Duration{500 * time.Millisecond}},
	}}
	tot := rep.Total()
	if tot.Injected != 3 || tot.Served != 100 || tot.Failed != 1 || tot.RouterDown != 7 || tot.RecoverMax() != 3*time.Second {
		t.Errorf("Total() = %+v, want 3 injected, 100 served, 1 failed, 7 router down, max 3s", tot)
	}
	if m := rep.Rows[1].RecoverMedian(); m != 2*time.Second {
		t.Errorf("RecoverMedian(1s, 3s, 2s) = %v, want 2s", m)
	}
	var b strings.Builder
	rep.Table(&b)
	for _, want := range []string{"kill-router", "50", "2s", "3s", "total", "100", "no violation"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("Table() lacks %q:\n%s", want, b.String())
		}
	}
	rep.Violations = []string{"route exited on its own"}
	b.Reset()
	rep.Table(&b)
	if !strings.Contains(b.String(), "1 violation(s):\n  - route exited on its own") {
		t.Errorf("Table() with a violation:\n%s", b.String())
	}
}
