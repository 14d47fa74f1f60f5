package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/nats-io/nats.go/jetstream"
)

// TestRelay_SIGTERMDrainsAndTheReplicaStaysConsistent runs the relay on a
// context from signal.NotifyContext, as main does, and a consumer beside
// it; then the test process sends itself SIGTERM. The relay must end
// cleanly with a drain marker as the delta log's last message, naming its
// last sequence; the consumer must acknowledge it at exactly that sequence,
// and after the consumer stops its replica still holds every tracked block
// (words intact, ready bit cleared for readers).
func TestRelay_SIGTERMDrainsAndTheReplicaStaysConsistent(t *testing.T) {
	seed := relaytest.Seed(t, 33)
	srv, nc := natstest.Start(t)
	sigCtx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stopSignals()
	var relayOut, relayErr syncBuffer
	relayDone := make(chan error, 1)
	go func() {
		relayDone <- runRelay(sigCtx, []string{"--nats", srv.ClientURL(), "--dc", "6", "--component", "b6",
			"--expected-blocks", "4096", "--heartbeat-every", "20ms", "--status-every", "0", "--json"}, &relayOut, &relayErr)
	}()
	names := relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 6}
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		_, err := nc.Request(names.PingSubject(), nil, 200*time.Millisecond)
		return err
	})
	gen := relaytest.NewGenerator(seed, 3)
	for range 300 {
		if err := nc.Publish(dynamo.EventSubject("dynamo", "b6"), gen.Next()); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	path := filepath.Join(t.TempDir(), "replica")
	consumeOut, consumeLog, stopConsume, consumeDone := background(runConsume,
		"--nats", srv.ClientURL(), "--shm", path, "--dcs", "6", "--ping-every", "20ms", "--json")
	defer stopConsume()
	var reader *shm.Reader
	allTracked := func() error {
		f := reader.Format()
		for _, c := range gen.Tracked() {
			if reader.Table().Probe(f.Probe(c), 1) == 0 {
				return fmt.Errorf("tracked block %#x missing from the replica", c)
			}
		}
		return nil
	}
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if reader == nil {
			r, err := shm.Attach(path)
			if err != nil {
				return err
			}
			reader = r
		}
		return allTracked()
	})
	defer reader.Close()

	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatalf("kill -TERM self: %v", err)
	}
	select {
	case err := <-relayDone:
		if err != nil {
			t.Fatalf("relay after SIGTERM: %v; stderr: %s", err, relayErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("relay still running 30 s after SIGTERM")
	}
	var rst struct {
		Pools []struct {
			Publisher struct{ LastSequence uint64 }
		} `json:"pools"`
	}
	if err := json.Unmarshal([]byte(relayOut.String()), &rst); err != nil || len(rst.Pools) != 1 {
		t.Fatalf("relay --json output %q: %v", relayOut.String(), err)
	}
	last := rst.Pools[0].Publisher.LastSequence
	if last == 0 {
		t.Fatalf("relay published no delta: %s", relayOut.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, _ := jetstream.New(nc)
	stream, err := js.Stream(ctx, names.Stream())
	if err != nil {
		t.Fatalf("delta log: %v", err)
	}
	si, err := stream.Info(ctx)
	if err != nil {
		t.Fatalf("delta log info: %v", err)
	}
	raw, err := stream.GetMsg(ctx, si.State.LastSeq)
	if err != nil {
		t.Fatalf("last log message: %v", err)
	}
	m, _, err := wire.Decode(raw.Data)
	if dm, ok := m.(*relayproto.DrainMarker); err != nil || !ok || dm.Expected != last {
		t.Errorf("last delta log message = %T %+v, %v; want a drain marker expecting %d", m, m, err, last)
	}

	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if got := reader.Lane(0).Installed; got != last {
			return fmt.Errorf("replica lane installed %d, relay's last sequence %d", got, last)
		}
		// The marker follows the last delta in the log: the lane holds
		// the sequence before it has read the marker.
		if !strings.Contains(consumeLog.String(), "relay drained") {
			return fmt.Errorf("the consumer has not logged the drain marker yet")
		}
		return nil
	})
	stopConsume()
	if err := <-consumeDone; err != nil {
		t.Fatalf("consume: %v", err)
	}
	var cst struct {
		Lanes []struct {
			Installed uint64
			Drained   bool
		} `json:"lanes"`
	}
	if err := json.Unmarshal([]byte(consumeOut.String()), &cst); err != nil || len(cst.Lanes) != 1 {
		t.Fatalf("consume --json output %q: %v", consumeOut.String(), err)
	}
	// (Installed in the final status is the stopped lane's, 0; the replica
	// record above showed the sequence the marker was acknowledged at.)
	if !cst.Lanes[0].Drained {
		t.Errorf("consumer lane = %+v, want the drain marker acknowledged", cst.Lanes[0])
	}
	if err := allTracked(); err != nil {
		t.Errorf("after the consumer stopped: %v", err)
	}
	if got := reader.Ready(); got != 0 {
		t.Errorf("ready mask after the consumer stopped = %#x, want 0", got)
	}
	if !errors.Is(sigCtx.Err(), context.Canceled) {
		t.Errorf("signal context not cancelled by SIGTERM: %v", sigCtx.Err())
	}
}
