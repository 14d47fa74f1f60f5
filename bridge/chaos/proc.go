package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// tailBytes is how much of a log's end a failure report reads.
const tailBytes = 16 << 10

// proc is one child process of the run: started from a fixed binary and
// arguments, killed with SIGKILL and started again by faults, and watched
// all along: an exit that neither a fault nor the run's end asked for is
// reported to died. Its output goes straight to a log file in the run's
// directory (the child writes it itself), which waitLog and failure
// reports read from where the current start began.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	log  *os.File
	died func(name string, err error)
	// stdin, when set, is called before each start to give the child its
	// stdin and take its stdout instead of the log (the C host's command
	// channel).
	stdin func(cmd *exec.Cmd) error

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	err      error // the last exit, valid once done is closed
	expected bool  // the current process is meant to exit (killed, stopped)
	starts   int
	from     int64 // the log's size when the current process started
}

// newProc returns a proc whose output goes to dir/name.log.
func newProc(dir, name, bin string, args []string, died func(string, error)) (*proc, error) {
	f, err := os.OpenFile(dir+"/"+name+".log", os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("chaos: %s log: %w", name, err)
	}
	return &proc{name: name, bin: bin, args: args, log: f, died: died}, nil
}

// start runs the process. It must not be running.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.SysProcAttr = procAttr()
	cmd.Stderr = p.log
	if p.stdin != nil {
		if err := p.stdin(cmd); err != nil {
			return fmt.Errorf("chaos: %s pipes: %w", p.name, err)
		}
	} else {
		cmd.Stdout = p.log
	}
	fmt.Fprintf(p.log, "---- start %d: %s %s\n", p.starts+1, p.bin, strings.Join(p.args, " "))
	st, err := p.log.Stat()
	if err != nil {
		return fmt.Errorf("chaos: %s log: %w", p.name, err)
	}
	p.from = st.Size()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: start %s: %w", p.name, err)
	}
	p.cmd, p.done, p.expected = cmd, make(chan struct{}), false
	p.starts++
	go p.watch(cmd, p.done)
	return nil
}

// watch waits for cmd and reports an exit nobody asked for.
func (p *proc) watch(cmd *exec.Cmd, done chan struct{}) {
	err := cmd.Wait()
	p.mu.Lock()
	p.err = err
	expected := p.expected && p.cmd == cmd
	p.mu.Unlock()
	close(done)
	if !expected {
		p.died(p.name, fmt.Errorf("%s (pid %d) exited on its own (%v); its last output:\n%s",
			p.name, cmd.Process.Pid, exitStatus(err), indent(p.tail(12))))
	}
}

// pid returns the running process's id (0 before the first start).
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// startCount returns how many times the process was started.
func (p *proc) startCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// kill sends SIGKILL to the process (kill -9: no cleanup) and waits for it.
func (p *proc) kill() { p.end(syscall.SIGKILL, 0) }

// stop asks the process to finish (SIGTERM), waits up to grace, then
// kills it.
func (p *proc) stop(grace time.Duration) { p.end(syscall.SIGTERM, grace) }

// end marks the process as meant to exit, sends it sig and waits for it,
// killing it after grace (0: wait as long as it takes).
func (p *proc) end(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.expected = true
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if grace > 0 {
		select {
		case <-done:
		case <-time.After(grace):
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	<-done
}

// close stops the process and closes its log.
func (p *proc) close(grace time.Duration) {
	p.stop(grace)
	p.log.Close()
}

// alive reports whether the last started process still runs.
func (p *proc) alive() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// output returns what the current process has written so far, or its
// last limit bytes when limit > 0.
func (p *proc) output(limit int64) string {
	p.mu.Lock()
	from := p.from
	p.mu.Unlock()
	st, err := p.log.Stat()
	if err != nil {
		return ""
	}
	if limit > 0 {
		from = max(from, st.Size()-limit)
	}
	b := make([]byte, max(0, st.Size()-from))
	n, _ := p.log.ReadAt(b, from)
	return string(b[:n])
}

// tail returns the current process's last n lines of output.
func (p *proc) tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.output(tailBytes), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitLog polls the output of the current process until re matches and
// returns the submatches; it fails when the process exits first or total
// passes.
func (p *proc) waitLog(ctx context.Context, re *regexp.Regexp, total time.Duration) ([]string, error) {
	var m []string
	err := poll(ctx, total, func() error {
		if m = re.FindStringSubmatch(p.output(0)); m != nil {
			return nil
		}
		if !p.alive() {
			return errExited
		}
		return fmt.Errorf("no output line matches %q", re)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w; its last output:\n%s", p.name, err, indent(p.tail(12)))
	}
	return m, nil
}

// errExited stops a poll on a process that is gone.
var errExited = errors.New("the process exited")

// pollEvery is the step of every condition the run waits for.
const pollEvery = 20 * time.Millisecond

// poll calls fn every pollEvery until it returns nil, and returns its last
// error when total passes, errExited at once, or the context's cause when
// ctx ends.
func poll(ctx context.Context, total time.Duration, fn func() error) error {
	deadline := time.Now().Add(total)
	for {
		err := fn()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errExited):
			return err
		case time.Now().After(deadline):
			return fmt.Errorf("not within %v: %w", total, err)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(pollEvery):
		}
	}
}

// exitStatus describes a process's exit.
func exitStatus(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit status 0"
	case errors.As(err, &ee):
		return ee.String()
	}
	return err.Error()
}

// indent prefixes every line of s with "    | ".
func indent(s string) string {
	return "    | " + strings.ReplaceAll(s, "\n", "\n    | ")
}
