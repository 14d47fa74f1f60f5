package follow

import (
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goindex/goindex/goindex/shm"
)

// Defaults of Config.
const (
	// DefaultMaxStaleness is the writer heartbeat age past which the
	// consumer counts as stopped: it touches the file every 100 ms, so 5 s
	// is fifty missed beats (and the age at which its load reports and RTTs
	// go stale too).
	DefaultMaxStaleness = 5 * time.Second
	// DefaultCheckEvery is how often Acquire looks for a new generation.
	DefaultCheckEvery = 100 * time.Millisecond
	// DefaultVerifyEvery is how long one integrity pass over every lane of
	// the file takes, a segment at a time: for the default 13 lanes of
	// 2^19 buckets one segment is 1 MiB of rows, about half a millisecond
	// of one core every 156 ms (shm's BenchmarkVerify: about 2 GiB/s).
	DefaultVerifyEvery = 10 * time.Second
)

// Config configures a Follower.
type Config struct {
	// MaxStaleness is the heartbeat age past which Health reports the
	// writer Stale; optional; default: DefaultMaxStaleness.
	MaxStaleness time.Duration
	// CheckEvery is how often Acquire checks the file (a new generation,
	// damage); optional; default: DefaultCheckEvery; negative: on every
	// Acquire.
	CheckEvery time.Duration
	// VerifyEvery is how long a background integrity pass over every
	// ready lane's segments takes (shm.Reader.VerifySegment, one segment
	// every VerifyEvery/64); optional; default: DefaultVerifyEvery;
	// negative: no background pass (Verify runs one by hand).
	VerifyEvery time.Duration
	// Clock is the time heartbeats are aged with; optional; default:
	// time.Now.
	Clock func() time.Time
}

func (c *Config) setDefaults() {
	if c.MaxStaleness <= 0 {
		c.MaxStaleness = DefaultMaxStaleness
	}
	switch {
	case c.CheckEvery == 0:
		c.CheckEvery = DefaultCheckEvery
	case c.CheckEvery < 0:
		c.CheckEvery = 0
	}
	if c.VerifyEvery == 0 {
		c.VerifyEvery = DefaultVerifyEvery
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
}

// State is how far a replica can be trusted (Health).
type State uint8

// States of Health, from healthy to worst. Their numbers are the C ABI's
// GOINDEX_DEGRADED_* reasons.
const (
	// Healthy: a replica is attached and its writer beats.
	Healthy State = iota
	// Missing: no replica is attached: none was given, or the file is
	// missing or unreadable.
	Missing
	// Damaged: the file at the path is not a valid replica file (corrupt,
	// truncated, foreign or of another version).
	Damaged
	// Stale: a replica is attached but its writer stopped: the heartbeat is
	// older than MaxStaleness (or never beat).
	Stale
)

var stateNames = [...]string{Healthy: "healthy", Missing: "replica-missing", Damaged: "replica-damaged", Stale: "consumer-stale"}

// String returns the state's name as route's degraded header gives it.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state-%d", uint8(s))
}

// Health is a Follower's verdict on its replica.
type Health struct {
	State      State
	Err        error  // why, when State is not Healthy
	Generation uint64 // attached generation; 0: none
	// BadLanes are the attached file's lanes that failed their integrity
	// check: left out of searches until their writer heals them. The
	// replica may still be Healthy for its other lanes.
	BadLanes uint64
	// IntegrityFailures counts lanes found bad since New; Faults counts
	// mapped reads that faulted.
	IntegrityFailures, Faults uint64
}

// Degraded reports whether routing on this replica is degraded.
func (h Health) Degraded() bool { return h.State != Healthy }

// Follower follows the replica file at one path: it attaches it, maps each
// new generation the consumer publishes (retiring the old mapping once its
// last search ends), and judges its health. Acquire and Health may run
// concurrently from any number of goroutines; Attach, Refresh and the
// checks Acquire runs serialize among themselves. Close must not race with
// the others.
type Follower struct {
	path  string
	cfg   Config
	cur   atomic.Pointer[View]
	start time.Time    // monotonic base of next
	next  atomic.Int64 // when the next check is due, ns since start

	mu      sync.Mutex
	lastErr atomic.Pointer[error] // the last attach failure; nil after a success
	dcs     atomic.Pointer[[]uint64]

	vmu      sync.Mutex // one verifier at a time
	failures atomic.Uint64
	faults   atomic.Uint64
	stop     chan struct{} // closed by Close: ends the background verifier
	stopOnce sync.Once
}

