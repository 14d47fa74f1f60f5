package ingest_test

import (
	"fmt"
	"sync/atomic"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/ingest"
	"github.com/goindex/goindex/goindex/relayproto/publish"
	"github.com/goindex/goindex/goindex/relayproto/wire"
)

// table is a one-lane ingest.LaneTable (a replica.Table in production).
type table struct {
	words []uint64
	ready atomic.Uint64
}

func (t *table) Lanes() int      { return 1 }
func (t *table) Buckets() uint64 { return uint64(len(t.words)) }
func (t *table) StoreWords(_ int, off uint64, w []uint64) {
	copy(t.words[off:], w)
}
func (t *table) Apply(_ int, ims []relayproto.Image) error {
	for _, im := range ims {
		t.words[im.Bucket] = im.Word
	}
	return nil
}
func (t *table) SetReady(int)   { t.ready.Store(1) }
func (t *table) ClearReady(int) { t.ready.Store(0) }

// link carries frames from the relay to the consumer.
type link struct {
	c   *ingest.Consumer
	out []ingest.Outcome
}

func (w *link) Send(m relayproto.Message) error {
	frame, err := wire.AppendFrame(nil, m)
	if err != nil {
		return err
	}
	o, _, err := w.c.Apply(frame)
	w.out = append(w.out, o)
	return err
}

// Example shows the leased protocol end to end: a consumer lane is assigned
// a lease, the relay answers with a barrier snapshot, publishes a batch at a
// cadence boundary, and a drain marker confirms the lane holds exactly the
// producer's words.
func Example() {
	cf, _ := ckf.NewFormat(ckf.DefaultSeed, 64)
	producer, _ := ckf.New(ckf.Config{Format: cf, BatchEvents: 1})
	format := relayproto.FormatOf(cf)
	pool := relayproto.PoolID{Domain: 1, DC: 3}
	id := relayproto.ProducerIdentity{Pool: pool, Incarnation: 1, LayoutGeneration: 1, Format: format}

	tbl := &table{words: make([]uint64, 64)}
	consumer, _ := ingest.New(relayproto.Manifest{ConsumerInstance: 9, Domain: 1, Format: format, Lanes: []relayproto.PoolID{pool}}, tbl, ingest.Config{})
	w := &link{c: consumer}
	pub, _ := publish.New(publish.Config{Identity: id, Sink: w, Source: producer})

	lane := consumer.Lane(0)
	_ = lane.Claim()
	lease := lane.NextLease()
	_ = lane.Assign(id, lease)                 // the consumer side issues the lease...
	snap, _ := pub.SnapshotAfterBarrier(lease) // ...the relay answers with a snapshot
	for chunk := range snap.Chunks(0) {
		_ = w.Send(chunk)
	}

	ev := kv.Event{Member: kv.Member{Worker: 1}, Kind: kv.Stored, Blocks: []kv.Block{{External: 1, Local: 11}, {External: 2, Local: 12}}}
	if step, _ := producer.Apply(&ev); step == ckf.StepPublish {
		_, _ = pub.Publish(producer.Drain(nil))
	}
	marker, _ := pub.DrainMarker()
	_ = w.Send(marker)

	st := lane.Status()
	fmt.Println(w.out)
	fmt.Println(st.State, "at", st.Installed, "ready:", tbl.ready.Load() == 1, "equal:", fmt.Sprint(tbl.words) == fmt.Sprint(producer.AppendWords(nil)))
	// Output:
	// [Installed Applied Acknowledged]
	// READY at 1 ready: true equal: true
}
