package relay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goindex/goindex/bridge/natslink/natstest"
	"github.com/goindex/goindex/bridge/relay/relaytest"
	"github.com/goindex/goindex/dynamo"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestRelay_PrefixesKeepTenantsApart runs two relays of the same domain and
// DC under the prefixes tenant.a and tenant.b on one NATS server. Neither
// supersedes the other (their owner claims live in different buckets), each
// publishes its own log, every JetStream asset is named under one of the two
// prefixes, and every goindex subject on the wire starts with one of them:
// what subject permissions need to keep tenants apart.
func TestRelay_PrefixesKeepTenantsApart(t *testing.T) {
	seed := relaytest.Seed(t, 31)
	_, nc := natstest.Start(t)
	prefixes := []string{"tenant.a", "tenant.b"}
	var mu sync.Mutex
	subjects := map[string]bool{}
	sub, err := nc.Subscribe(">", func(m *nats.Msg) {
		mu.Lock()
		if subjects != nil {
			subjects[m.Subject] = true
		}
		mu.Unlock()
	})
	if err != nil {
		t.Fatalf("subscribe >: %v", err)
	}
	defer sub.Unsubscribe()
	var relays []*running
	for _, p := range prefixes {
		cfg := testConfig(nc)
		cfg.Prefix = p
		relays = append(relays, startRelay(t, cfg))
	}
	g := relaytest.NewGenerator(seed, 4)
	subject := dynamo.EventSubject("dynamo", "backend")
	for i := 0; i < 200; i++ {
		if err := nc.Publish(subject, g.Next()); err != nil {
			t.Fatalf("publish event %d: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	relaytest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		for i, r := range relays {
			if err := r.r.Flush(ctx, 1); err != nil {
				return err
			}
			st, err := r.r.Status(ctx)
			if err != nil {
				return err
			}
			if len(st) != 1 || !st[0].Running || st[0].LogSequence == 0 {
				return fmt.Errorf("relay %s: status %+v, want its pool running with a delta in its log", prefixes[i], st)
			}
		}
		return nil
	})
	for i, r := range relays {
		select {
		case err := <-r.done:
			t.Errorf("relay under %s ended beside the other tenant's: %v", prefixes[i], err)
		default:
		}
	}
	nc.Flush()
	sub.Unsubscribe() // before the test's own JetStream calls below
	mu.Lock()
	seenSubjects := subjects
	subjects = nil
	mu.Unlock()

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	under := func(name string) bool {
		return strings.HasPrefix(name, "tenant-a-") || strings.HasPrefix(name, "tenant-b-") ||
			// KV buckets and object stores are streams named KV_<bucket>, OBJ_<bucket>.
			strings.HasPrefix(name, "KV_tenant-a-") || strings.HasPrefix(name, "KV_tenant-b-") ||
			strings.HasPrefix(name, "OBJ_tenant-a-") || strings.HasPrefix(name, "OBJ_tenant-b-")
	}
	names := js.StreamNames(ctx)
	var seen []string
	for n := range names.Name() {
		seen = append(seen, n)
		if !under(n) {
			t.Errorf("JetStream asset %q is under neither tenant's prefix", n)
		}
	}
	if err := names.Err(); err != nil {
		t.Fatalf("list streams: %v", err)
	}
	for _, p := range prefixes {
		want := Names{Prefix: p, Domain: 1, DC: 3}.Stream()
		found := false
		for _, n := range seen {
			found = found || n == want
		}
		if !found {
			t.Errorf("streams %v lack %s's delta log %s", seen, p, want)
		}
	}

	for s := range seenSubjects {
		switch {
		case s == "$JS.API.INFO", s == "$JS.EVENT.ADVISORY.API", strings.HasPrefix(s, "_INBOX."), s == subject:
			// Account-wide JetStream calls, replies, and the Dynamo events
			// we sent.
		case strings.HasPrefix(s, "$") && (strings.Contains(s, "tenant-a-1-3-") || strings.Contains(s, "tenant-b-1-3-")):
			// JetStream API, KV and object store subjects of the tenants'
			// assets.
		case strings.HasPrefix(s, "tenant.a.1.3."), strings.HasPrefix(s, "tenant.b.1.3."),
			strings.HasPrefix(s, "tenant.a.1.discover"), strings.HasPrefix(s, "tenant.b.1.discover"):
		default:
			t.Errorf("subject %q is under neither tenant's prefix", s)
		}
	}
}

// TestAssetPrefix_IsOneToOne checks that prefixes differing only where the
// old dots-to-dashes mapping collided ("a.b" and "a-b") name different
// assets, that dotted prefixes keep their names, and, over random valid
// prefixes, that no two map to one asset prefix and every result is in
// JetStream's name alphabet.
func TestAssetPrefix_IsOneToOne(t *testing.T) {
	for p, want := range map[string]string{
		"goindex": "goindex", "tenant.a": "tenant-a", "a-b": "a_hb", "a_b": "a__b", "a_h.b": "a__h-b", "x-.y_": "x_h-y__",
	} {
		if got := AssetPrefix(p); got != want {
			t.Errorf("AssetPrefix(%q) = %q, want %q", p, got, want)
		}
	}
	rng := rand.New(rand.NewPCG(relaytest.Seed(t, 32), 1))
	const alphabet = "ab_-."
	seen := map[string]string{}
	for range 200000 {
		b := make([]byte, 1+rng.IntN(7))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		p := string(b)
		if ValidPrefix(p) != nil {
			continue
		}
		a := AssetPrefix(p)
		if q, ok := seen[a]; ok && q != p {
			t.Fatalf("prefixes %q and %q both name assets %q", p, q, a)
		}
		seen[a] = p
		if strings.Trim(a, "abh_-") != "" {
			t.Fatalf("AssetPrefix(%q) = %q leaves JetStream's alphabet", p, a)
		}
	}
}