// New returns a Follower of the replica file at path; nothing is mapped
// until Attach, Refresh or Acquire's first check. Unless VerifyEvery is
// negative it starts the background integrity verifier, which Close stops.
func New(path string, cfg Config) *Follower {
	cfg.setDefaults()
	f := &Follower{path: path, cfg: cfg, start: time.Now(), stop: make(chan struct{})}
	if cfg.VerifyEvery > 0 {
		go f.verifier(cfg.VerifyEvery / shm.MaxSegments)
	}
	return f
}

// verifier checks one segment of the current file every tick until Close.
func (f *Follower) verifier(tick time.Duration) {
	t := time.NewTicker(max(tick, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
			if v := f.held(); v != nil {
				f.verifyStep(v)
				v.Release()
			}
		}
	}
}

// verifyStep verifies v's next segment and counts the lanes newly found
// bad.
func (f *Follower) verifyStep(v *View) {
	if !v.file {
		return
	}
	f.vmu.Lock()
	defer f.vmu.Unlock()
	f.failures.Add(uint64(bits.OnesCount64(v.verify())))
}

// Verify runs one whole integrity pass over the current file now (every
// segment of every ready lane) and returns the lanes that failed it; they
// are left out of searches until healed. Attach runs one before the new
// view serves.
func (f *Follower) Verify() uint64 {
	v := f.Acquire()
	if v == nil {
		return 0
	}
	defer v.Release()
	f.verifyAll(v)
	return v.Bad()
}

func (f *Follower) verifyAll(v *View) {
	for range v.r.Segments() {
		f.verifyStep(v)
	}
}

// Path returns the followed path.
func (f *Follower) Path() string { return f.path }

// Attach maps the file at the path now, replacing the current view (which
// is unmapped once no search uses it). On error the current view, if any,
// keeps serving: ErrNoReplica for a file that cannot be opened, shm's
// sentinels for one that is not a valid replica file.
func (f *Follower) Attach() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attach()
}

func (f *Follower) attach() error {
	r, err := shm.Attach(f.path)
	if err != nil {
		if !errors.Is(err, shm.ErrForeign) && !errors.Is(err, shm.ErrVersion) && !errors.Is(err, shm.ErrCorrupt) {
			err = fmt.Errorf("%w: %w", ErrNoReplica, err)
		}
		f.lastErr.Store(&err)
		return err
	}
	f.lastErr.Store(nil)
	v := newView(r, true)
	v.onFault = f.faulted
	f.verifyAll(v) // verified on attach: a damaged lane never serves
	f.dcs.Store(&v.dcs)
	f.swap(v)
	f.next.Store(int64(time.Since(f.start) + f.cfg.CheckEvery))
	return nil
}

// swap installs v (nil: none) and retires the view it replaces. The new
// view is stored first, so a search that finds the old one retired finds
// its successor on its next load.
func (f *Follower) swap(v *View) {
	if old := f.cur.Swap(v); old != nil {
		old.retire()
	}
}

// Refresh checks the file now: it attaches it when no view is held, and
// its new generation when the consumer replaced the held one (shm's Stale:
// retired, or another file at the path). A held view whose file was
// damaged in place (shm.Reader.Check: truncated, its header changed, a read
// faulted) is retired at once, whether or not a valid file replaces it. It
// reports whether the view changed. A failed attach otherwise keeps the
// held view serving (its signals age out by their own timestamps) and is
// what Health reports.
func (f *Follower) Refresh() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refresh()
}

