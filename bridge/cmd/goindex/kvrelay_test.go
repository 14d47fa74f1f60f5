package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/shm"
	"github.com/goindex/goindex/internal/movable"
)

// kvrelayAddrPattern finds the address goindex relay serves the Pool Relay
// contract on, in its log.
var kvrelayAddrPattern = regexp.MustCompile(`pool relay contract served"?[ ,]"?addr"?[=:]"?([0-9.:]+)`)

// scrape returns the body of a GET of url.
func scrape(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// laneOf attaches the replica file at path and returns lane 0's words,
// record and ready bit.
func laneOf(path string) ([]uint64, shm.LaneInfo, bool, error) {
	r, err := shm.Attach(path)
	if err != nil {
		return nil, shm.LaneInfo{}, false, err
	}
	defer r.Close()
	return r.Table().AppendLane(nil, 0), r.Lane(0), r.Ready()&1 != 0, nil
}

// `goindex relay --kvrelay-listen` serves its pool in the Pool Relay
// contract: `goindex consume --upstream-relays` follows it into a replica
// lane byte-identical to the lane another consumer follows over NATS, and
// follows the relay's restart behind the same address (a new incarnation).
func TestRelay_KvRelayListenServesConsumeUpstreamRelays(t *testing.T) {
	seed := relaytest.Seed(t, 29)
	srv, nc := natstest.Start(t)
	relayArgs := []string{"--nats", srv.ClientURL(), "--dc", "5", "--component", "b5", "--expected-blocks", "4096",
		"--heartbeat-every", "20ms", "--load-every", "50ms", "--model", "Qwen/Qwen3-0.6B", "--worker-capacity-blocks", "64"}
	_, relayErr, stopRelay, relayDone := background(runRelay, append(relayArgs, "--kvrelay-listen", "127.0.0.1:0")...)
	addr := awaitLogged(t, "relay --kvrelay-listen", kvrelayAddrPattern, relayErr, relayDone)
	names := relay.Names{Prefix: relay.DefaultPrefix, Domain: 1, DC: 5}
	waitRelay(t, nc, names)
	dir := t.TempDir()
	viaGRPC, viaNATS := filepath.Join(dir, "grpc"), filepath.Join(dir, "nats")
	consumeArgs := []string{"--nats", srv.ClientURL(), "--dcs", "5", "--expected-blocks", "4096", "--retry-every", "20ms", "--ping-every", "20ms"}
	fwd := movable.New(t, addr) // the relay's address across its restart
	_, grpcErr, stopGRPC, grpcDone := background(runConsume, append(consumeArgs, "--shm", viaGRPC, "--upstream-relays", "5="+fwd.Addr(),
		"--metrics-addr", "127.0.0.1:0")...)
	metricsURL := metricsBase(t, grpcErr, grpcDone) + "/metrics"
	_, _, stopNATS, natsDone := background(runConsume, append(consumeArgs, "--shm", viaNATS)...)
	defer func() {
		stopGRPC()
		stopNATS()
		if err := errors.Join(<-grpcDone, <-natsDone); err != nil {
			t.Errorf("consume: %v; stderr of the gRPC one: %s", err, grpcErr.String())
		}
	}()
	gen := relaytest.NewGenerator(seed, 2)
	same := func(what string) shm.LaneInfo {
		t.Helper()
		attachReplicated(t, viaGRPC, gen, nil).Close() // every tracked block reached the lane
		var info shm.LaneInfo
		relaytest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
			a, ia, ra, err := laneOf(viaGRPC)
			if err != nil {
				return err
			}
			b, ib, rb, err := laneOf(viaNATS)
			if err != nil {
				return err
			}
			switch {
			case !ra || !rb:
				return fmt.Errorf("ready: via gRPC %v, via NATS %v", ra, rb)
			case ia.Incarnation != ib.Incarnation || ia.Installed != ib.Installed:
				return fmt.Errorf("via gRPC incarnation %d at %d, via NATS %d at %d", ia.Incarnation, ia.Installed, ib.Incarnation, ib.Installed)
			case !slices.Equal(a, b):
				return errors.New("the lanes' words differ")
			}
			info = ia
			return nil
		})
		t.Logf("%s: both lanes at %d of incarnation %d", what, info.Installed, info.Incarnation)
		return info
	}
	publishEvents := func(n int) {
		for range n {
			if err := nc.Publish(dynamo.EventSubject("dynamo", "b5"), gen.Next()); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
	}
	publishEvents(200)
	before := same("200 events")
	if before.Installed == 0 {
		t.Error("the lanes converged before any delta")
	}
	relaytest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if _, info, _, err := laneOf(viaGRPC); err != nil || info.Load.CapacityBlocks != 128 {
			return fmt.Errorf("the gRPC lane's load %+v (err %v), want 128 blocks of capacity (2 workers × 64)", info.Load, err)
		}
		return nil
	})
	// Events after both lanes follow the relay reach them as deltas (the
	// 200 may have gone out in one delta before the gRPC lane subscribed,
	// then its snapshot held them all).
	publishEvents(20)
	if more := same("20 more events"); more.Installed <= before.Installed {
		t.Errorf("after 20 more events the lanes are at %d, want past %d", more.Installed, before.Installed)
	}
	// The upstream lane's metrics read as a native lane's.
	relaytest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		body, err := scrape(metricsURL)
		if err != nil {
			return err
		}
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`goindex_consume_lane_state\{dc="5",lane="0",state="READY"\} 1`),
			regexp.MustCompile(`goindex_consume_lane_rtt_seconds\{dc="5",lane="0"\} [0-9.e-]+`),
			regexp.MustCompile(`goindex_consume_lane_deltas_applied_total\{dc="5",lane="0"\} [1-9]`),
			regexp.MustCompile(`goindex_consume_lane_frames_received_total\{dc="5",lane="0",type="heartbeat"\} [1-9]`),
			regexp.MustCompile(`goindex_consume_lane_load_capacity_blocks\{dc="5",lane="0"\} 128`),
		} {
			if !want.MatchString(body) {
				return fmt.Errorf("the gRPC consumer's metrics lack %s", want)
			}
		}
		return nil
	})

	stopRelay()
	if err := <-relayDone; err != nil {
		t.Fatalf("relay: %v; stderr: %s", err, relayErr.String())
	}
	_, relayErr, stopRelay, relayDone = background(runRelay, append(relayArgs, "--kvrelay-listen", "127.0.0.1:0")...)
	defer func() {
		stopRelay()
		if err := <-relayDone; err != nil {
			t.Errorf("restarted relay: %v; stderr: %s", err, relayErr.String())
		}
	}()
	fwd.Point(awaitLogged(t, "the restarted relay", kvrelayAddrPattern, relayErr, relayDone))
	gen.Forget()
	waitRelay(t, nc, names)
	publishEvents(100)
	after := same("after a restart")
	if after.Incarnation <= before.Incarnation {
		t.Errorf("after the restart the lanes are of incarnation %d, want > %d", after.Incarnation, before.Incarnation)
	}
}

// goindex relay --help explains the Pool Relay flags, and a bad role or
// block size of a served pool is a usage error.
func TestRelay_KvRelayFlagsInHelpAndUsageErrors(t *testing.T) {
	var out, errb bytes.Buffer
	if err := runRelay(context.Background(), []string{"--help"}, &out, &errb); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("relay --help = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"--kvrelay-listen", "-model string", "-worker-role string", "dynamo.kvrelay.v1", "SubscribeKvPoolLoad", "SubscribeServingReadiness", "SubscribeServingLoad"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("relay --help lacks %q", want)
		}
	}
	for name, args := range map[string][]string{
		"unknown role":    {"--dc", "1", "--kvrelay-listen", "127.0.0.1:0", "--worker-role", "chef"},
		"zero block size": {"--dc", "1", "--kvrelay-listen", "127.0.0.1:0", "--block-size", "0"},
		"bad model name":  {"--dc", "1", "--kvrelay-listen", "127.0.0.1:0", "--model", " padded "},
	} {
		if err := runRelay(context.Background(), args, &out, &errb); !errors.Is(err, errUsage) {
			t.Errorf("relay with %s: %v, want a usage error", name, err)
		}
	}
}
