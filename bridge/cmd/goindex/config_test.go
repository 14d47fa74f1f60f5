package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// helpFlagLine matches one flag of flag.PrintDefaults: "  -name type".
var helpFlagLine = regexp.MustCompile(`(?m)^  -([a-z0-9][a-z0-9-]*)(?: (.+))?$`)

// numericTypes are the type words flag.PrintDefaults shows for numbers.
var numericTypes = map[string]bool{"int": true, "int64": true, "uint": true, "uint64": true, "float": true, "duration": true}

// helpFlags returns the flags a --help text lists, with each one's usage
// text (the indented lines under it); a numeric flag's usage is prefixed
// by "#" so callers can tell them apart.
func helpFlags(text string) map[string]string {
	out := map[string]string{}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		m := helpFlagLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var usage []string
		for j := i + 1; j < len(lines) && strings.HasPrefix(lines[j], "    \t"); j++ {
			usage = append(usage, strings.TrimSpace(lines[j]))
		}
		out[m[1]] = strings.Join(usage, " ")
		if numericTypes[m[2]] {
			out[m[1]] = "#" + out[m[1]]
		}
	}
	return out
}

// helpInvocations is every command line that must answer --help: each
// subcommand, and each benchmark under bench.
func helpInvocations() [][]string {
	var out [][]string
	for _, c := range commands {
		if c.name == "bench" {
			for _, bm := range benchmarks {
				out = append(out, []string{"bench", bm.name, "--help"})
			}
			continue
		}
		out = append(out, []string{c.name, "--help"})
	}
	return out
}

func TestHelp_EveryCommandExitsZeroAndListsItsFlags(t *testing.T) {
	for _, args := range helpInvocations() {
		var stdout, stderr bytes.Buffer
		err := dispatch(context.Background(), args, &stdout, &stderr)
		if code := exitCode(err); code != 0 || !errors.Is(err, flag.ErrHelp) {
			t.Errorf("goindex %v: error %v, exit %d; want flag.ErrHelp, exit 0", args, err, code)
			continue
		}
		text := stdout.String() + stderr.String()
		if !strings.Contains(text, "Usage: goindex "+strings.Join(args[:len(args)-1], " ")) {
			t.Errorf("goindex %v: no usage line naming the command in %q", args, firstLine(text))
		}
		flags := helpFlags(text)
		if _, connects := flags["nats-creds"]; connects && !strings.Contains(text, "NATS security (with --nats") {
			t.Errorf("goindex %v has the --nats-* flags but no NATS security paragraph", args)
		}
		if _, ok := flags["config"]; !ok || len(flags) < 2 {
			t.Errorf("goindex %v lists flags %v, want --config and the command's own", args, flagNames(flags))
		}
		for name, usage := range flags {
			if strings.TrimPrefix(usage, "#") == "" {
				t.Errorf("goindex %v: --%s has no usage text", args, name)
			}
			// A number's default is printed unless it is zero; then the
			// text must say what zero means (or that the flag is required).
			if strings.HasPrefix(usage, "#") && !strings.Contains(usage, "(default ") &&
				!strings.Contains(usage, "0") && !strings.Contains(usage, "required") {
				t.Errorf("goindex %v: --%s defaults to zero without saying what zero means: %q", args, name, usage[1:])
			}
		}
		// Every listed flag is one the command accepts: setting it from its
		// own listing never yields "flag provided but not defined".
		for name := range flags {
			var so, se bytes.Buffer
			err := dispatch(context.Background(), append(append(args[:len(args)-1:len(args)-1], "--"+name+"="+probeValue(text, name)), "--help"), &so, &se)
			if err != nil && strings.Contains(err.Error(), "not defined") {
				t.Errorf("goindex %v: listed flag --%s is not accepted: %v", args, name, err)
			}
		}
	}
}