func (f *Follower) refresh() (bool, error) {
	f.next.Store(int64(time.Since(f.start) + f.cfg.CheckEvery))
	if old := f.cur.Load(); old != nil {
		if err := old.r.Check(); err != nil {
			// Damaged in place (truncated, its header overwritten) or a
			// search of it faulted: stop reading it, and take whatever
			// the path names now.
			f.swap(nil)
			f.lastErr.Store(&err)
			if err := f.attach(); err != nil {
				return true, err
			}
			return true, nil
		}
		stale, err := old.r.Stale()
		switch {
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			err = fmt.Errorf("%w: %w", ErrNoReplica, err)
			f.lastErr.Store(&err)
			return false, err
		case err == nil && !stale:
			f.lastErr.Store(nil)
			return false, nil
		}
		// Replaced, or the path is gone (the consumer recreates it):
		// look for the file the path names now.
	}
	if err := f.attach(); err != nil {
		return false, err
	}
	return true, nil
}

// faulted is a view's report that a search of its mapping faulted: the
// next Acquire checks the file at once (and retires the view).
func (f *Follower) faulted(*View) {
	f.faults.Add(1)
	f.next.Store(0)
}

// Acquire returns the current view with a reference taken (Release it), or
// nil when none is attached. When a check is due (CheckEvery) one caller
// runs Refresh first; the others skip it rather than wait, except with a
// check on every call, where a caller waits for a check in progress and
// runs its own: that check may have begun before the caller's file
// change, and every call promises to see it.
func (f *Follower) Acquire() *View {
	if v := f.cur.Load(); v != nil && v.r.Faulted() != nil {
		f.next.Store(0) // a read of the mapping faulted: check it now
	}
	if f.due() {
		if f.cfg.CheckEvery == 0 {
			f.mu.Lock()
		} else if !f.mu.TryLock() {
			return f.held()
		}
		if f.due() {
			_, _ = f.refresh()
		}
		f.mu.Unlock()
	}
	return f.held()
}

// due reports whether a check of the file is due.
func (f *Follower) due() bool { return time.Since(f.start) >= time.Duration(f.next.Load()) }

// held returns the current view with a reference taken, or nil, without
// the check Acquire may run first (the background verifier's access: its
// ticks must not take a check's turn from a caller).
func (f *Follower) held() *View {
	for {
		v := f.cur.Load()
		if v == nil || v.acquire() {
			return v
		}
	}
}

// DCs returns the DC id of each lane of the last file attached (nil before
// any), which stays known while no valid file is: degraded routing still
// chooses among them.
func (f *Follower) DCs() []uint64 {
	if p := f.dcs.Load(); p != nil {
		return *p
	}
	return nil
}

// Health returns the follower's verdict: Missing or Damaged (with the
// attach error) when no view is held, Stale when the held view's writer
// stopped beating, else Healthy. A held view whose file was replaced by an
// invalid one keeps serving until the next valid generation, and is
// reported by its heartbeat.
func (f *Follower) Health() Health {
	v := f.Acquire()
	if v == nil {
		h := Health{State: Missing, Err: ErrNoReplica, IntegrityFailures: f.failures.Load(), Faults: f.faults.Load()}
		if e := f.lastErr.Load(); e != nil {
			h.Err = *e
			if !errors.Is(h.Err, ErrNoReplica) {
				h.State = Damaged
			}
		}
		return h
	}
	defer v.Release()
	h := Health{Generation: v.gen, BadLanes: v.Bad(), IntegrityFailures: f.failures.Load(), Faults: f.faults.Load()}
	if err := v.r.Faulted(); err != nil {
		h.State, h.Err = Damaged, err // retired at the next check
		return h
	}
	hb := v.Heartbeat()
	now := f.cfg.Clock()
	switch age := now.Sub(hb); {
	case hb.IsZero():
		h.State, h.Err = Stale, fmt.Errorf("%w: the consumer never beat", ErrStale)
	case age > f.cfg.MaxStaleness:
		h.State, h.Err = Stale, fmt.Errorf("%w: the consumer's heartbeat is %v old (limit %v)", ErrStale, age.Round(time.Millisecond), f.cfg.MaxStaleness)
	}
	return h
}

// Close retires the current view and stops the background verifier; later
// Acquires find none until Attach.
func (f *Follower) Close() {
	f.stopOnce.Do(func() { close(f.stop) })
	f.mu.Lock()
	defer f.mu.Unlock()
	f.swap(nil)
	f.next.Store(1<<63 - 1) // no more checks
}
