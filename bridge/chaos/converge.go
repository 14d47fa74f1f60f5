package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/nats-io/nats.go/jetstream"
)

// Bounds of a checkpoint's parts.
const (
	// hostCheckPaths is the most tracked paths a host check probes.
	hostCheckPaths = 2000
	// maxCheckHashes is the longest path tests/chaos/host/host.c reads; longer
	// paths are probed by their first maxCheckHashes blocks.
	maxCheckHashes = 256
	// maxSnapshotBytes bounds a relay snapshot the run reads back.
	maxSnapshotBytes = 256 << 20
	// freshEvents is how many events every DC publishes as a checkpoint
	// starts: the system has recovered only once new data goes through.
	freshEvents = 20
)

// dcState is one DC as a checkpoint sees it: still (its events paused).
type dcState struct {
	words   []uint64   // the relay's producer words (a fresh stored snapshot)
	tracked []uint64   // canonical hashes of the blocks its workers hold
	paths   [][]uint64 // their local-hash paths from the root
}

// checkpoint publishes freshEvents more events at every DC, stops the
// workload's events and waits until the whole system holds the producers'
// state again, then lets the events resume:
//
//   - every relay has received every event published since it started;
//   - every lane of the replica file is ready and holds, word for word,
//     its relay's producer filter (the relay's fresh snapshot);
//   - every block a DC's workers hold is found in its lane (no false
//     negative), read in Go and, through libgoindex.so, by the C host that
//     has lived through the faults;
//   - the router's /readyz names every DC eligible.
//
// It returns how long each part took once all hold, or the first part
// still failing after total.
func (r *run) checkpoint(ctx context.Context, total time.Duration) (string, error) {
	deadline := time.Now().Add(total)
	left := func() time.Duration { return max(time.Until(deadline), time.Second) }
	var stages []string
	stage := func(name string, since time.Time) {
		stages = append(stages, name+" "+time.Since(since).Round(10*time.Millisecond).String())
	}
	for _, d := range r.dcs {
		if err := d.feed.publish(freshEvents); err != nil {
			return "", err
		}
		if err := d.feed.pause(); err != nil {
			return "", err
		}
	}
	defer func() {
		for _, d := range r.dcs {
			d.feed.resume()
		}
	}()
	at := time.Now()
	states := make([]dcState, len(r.dcs))
	for i, d := range r.dcs {
		var published uint64
		published, states[i].tracked, states[i].paths = d.feed.state()
		err := poll(ctx, left(), func() error {
			got, err := d.relayMessages()
			if err != nil {
				return fmt.Errorf("%s relay metrics: %w", d.name, err)
			}
			if got != published {
				return fmt.Errorf("%s relay received %d of the %d events published since it started", d.name, got, published)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	stage("relays", at)
	at = time.Now()
	// waited keeps the last reason the replica stage waited.
	var waited error
	tracked := func(fn func() error) func() error {
		return func() error {
			err := fn()
			if err != nil {
				waited = err
			}
			return err
		}
	}
	// The lanes catch up before the relays are asked for fresh snapshots:
	// a snapshot stored while a consumer downloads the previous one can
	// stall that download.
	if err := poll(ctx, left(), tracked(r.lanesCaughtUp)); err != nil {
		return "", err
	}
	for i, d := range r.dcs {
		if err := poll(ctx, left(), func() (err error) {
			states[i].words, err = d.snapshotWords(ctx)
			return err
		}); err != nil {
			return "", err
		}
	}
	if err := poll(ctx, left(), tracked(func() error { return r.replicaHolds(states) })); err != nil {
		return "", err
	}
	stage("replica", at)
	if time.Since(at) > time.Second && waited != nil {
		stages[len(stages)-1] += " (waiting on: " + waited.Error() + ")"
	}
	at = time.Now()
	if err := poll(ctx, left(), r.routerReady); err != nil {
		return "", err
	}
	stage("router", at)
	at = time.Now()
	if err := poll(ctx, left(), func() error { return r.hostFinds(ctx, states) }); err != nil {
		return "", err
	}
	stage("host", at)
	return strings.Join(stages, ", "), nil
}

// snapshotWords asks DC d's relay to store a fresh snapshot and reads it
// back from the DC's JetStream: the producer's filter words now.
func (d *dc) snapshotWords(ctx context.Context) ([]uint64, error) {
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	names := d.names()
	if _, err := d.nc.RequestWithContext(c, names.SnapshotSubject(), nil); err != nil {
		return nil, fmt.Errorf("%s snapshot request: %w", d.name, err)
	}
	js, err := jetstream.New(d.nc)
	if err != nil {
		return nil, fmt.Errorf("%s jetstream: %w", d.name, err)
	}
	store, err := js.ObjectStore(c, names.SnapshotBucket())
	if err != nil {
		return nil, fmt.Errorf("%s snapshot store: %w", d.name, err)
	}
	obj, err := store.Get(c, relay.SnapshotObject)
	if err != nil {
		return nil, fmt.Errorf("%s stored snapshot: %w", d.name, err)
	}
	defer obj.Close()
	body, err := io.ReadAll(io.LimitReader(obj, maxSnapshotBytes+1))
	if err != nil || len(body) > maxSnapshotBytes {
		return nil, fmt.Errorf("%s stored snapshot: %d bytes read (limit %d): %v", d.name, len(body), maxSnapshotBytes, err)
	}
	var words []uint64
	for len(body) > 0 {
		m, rest, err := wire.Decode(body)
		if err != nil {
			return nil, fmt.Errorf("%s stored snapshot: %w", d.name, err)
		}
		body = rest
		s, ok := m.(*relayproto.Snapshot)
		if !ok || s.Offset != uint64(len(words)) || s.Offset+uint64(len(s.Words)) > s.Total {
			return nil, fmt.Errorf("%s stored snapshot: unexpected %v frame at word %d", d.name, m.Type(), len(words))
		}
		words = append(words, s.Words...)
		if uint64(len(words)) == s.Total {
			return words, nil
		}
	}
	return nil, fmt.Errorf("%s stored snapshot: incomplete at word %d", d.name, len(words))
}

// readView runs fn on the run's view of the replica file (attaching its
// current generation when needed). A read that faults (the file shrank
// under the mapping) is an error, not a crash of the driver.
func (r *run) readView(fn func(v *shm.Reader) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			r.closeView()
			err = fmt.Errorf("reading the replica faulted: %v", p)
		}
	}()
	v, err := r.attachView()
	if err != nil {
		return err
	}
	return fn(v)
}

// lane returns DC d's lane in v.
func (d *dc) lane(v *shm.Reader) (int, error) {
	lane := slices.Index(v.Info().DCs, uint64(d.id))
	if lane < 0 {
		return 0, fmt.Errorf("the replica has no lane for %s", d.name)
	}
	return lane, nil
}

// lanesCaughtUp returns nil once every DC's lane is ready under its
// relay's current incarnation and has installed the relay's last sequence.
func (r *run) lanesCaughtUp() error {
	infos := make([]relay.Info, len(r.dcs))
	for i, d := range r.dcs {
		msg, err := d.nc.Request(d.names().PingSubject(), nil, 5*time.Second)
		if err != nil {
			return fmt.Errorf("ping %s's relay: %w", d.name, err)
		}
		if infos[i], err = relay.DecodeInfo(msg.Data); err != nil {
			return fmt.Errorf("%s's relay: %w", d.name, err)
		}
	}
	return r.readView(func(v *shm.Reader) error {
		for i, d := range r.dcs {
			lane, err := d.lane(v)
			if err != nil {
				return err
			}
			li := v.Lane(lane)
			if v.Ready()&(1<<lane) == 0 || li.Incarnation != infos[i].Incarnation || li.Installed < infos[i].LastSequence {
				return fmt.Errorf("lane %d (%s): ready %v, incarnation %d at sequence %d; the relay is at %d of incarnation %d",
					lane, d.name, v.Ready()&(1<<lane) != 0, li.Incarnation, li.Installed, infos[i].LastSequence, infos[i].Incarnation)
			}
		}
		return nil
	})
}

// replicaHolds reads the replica file: every DC's lane ready, equal to
// its relay's words, and finding every tracked block.
func (r *run) replicaHolds(states []dcState) error {
	return r.readView(func(v *shm.Reader) error {
		f := v.Format()
		for i, d := range r.dcs {
			lane, err := d.lane(v)
			if err != nil {
				return err
			}
			if v.Ready()&(1<<lane) == 0 {
				return fmt.Errorf("lane %d (%s) is not ready", lane, d.name)
			}
			got := v.Table().AppendLane(nil, lane)
			if !slices.Equal(got, states[i].words) {
				diff := 0
				for j := range min(len(got), len(states[i].words)) {
					if got[j] != states[i].words[j] {
						diff++
					}
				}
				return fmt.Errorf("lane %d (%s): %d of %d words differ from the relay's", lane, d.name, diff, len(states[i].words))
			}
			for _, c := range states[i].tracked {
				if v.Table().Probe(f.Probe(c), 1<<lane) == 0 {
					return fmt.Errorf("lane %d (%s): tracked block %#x is missing (a false negative)", lane, d.name, c)
				}
			}
		}
		return nil
	})
}

// attachView returns the run's read-only view of the replica, attaching
// the file's current generation when the view is missing or stale.
func (r *run) attachView() (*shm.Reader, error) {
	if r.view != nil {
		if stale, err := r.view.Stale(); err == nil && !stale {
			return r.view, nil
		}
		r.closeView()
	}
	v, err := shm.Attach(r.replica)
	if err != nil {
		return nil, err
	}
	r.view = v
	return v, nil
}

// closeView unmaps the run's view (before a fault changes the file under
// it, and after a faulted read).
func (r *run) closeView() {
	if r.view != nil {
		r.view.Close()
		r.view = nil
	}
}

// hostFinds writes a sample of every DC's tracked paths with the depth
// each lane must reach at least, and has the C host probe them through
// libgoindex.so.
func (r *run) hostFinds(ctx context.Context, states []dcState) error {
	held := make([]map[uint64]bool, len(states))
	for i, s := range states {
		held[i] = make(map[uint64]bool, len(s.tracked))
		for _, c := range s.tracked {
			held[i][c] = true
		}
	}
	var b strings.Builder
	n := 0
	for i, s := range states {
		for _, j := range r.rng.Perm(len(s.paths))[:min(len(s.paths), hostCheckPaths/len(states))] {
			locals := s.paths[j][:min(len(s.paths[j]), maxCheckHashes)]
			chain := kv.AppendChain(nil, false, 0, locals)
			depth := 0
			for depth < len(chain) && held[i][chain[depth]] {
				depth++
			}
			if depth == 0 {
				continue // its root block was removed since: nothing to find
			}
			b.WriteString(strconv.FormatUint(uint64(r.dcs[i].id), 10) + " " + strconv.Itoa(depth) + " " + strconv.Itoa(len(locals)))
			for _, h := range locals {
				b.WriteString(" " + strconv.FormatUint(h, 10))
			}
			b.WriteByte('\n')
			n++
		}
	}
	path := filepath.Join(r.dir, "host-check")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("host check file: %w", err)
	}
	f, err := r.host.command(ctx, "check "+path, "check")
	if errors.Is(err, errExited) {
		return err
	}
	if err != nil {
		return err
	}
	if f["probes"] != strconv.Itoa(n) || f["below"] != "0" || f["errors"] != "0" {
		return fmt.Errorf("libgoindex.so in the C host: %d probes sent, answered %v", n, f)
	}
	return nil
}
