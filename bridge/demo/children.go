package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// childLogBytes is how much of a child's stderr the demo keeps: enough for
// the lines it waits for and for the tail it prints when the child fails.
const childLogBytes = 256 << 10

// stopGrace is how long a child may drain after SIGINT before SIGKILL.
const stopGrace = 10 * time.Second

// tailLines is how many of a failed child's last log lines the demo prints.
const tailLines = 15

// capture is a concurrency-safe writer that keeps the last childLogBytes
// written to it.
type capture struct {
	mu sync.Mutex
	b  []byte
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.b = append(c.b, p...)
	if over := len(c.b) - childLogBytes; over > 0 {
		c.b = append(c.b[:0], c.b[over:]...)
	}
	return len(p), nil
}

func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.b)
}

// tail returns the last n lines.
func (c *capture) tail(n int) string {
	lines := strings.Split(strings.TrimRight(c.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// child is one `goindex` subcommand the demo runs: its own process group
// (so a terminal's Ctrl-C reaches only the demo, which stops children in
// order), killed by the kernel if the demo dies (Linux), stdout and stderr
// captured.
type child struct {
	name   string
	cmd    *exec.Cmd
	stdout capture
	stderr capture
	done   chan struct{}
	err    error // the exit, valid once done is closed

	mu       sync.Mutex
	stopping bool
}

// startChild starts bin with args. When the child exits before stop was
// called, died is called with an error naming it and its last log lines.
func startChild(name, bin string, args []string, died func(error)) (*child, error) {
	c := &child{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	c.cmd.SysProcAttr = childProcAttr()
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("demo: start %s: %w", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
		c.mu.Lock()
		expected := c.stopping
		c.mu.Unlock()
		if !expected {
			died(c.failure("exited unexpectedly"))
		}
	}()
	return c, nil
}

// failure describes the child's failure with its last log lines.
func (c *child) failure(what string) error {
	status := "still running"
	select {
	case <-c.done:
		status = fmt.Sprint(c.err)
		if c.err == nil {
			status = "exit status 0"
		}
	default:
	}
	return fmt.Errorf("%w: %s (pid %d) %s (%s); its last log lines:\n%s", ErrCheck, c.name, c.cmd.Process.Pid, what, status,
		indent(c.stderr.tail(tailLines), "    | "))
}

// waitLog waits until the child's stderr matches re and returns the match's
// submatches.
func (c *child) waitLog(ctx context.Context, re *regexp.Regexp, wait time.Duration) ([]string, error) {
	var m []string
	err := poll(ctx, wait, 10*time.Millisecond, func() error {
		if m = re.FindStringSubmatch(c.stderr.String()); m == nil {
			return fmt.Errorf("no log line matching %q", re)
		}
		return nil
	})
	if err != nil {
		return nil, c.failure(err.Error())
	}
	return m, nil
}

// stop asks the child to finish (SIGINT to its group), waits up to
// stopGrace, then kills it. It returns the child's exit error, nil for a
// clean exit.
func (c *child) stop() error {
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	select {
	case <-c.done:
		return c.err
	default:
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-c.done:
		return c.err
	case <-time.After(stopGrace):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
		return fmt.Errorf("demo: %s did not stop within %v after SIGINT (killed)", c.name, stopGrace)
	}
}

// poll calls fn every step until it returns nil, and returns its last error
// when wait passes or the context's cause when ctx ends first.
func poll(ctx context.Context, wait, step time.Duration, fn func() error) error {
	deadline := time.Now().Add(wait)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", wait, err)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(step):
		}
	}
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	var b bytes.Buffer
	for _, l := range strings.Split(s, "\n") {
		b.WriteString(prefix)
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// exitCode returns a finished command's exit status, or -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}
