package route

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/goindex/goindex/goindex/shm"
)

// BenchmarkDecide measures one routing decision over 13 DCs (the reference
// WAN): hashing the prompt, one replica search across the lanes, lane
// signals, scoring and the fallback order. Each DC caches a different
// prefix of the prompt, and its load records carry stored-blocks counters
// that make its insert rate known (ttft's eviction charge is priced).
func BenchmarkDecide(b *testing.B) {
	for _, tokens := range []int{512, 4096, 32768} {
		b.Run(fmt.Sprintf("dcs=13/tokens=%d", tokens), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			prompt := randomTokens(rng, tokens)
			ids := make([]uint64, 13)
			cfg := Config{BlockSize: testBlockSize, MaxStaleness: time.Hour}
			for i := range ids {
				name := fmt.Sprintf("dc%d", i)
				ids[i] = DCID(name)
				cfg.DCs = append(cfg.DCs, DC{ID: ids[i], Name: name, URL: mustURL(b, "http://127.0.0.1:1")})
			}
			fx := newFixture(b, ids...)
			cfg.ReplicaPath = fx.path
			// Signals dated an hour ahead stay fresh however long the run;
			// two reports with stored-blocks counters make every DC's
			// insert rate known, so ttft prices its eviction charge.
			ahead := time.Now().Add(time.Hour)
			report := func(stored uint64, at time.Time) {
				for i := range ids {
					fx.w.SetLoad(i, &shm.Load{At: at, ReceivedAt: ahead, QueuedPrefillTokens: uint64(i * 1000),
						CapacityBlocks: 1 << 16, StoredBlocks: stored * uint64(i+1), Incarnation: 1})
				}
			}
			for i := range ids {
				fx.cache(i, hasher(b, "", ""), prompt[:tokens*i/len(ids)/testBlockSize*testBlockSize])
				fx.w.SetRTT(i, time.Duration(4+i*18)*time.Millisecond, ahead)
			}
			report(1000, ahead.Add(-time.Second))
			rt, err := New(cfg)
			if err != nil {
				b.Fatalf("New: %v", err)
			}
			defer rt.Close()
			p := &Prompt{Tokens: prompt, HasTokens: true}
			if _, err := rt.Decide(p); err != nil {
				b.Fatalf("Decide: %v", err)
			}
			report(3000, ahead)
			b.ReportAllocs()
			b.ResetTimer()
			var sink int
			var charged float64
			for b.Loop() {
				d, err := rt.Decide(p)
				if err != nil || len(d.Order) != len(ids) {
					b.Fatalf("Decide = %v, %v, want all %d DCs in order", d, err, len(ids))
				}
				for _, c := range d.Order {
					sink += c.CachedTokens
					charged += c.Parts.OthersMs
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			if sink == 0 || charged == 0 {
				b.Fatalf("no decision saw any DC's cached prefix (%d) or eviction charge (%g)", sink, charged)
			}
		})
	}
}

// BenchmarkForward compares a small completion sent straight to a stub DC
// (path=direct) with the same request through the router (path=router:
// body buffering, parsing, hashing, Decide, forwarding, relaying), both
// over loopback with keep-alive connections.
func BenchmarkForward(b *testing.B) {
	stub := newStubDC(b, "near")
	fx := newFixture(b, DCID("near"))
	fx.signals(0, time.Millisecond, -time.Hour, shm.Load{}) // fresh for the whole run
	_, srv := newRouter(b, Config{ReplicaPath: fx.path, DCs: []DC{stub.dc(b)}})
	body := completion(randomTokens(rand.New(rand.NewPCG(3, 4)), 1024), nil)
	for _, c := range []struct{ name, url string }{{"direct", stub.srv.URL}, {"router", srv.URL}} {
		b.Run("path="+c.name, func(b *testing.B) {
			client := &http.Client{}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Post(c.url+"/v1/completions", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatalf("POST: %v", err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !bytes.Contains(got, []byte(`"dc":"near"`)) {
					b.Fatalf("POST via %s: %d %s", c.name, resp.StatusCode, got)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
		})
	}
}

// BenchmarkDecodeIDs compares decodeIDs' scanner with encoding/json on a
// prompt of 1024 token ids as a client writes them.
func BenchmarkDecodeIDs(b *testing.B) {
	raw, _ := json.Marshal(randomTokens(rand.New(rand.NewPCG(5, 6)), 1024))
	for _, c := range []struct {
		name   string
		decode func([]byte) ([]uint32, bool)
	}{
		{"scan", func(r []byte) ([]uint32, bool) { ids, err := decodeIDs(r); return ids, err == nil }},
		{"encoding-json", jsonIDs},
	} {
		b.Run("impl="+c.name+"/tokens=1024", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				ids, ok := c.decode(raw)
				if !ok || len(ids) != 1024 {
					b.Fatalf("%s decoded %d ids, ok %v", c.name, len(ids), ok)
				}
				n += len(ids)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
