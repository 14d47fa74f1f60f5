package demo

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// hostScript is the library host (host.py): a Python ctypes program, so
// that libgoindex.so's Go runtime lives in its own process, never in the
// demo's.
//
//go:embed host.py
var hostScript []byte

// hostModule is the module host.py imports from its own directory
// (goindex_ctypes.py: include/goindex.h's structs and call signatures,
// which tests/python's suite imports too).
//
//go:embed goindex_ctypes.py
var hostModule []byte

// hostSkipExit is the exit status by which the host says the library lacks
// what the stage needs (GOINDEX_EUNAVAILABLE): the stage is skipped, not
// failed.
const hostSkipExit = 3

// hostPrompts is the file the library host reads: the DCs in lane order
// and the prompts to probe and score.
type hostPrompts struct {
	BlockSize int         `json:"block_size"`
	DCs       []hostDC    `json:"dcs"`
	Prompts   []hostQuery `json:"prompts"`
	// Show is how many of the first prompts the host prints.
	Show int `json:"show"`
}

type hostDC struct {
	ID        uint64  `json:"id"`
	Name      string  `json:"name"`
	Lane      int     `json:"lane"`
	GridRTTms float64 `json:"grid_rtt_ms"`
}

type hostQuery struct {
	Label       string   `json:"label"`
	LocalHashes []uint64 `json:"local_hashes"`
}

// hostResult is the file the library host writes.
type hostResult struct {
	LanesReady uint64       `json:"lanes_ready"`
	Generation uint64       `json:"generation"`
	Prompts    []hostAnswer `json:"prompts"`
}

// hostAnswer is the library's answer for one prompt: its depth per lane
// (goindex_probe) and its choice per policy (goindex_score).
type hostAnswer struct {
	Label  string                `json:"label"`
	Depth  []int                 `json:"depth"`
	Choice map[string]hostChoice `json:"choice"`
}

type hostChoice struct {
	Lane         int     `json:"lane"`
	DC           uint64  `json:"dc"`
	Eligible     int     `json:"eligible"`
	CachedBlocks int     `json:"cached_blocks"`
	Cost         float64 `json:"cost"`
}

// hostPolicies are the policies the host scores every prompt under.
var hostPolicies = []string{"ttft", "prefix-then-load", "load-only", "credit"}

// library runs the host on every replayed prompt (the few pickPrompts
// chooses first, printed) and checks its answers: the library's depth on
// every lane equals the Go searcher's read of the same file and is never
// below the DC's engines, and every policy chose a real lane.
func (d *demo) library(ctx context.Context) (string, error) {
	if d.cfg.Library == "" {
		return "", fmt.Errorf("%w: no libgoindex.so (./build.sh builds it beside goindex, where goindex demo looks; or --library)", ErrSkipped)
	}
	host := d.cfg.HostClient
	if len(host) == 0 {
		py, err := exec.LookPath("python3")
		if err != nil {
			return "", fmt.Errorf("%w: python3 is not on PATH (the library host is a ctypes script)", ErrSkipped)
		}
		script := filepath.Join(d.dir, "host.py")
		if err := os.WriteFile(script, hostScript, 0o644); err != nil {
			return "", fmt.Errorf("demo: write the library host: %w", err)
		}
		if err := os.WriteFile(filepath.Join(d.dir, "goindex_ctypes.py"), hostModule, 0o644); err != nil {
			return "", fmt.Errorf("demo: write the library host: %w", err)
		}
		host = []string{py, script}
	}
	all := take(d.view, d.fronts, d.replayed)
	shown := d.pickPrompts(all, d.replayed)
	ps := append(slices.Clone(shown), d.replayed...)
	l := take(d.view, d.fronts, ps)
	in, out := filepath.Join(d.dir, "host-prompts.json"), filepath.Join(d.dir, "host-answers.json")
	if err := d.writeHostPrompts(in, ps, len(shown)); err != nil {
		return "", err
	}
	args := append(slices.Clone(host[1:]), "--lib", d.cfg.Library, "--replica", d.replica, "--prompts", in, "--out", out)
	fmt.Fprintf(d.out, "  %s %s\n", filepath.Base(host[0]), strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, host[0], args...)
	cmd.WaitDelay = stopGrace
	last, err := d.stream(cmd, "  │ ")
	switch code := exitCode(err); {
	case code == hostSkipExit:
		return "", fmt.Errorf("%w: %s", ErrSkipped, last)
	case err != nil:
		return "", checkf("library host: %v (its last line: %s)", err, last)
	}
	var res hostResult
	b, err := os.ReadFile(out)
	if err == nil {
		err = json.Unmarshal(b, &res)
	}
	if err != nil {
		return "", checkf("library host's answers: %v", err)
	}
	picks, err := d.checkHost(&res, ps, l)
	if err != nil {
		return "", err
	}
	d.sum.LibraryPrompts = len(ps)
	fmt.Fprintf(d.out, "  checked: for %d prompts × %d DCs goindex_probe equals the Go searcher's depth and is never below the engines'\n",
		len(ps), len(d.wan.sites))
	fmt.Fprintf(d.out, "  goindex_score ttft chose %s\n", d.perDCLine(picks))
	return fmt.Sprintf("%d prompts probed and scored through the C ABI; 0 below exact", len(ps)), nil
}

