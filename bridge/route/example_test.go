package route_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/goindex/goindex/bridge/route"
	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/shm"
)

// Example shows the router's sequence: the consumer's replica file names
// each lane's DC by id (route.DCID of the DC's name), the router maps its
// --dc specs onto those lanes, and Decide weighs RTT, queue and the cached
// prefix (ServeHTTP then forwards to the first DC of the order that
// accepts the connection).
func Example() {
	dir, _ := os.MkdirTemp("", "route-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "replica")

	// The consumer's side: two lanes, fresh signals, "far" caches a prompt.
	n, _ := ckf.BucketCount(1 << 12)
	w, _ := shm.Create(path, shm.Layout{Seed: ckf.DefaultSeed, Buckets: n, Domain: 1, ConsumerInstance: 1,
		DCs: []uint64{route.DCID("near"), route.DCID("far")}})
	defer w.Close()
	now := time.Now()
	w.SetRTT(0, 5*time.Millisecond, now)
	w.SetRTT(1, 100*time.Millisecond, now)
	w.SetLoad(0, &shm.Load{ReceivedAt: now})
	w.SetLoad(1, &shm.Load{ReceivedAt: now})
	tokens := make([]uint32, 4096)
	for i := range tokens {
		tokens[i] = uint32(i)
	}
	h, _ := dynamo.NewHasher(dynamo.HasherConfig{BlockSize: 16})
	locals := h.AppendLocal(nil, tokens)
	seqs := kv.AppendChain(nil, false, 0, locals)
	ev := kv.Event{Member: kv.Member{Worker: 1}, Kind: kv.Stored}
	for i := range locals {
		ev.Blocks = append(ev.Blocks, kv.Block{External: seqs[i], Local: locals[i]})
	}
	p, _ := ckf.New(ckf.Config{Format: w.Format()})
	_, _ = p.Apply(&ev)
	_ = w.Table().Install(0, make([]uint64, n))
	_ = w.Table().Install(1, p.AppendWords(nil))

	// The router's side.
	near, _ := route.ParseDC("near=http://near.example:8000")
	far, _ := route.ParseDC("far=http://far.example:8000")
	rt, _ := route.New(route.Config{ReplicaPath: path, DCs: []route.DC{near, far}, BlockSize: 16})
	defer rt.Close()
	for _, n := range []int{4096, 512} {
		d, _ := rt.Decide(&route.Prompt{Tokens: tokens[:n], HasTokens: true})
		for _, c := range d.Order {
			fmt.Printf("%d tokens: %s cost %.1f ms (rtt %.1f + queue %.1f + prefill %.1f), %d cached\n",
				n, c.DC.Name, c.Cost, c.Parts.RTTms, c.Parts.QueueMs, c.Parts.PrefillMs, c.CachedTokens)
		}
	}
	// Output:
	// 4096 tokens: far cost 100.0 ms (rtt 100.0 + queue 0.0 + prefill 0.0), 4096 cached
	// 4096 tokens: near cost 209.8 ms (rtt 5.0 + queue 0.0 + prefill 204.8), 0 cached
	// 512 tokens: near cost 30.6 ms (rtt 5.0 + queue 0.0 + prefill 25.6), 0 cached
	// 512 tokens: far cost 100.0 ms (rtt 100.0 + queue 0.0 + prefill 0.0), 512 cached
}