// probeValue is a value for flag name taken from its "(default …)" in the
// help text, or "" when it has none.
func probeValue(text, name string) string {
	i := strings.Index(text, "\n  -"+name)
	if i < 0 {
		return ""
	}
	rest := text[i+1:]
	if j := strings.Index(rest[1:], "\n  -"); j >= 0 {
		rest = rest[:j+1]
	}
	if k := strings.Index(rest, "(default "); k >= 0 {
		v := rest[k+len("(default "):]
		if e := strings.IndexByte(v, ')'); e >= 0 {
			return strings.Trim(v[:e], `"`)
		}
	}
	if strings.HasPrefix(rest, "  -"+name+"\n") { // a bool
		return "false"
	}
	return ""
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func flagNames(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// hashJSON runs goindex hash --json with args and returns its block size
// and token count.
func hashJSON(t *testing.T, args ...string) (blockSize, tokens int, err error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := runHash(context.Background(), append(args, "--json"), &stdout, &stderr); err != nil {
		return 0, 0, err
	}
	var out struct {
		BlockSize int `json:"block_size"`
		Tokens    int `json:"tokens"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("hash %v: output %q: %v", args, stdout.String(), err)
	}
	return out.BlockSize, out.Tokens, nil
}

func TestConfig_CommandLineBeatsEnvironmentBeatsFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "goindex.conf")
	if err := os.WriteFile(file, []byte("# hash settings\nblock-size 2\ntokens 1,2,3,4,5,6,7,8\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if bs, n, err := hashJSON(t, "--config", file); err != nil || bs != 2 || n != 8 {
		t.Errorf("hash --config (block-size 2, 8 tokens) = block size %d, %d tokens, %v; want 2, 8", bs, n, err)
	}
	t.Setenv("GOINDEX_BLOCK_SIZE", "4")
	if bs, n, err := hashJSON(t, "--config", file); err != nil || bs != 4 || n != 8 {
		t.Errorf("hash --config with GOINDEX_BLOCK_SIZE=4 = block size %d, %d tokens, %v; want 4 (env over file), 8 (file)", bs, n, err)
	}
	t.Setenv("GOINDEX_CONFIG", file)
	if bs, _, err := hashJSON(t); err != nil || bs != 4 {
		t.Errorf("hash with GOINDEX_CONFIG and GOINDEX_BLOCK_SIZE=4 = block size %d, %v; want 4", bs, err)
	}
	if bs, n, err := hashJSON(t, "--config", file, "--block-size", "8", "--tokens", "1,2,3"); err != nil || bs != 8 || n != 3 {
		t.Errorf("hash --block-size 8 --tokens 1,2,3 over env and file = block size %d, %d tokens, %v; want 8, 3 (command line wins)", bs, n, err)
	}
}

func TestConfig_BadValuesAreUsageErrorsNamingTheFlag(t *testing.T) {
	dir := t.TempDir()
	unknown := filepath.Join(dir, "unknown.conf")
	badValue := filepath.Join(dir, "bad.conf")
	os.WriteFile(unknown, []byte("block-size 4\nno-such-flag 1\n"), 0o600)
	os.WriteFile(badValue, []byte("block-size four\n"), 0o600)
	for _, c := range []struct {
		what string
		env  map[string]string
		args []string
		want string
	}{
		{"env value not a number", map[string]string{"GOINDEX_BLOCK_SIZE": "abc"}, []string{"--tokens", "1"}, "GOINDEX_BLOCK_SIZE"},
		{"config file names an unknown flag", nil, []string{"--config", unknown, "--tokens", "1"}, "no-such-flag"},
		{"config file value not a number", nil, []string{"--config", badValue, "--tokens", "1"}, "block-size"},
		{"config file missing", nil, []string{"--config", filepath.Join(dir, "missing.conf")}, "missing.conf"},
		{"validated after parsing", nil, []string{"--block-size", "0", "--tokens", "1"}, "--block-size must be > 0"},
	} {
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		_, _, err := hashJSON(t, c.args...)
		if !errors.Is(err, errUsage) || exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("hash (%s) %v = %v, want a usage error (exit 2) naming %q", c.what, c.args, err, c.want)
		}
		for k := range c.env {
			os.Unsetenv(k)
		}
	}
}
