package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/tests/c/fixture"
)

// maxProbeHashes is the longest query tests/c/global_test.c reads; longer
// paths are probed by their first maxProbeHashes blocks.
const maxProbeHashes = 256

// libraryHost compiles tests/c/global_test.c against $GOINDEX_BUILD's
// libgoindex.so into dir and returns the binary and the environment that
// loads that library. The library's Go runtime lives in that child process,
// never in this test's. Without GOINDEX_BUILD (a plain `go test`) the test
// is skipped; with it, the library and a C compiler must be there (./build.sh
// needs both).
func libraryHost(t *testing.T, dir string) (string, []string) {
	t.Helper()
	build := os.Getenv("GOINDEX_BUILD")
	if build == "" {
		t.Skip("no libgoindex.so: ./build.sh test builds one into $GOINDEX_BUILD")
	}
	build, err := filepath.Abs(build)
	if err != nil {
		t.Fatalf("GOINDEX_BUILD: %v", err)
	}
	if _, err := os.Stat(filepath.Join(build, "libgoindex.so")); err != nil {
		t.Fatalf("libgoindex.so: %v (./build.sh builds it into $GOINDEX_BUILD)", err)
	}
	cc := strings.Fields(os.Getenv("CC"))
	if len(cc) == 0 {
		cc = []string{"gcc"}
	}
	root := filepath.Join("..", "..")
	bin := filepath.Join(dir, "global_test")
	args := append(cc[1:], "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread",
		"-I", filepath.Join(root, "include"), "-I", filepath.Join(root, "tests", "c"),
		filepath.Join(root, "tests", "c", "global_test.c"), "-L", build, "-lgoindex", "-lm", "-o", bin)
	if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
		t.Fatalf("compile tests/c/global_test.c with %s: %v\n%s", cc[0], err, out)
	}
	return bin, append(os.Environ(), "LD_LIBRARY_PATH="+build)
}

// libraryScript writes the script global_test's attach mode runs: for every
// block a site's workers hold, a probe of its run from the root that must
// report, in every lane, at least that lane's exact depth (the leading
// blocks of the path its DC's workers hold), and the replica's counters.
// It returns the number of probes and how many of them its own lane holds
// whole (no ancestor removed since).
func (top *topology) libraryScript(path string, generation uint64) (probes, whole int, err error) {
	held := make([]map[uint64]bool, len(top.sites))
	for i, s := range top.sites {
		held[i] = map[uint64]bool{}
		for _, c := range s.gen.Tracked() {
			held[i][c] = true
		}
	}
	var sc fixture.Script
	sc.Config(fixture.ReplicaConfig())
	for si, s := range top.sites {
		for j, locals := range s.gen.TrackedPaths() {
			locals = locals[:min(len(locals), maxProbeHashes)]
			chain := kv.AppendChain(nil, false, 0, locals)
			var want []fixture.Overlap
			for lane, s := range top.sites {
				depth := 0
				for depth < len(chain) && held[lane][chain[depth]] {
					depth++
				}
				if depth > 0 {
					want = append(want, fixture.Overlap{DC: uint64(s.id), Lane: uint32(lane), Blocks: uint32(depth)})
				}
			}
			for _, o := range want {
				if o.Lane == uint32(si) && int(o.Blocks) == len(locals) {
					whole++
				}
			}
			sc.ProbeAtLeast(fmt.Sprintf("%s/%d", s.name, j), locals, want)
			probes++
		}
	}
	sc.Stats(fixture.Stats{LanesReady: uint64(len(top.sites)), ReplicaGeneration: generation})
	return probes, whole, os.WriteFile(path, []byte(sc.String()), 0o644)
}

// probeThroughLibrary runs global_test's attach mode (bin, with env) on
// the replica: the real libgoindex.so, in a child process, attaches the
// consumer's file and probes every block the producers track.
func (top *topology) probeThroughLibrary(t *testing.T, rp *replica, bin string, env []string) {
	t.Helper()
	dir := t.TempDir()
	r, err := rp.reader()
	if err != nil {
		t.Fatalf("replica reader: %v", err)
	}
	script := filepath.Join(dir, "probes.script")
	n, whole, err := top.libraryScript(script, r.Info().Generation)
	if err != nil {
		t.Fatalf("probe script: %v", err)
	}
	if whole == 0 {
		t.Fatalf("probe script: none of %d tracked blocks has its whole path held; the probes would prove nothing", n)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "attach", rp.path, script)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("global_test attach %s (%d probes): %v\nstdout: %s\nstderr: %s", rp.path, n, err, stdout.String(), stderr.String())
	}
	t.Logf("libgoindex.so probed %d tracked blocks of %d DCs (%d held whole from the root): %s", n, len(top.sites), whole,
		strings.TrimSpace(stdout.String()))
}
