package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goindex/goindex/bridge/obs/obstest"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/bridge/route"
)

// The log lines the run learns addresses from (the children log JSON).
var (
	metricsLine = regexp.MustCompile(`"msg":"metrics listening","url":"(http://[^"]+)/metrics"`)
	routeLine   = regexp.MustCompile(`goindex route: listening on http://(\S+)`)
)

// Child process settings: signals refresh fast so that a DC whose link or
// relay is down drops out of routing within routeStaleness, and comes back
// as fast once healed.
const (
	signalEvery    = 200 * time.Millisecond
	routeStaleness = 2 * time.Second
	// bodyTimeout is the router's --body-timeout: what a stalled client
	// may hold a connection for.
	bodyTimeout = 2 * time.Second
)

// relayArgs are DC d's `goindex relay` arguments.
func (r *run) relayArgs(d *dc) []string {
	return []string{"relay", "--nats", d.leaf.url(), "--dc", strconv.FormatUint(uint64(d.id), 10), "--name", d.name,
		"--js-domain", d.jsDomain(), "--namespace", namespace, "--component", d.component(),
		"--expected-blocks", strconv.FormatUint(r.cfg.ExpectedBlocks, 10),
		"--load-every", signalEvery.String(), "--heartbeat-every", signalEvery.String(), "--snapshot-every", "5s",
		"--status-every", "0", "--log-format", "json", "--metrics-addr", "127.0.0.1:0"}
}

// upRelay starts DC d's relay and waits until it serves: its metrics
// endpoint is logged and its ping responder (subscribed with the event
// subjects) answers on the leaf. It returns the relay's incarnation.
func (r *run) upRelay(ctx context.Context, d *dc) (uint64, error) {
	if err := d.relay.start(); err != nil {
		return 0, err
	}
	m, err := d.relay.waitLog(ctx, metricsLine, startWait)
	if err != nil {
		return 0, err
	}
	d.metrics.Store(m[1])
	var info relay.Info
	err = poll(ctx, startWait, func() error {
		if !d.relay.alive() {
			return errExited
		}
		msg, err := d.nc.Request(d.names().PingSubject(), nil, time.Second)
		if err != nil {
			return fmt.Errorf("ping %s's relay: %w", d.name, err)
		}
		info, err = relay.DecodeInfo(msg.Data)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("chaos: %s relay: %w", d.name, err)
	}
	return info.Incarnation, nil
}

// relayMessages returns how many event-plane messages DC d's relay has
// received since it started.
func (d *dc) relayMessages() (uint64, error) {
	base, _ := d.metrics.Load().(string)
	fams, err := obstest.Scrape(base)
	if err != nil {
		return 0, err
	}
	v, err := fams.Value("goindex_relay_messages_total")
	return uint64(v), err
}

// consumerArgs are `goindex consume`'s arguments.
func (r *run) consumerArgs() []string {
	ids := make([]string, len(r.dcs))
	for i, d := range r.dcs {
		ids[i] = strconv.FormatUint(uint64(d.id), 10)
	}
	return []string{"consume", "--nats", r.hub.url(), "--domain", strconv.FormatUint(uint64(domain), 10),
		"--dcs", strings.Join(ids, ","), "--shm", r.replica, "--expected-blocks", strconv.FormatUint(r.cfg.ExpectedBlocks, 10),
		"--ping-every", signalEvery.String(), "--retry-every", "100ms", "--status-every", "0", "--log-format", "json"}
}

// upConsumer starts the consumer and waits until it logs that it is up.
func (r *run) upConsumer(ctx context.Context) error {
	if err := r.consumer.start(); err != nil {
		return err
	}
	_, err := r.consumer.waitLog(ctx, regexp.MustCompile(`"msg":"consumer up"`), startWait)
	return err
}

// routerArgs are `goindex route`'s arguments, listening on addr.
func (r *run) routerArgs(addr string) []string {
	args := []string{"route", "--listen", addr, "--replica", r.replica, "--max-staleness", routeStaleness.String(),
		"--body-timeout", bodyTimeout.String(), "--replica-poll", "100ms", "--shutdown-grace", "1s", "--log-format", "json"}
	for _, d := range r.dcs {
		args = append(args, "--dc", fmt.Sprintf("%d:%s=%s", d.id, d.name, d.frontend.url()))
	}
	return args
}

// upRouter starts the router and waits until it listens; the first start
// picks a free port, and the run keeps it for every restart.
func (r *run) upRouter(ctx context.Context) error {
	if err := r.router.start(); err != nil {
		return err
	}
	m, err := r.router.waitLog(ctx, routeLine, startWait)
	if err != nil {
		return err
	}
	if r.routerAddr == "" {
		r.routerAddr = m[1]
		r.router.args = r.routerArgs(m[1])
	}
	return nil
}

// routerReady returns nil once the router's /readyz names every DC
// eligible.
func (r *run) routerReady() error {
	resp, err := r.probeClient.Get("http://" + r.routerAddr + "/readyz")
	if err != nil {
		return fmt.Errorf("router /readyz: %w", err)
	}
	defer resp.Body.Close()
	var rd route.Readiness
	if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
		return fmt.Errorf("router /readyz: %w", err)
	}
	if resp.StatusCode != http.StatusOK || len(rd.Eligible) != len(r.dcs) {
		return fmt.Errorf("router /readyz %d: eligible %v of %d DCs (%s)", resp.StatusCode, rd.Eligible, len(r.dcs), rd.Reason)
	}
	return nil
}