// checkHost checks the host's answers against the look l of the prompts ps
// and returns how often ttft chose each DC.
func (d *demo) checkHost(res *hostResult, ps []prompt, l look) (map[string]int, error) {
	lanes := len(d.wan.sites)
	if res.LanesReady != uint64(lanes) || len(res.Prompts) != len(ps) {
		return nil, checkf("library host: %d lanes ready and %d answers, want %d and %d", res.LanesReady, len(res.Prompts), lanes, len(ps))
	}
	picks := map[string]int{}
	for i, a := range res.Prompts {
		if len(a.Depth) != lanes {
			return nil, checkf("goindex_probe(%s): %d lanes, want %d", ps[i].label, len(a.Depth), lanes)
		}
		for lane, got := range a.Depth {
			if got < l.exact[i][lane] {
				return nil, checkf("goindex_probe(%s) lane %d (%s) = %d blocks, below the engines' %d", ps[i].label, lane,
					d.wan.sites[lane].name, got, l.exact[i][lane])
			}
			if got != l.replica[i][lane] {
				return nil, checkf("goindex_probe(%s) lane %d (%s) = %d blocks, the Go searcher read %d from the same file", ps[i].label,
					lane, d.wan.sites[lane].name, got, l.replica[i][lane])
			}
		}
		for _, p := range hostPolicies {
			c, ok := a.Choice[p]
			if !ok || c.Lane < 0 || c.Lane >= lanes || c.DC != uint64(d.wan.sites[c.Lane].id) || c.Eligible < 1 {
				return nil, checkf("goindex_score(%s, %s) = %+v, want a lane of %d with its DC id", ps[i].label, p, c, lanes)
			}
		}
		picks[d.wan.sites[a.Choice["ttft"].Lane].name]++
	}
	return picks, nil
}

// pickPrompts returns up to one prompt per DC, the one that DC holds
// deepest, then a prompt no engine has seen.
func (d *demo) pickPrompts(l look, ps []prompt) []prompt {
	var out []prompt
	used := map[int]bool{}
	for lane, s := range d.wan.sites {
		best, depth := -1, 0
		for i := range ps {
			if !used[i] && l.exact[i][lane] > depth {
				best, depth = i, l.exact[i][lane]
			}
		}
		if best >= 0 {
			used[best] = true
			p := ps[best]
			p.label = fmt.Sprintf("%s (%d blocks; %s holds %d)", p.label, len(p.ids), s.name, depth)
			out = append(out, p)
		}
	}
	return append(out, d.freshPrompt(12))
}

// writeHostPrompts writes ps for the host, which prints the first show.
func (d *demo) writeHostPrompts(path string, ps []prompt, show int) error {
	hp := hostPrompts{BlockSize: blockSize, Show: show}
	for i, s := range d.wan.sites {
		hp.DCs = append(hp.DCs, hostDC{ID: uint64(s.id), Name: s.name, Lane: i, GridRTTms: float64(s.rtt) / float64(time.Millisecond)})
	}
	for _, p := range ps {
		hp.Prompts = append(hp.Prompts, hostQuery{Label: p.label, LocalHashes: p.locals})
	}
	b, err := json.Marshal(&hp)
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		return fmt.Errorf("demo: write the host's prompts: %w", err)
	}
	return nil
}
