package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// hostSource is the C host's source in a checkout, hostInclude the
// directory of goindex.h.
const (
	hostSource  = "tests/chaos/host/host.c"
	hostInclude = "include"
)

// compileHost builds tests/chaos/host/host.c against the build's libgoindex.so
// into dir and returns the binary.
func compileHost(cfg *Config, dir string) (string, error) {
	cc := strings.Fields(cfg.CC)
	bin := filepath.Join(dir, "chaos_host")
	args := append(cc[1:], "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread",
		"-I", filepath.Join(cfg.Root, hostInclude), filepath.Join(cfg.Root, hostSource),
		"-L", cfg.Build, "-lgoindex", "-o", bin)
	if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: compile %s with %s: %v\n%s", ErrSetup, hostSource, cc[0], err, out)
	}
	return bin, nil
}

// host is the running C host: a proc whose stdin takes commands and whose
// stdout answers them one line each (tests/chaos/host/host.c).
type host struct {
	*proc
	mu    sync.Mutex
	in    io.WriteCloser
	lines chan string
}

// newHost returns the C host process for replica.
func newHost(r *run, bin string) (*host, error) {
	p, err := newProc(r.dir, "host", bin, []string{r.replica}, r.died)
	if err != nil {
		return nil, err
	}
	p.env = append(os.Environ(), "LD_LIBRARY_PATH="+r.cfg.Build)
	h := &host{proc: p}
	p.stdin = h.pipes
	return h, nil
}

// pipes gives a starting host fresh command pipes.
func (h *host) pipes(cmd *exec.Cmd) error {
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintf(h.log, "stdout: %s\n", sc.Text())
			lines <- sc.Text()
		}
	}()
	h.mu.Lock()
	h.in, h.lines = in, lines
	h.mu.Unlock()
	return nil
}

// up starts the host and waits until it attached the replica.
func (h *host) up(ctx context.Context) error {
	if err := h.start(); err != nil {
		return err
	}
	line, err := h.next(ctx, startWait)
	if err != nil || line != "ready" {
		return fmt.Errorf("chaos: host: first line %q (%v), want ready; its output:\n%s", line, err, indent(h.tail(12)))
	}
	return nil
}

// next returns the host's next stdout line.
func (h *host) next(ctx context.Context, total time.Duration) (string, error) {
	h.mu.Lock()
	lines := h.lines
	h.mu.Unlock()
	select {
	case line, ok := <-lines:
		if !ok {
			return "", errExited
		}
		return line, nil
	case <-time.After(total):
		return "", fmt.Errorf("no answer within %v", total)
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

// command sends one command and returns its answer's key=value fields
// (after the first word, which must be want).
func (h *host) command(ctx context.Context, cmd, want string) (map[string]string, error) {
	h.mu.Lock()
	_, err := io.WriteString(h.in, cmd+"\n")
	h.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("host %q: %w", cmd, err)
	}
	line, err := h.next(ctx, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("host %q: %w", cmd, err)
	}
	word, rest, _ := strings.Cut(line, " ")
	if word != want {
		return nil, fmt.Errorf("host %q answered %q", cmd, line)
	}
	fields := map[string]string{}
	for _, f := range strings.Fields(rest) {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	if e, ok := fields["error"]; ok {
		return nil, fmt.Errorf("host %q: %s", cmd, e)
	}
	return fields, nil
}

// hostCounts are the C host's counters since it started.
type hostCounts struct {
	probes, degraded, errors uint64
	lastError                string
}

// counts returns the host's counters.
func (h *host) counts(ctx context.Context) (hostCounts, error) {
	f, err := h.command(ctx, "status", "status")
	if err != nil {
		return hostCounts{}, err
	}
	var c hostCounts
	for name, p := range map[string]*uint64{"probes": &c.probes, "degraded": &c.degraded, "errors": &c.errors} {
		if *p, err = strconv.ParseUint(f[name], 10, 64); err != nil {
			return hostCounts{}, fmt.Errorf("host status %s=%q: %w", name, f[name], err)
		}
	}
	c.lastError = f["last_error"]
	return c, nil
}
