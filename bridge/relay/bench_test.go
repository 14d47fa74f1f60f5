package relay

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
)

// BenchmarkIntake_Sequenced measures sequenced on decoded one-event
// envelopes of 16 publishers, interleaved at random: copies=1 is every
// stream once and in order (through one broker), copies=2 two lossy
// copies of each (two brokers each losing 1%, one lagging up to 256
// messages: about half the envelopes are duplicates). Each iteration takes
// the whole set into a fresh intake.
func BenchmarkIntake_Sequenced(b *testing.B) {
	for _, copies := range []int{1, 2} {
		b.Run(fmt.Sprintf("copies=%d", copies), func(b *testing.B) {
			const pubs, n = 16, 2048
			rng := rand.New(rand.NewPCG(1, 2))
			var queues [pubs][]uint64
			for p := range queues {
				if copies == 2 {
					queues[p], _ = lossyCopies(rng, n, 0.01, 256)
					continue
				}
				for s := range uint64(n) {
					queues[p] = append(queues[p], s)
				}
			}
			var envs []dynamo.Envelope
			for left := pubs; left > 0; {
				p := rng.IntN(pubs)
				for len(queues[p]) == 0 {
					p = (p + 1) % pubs
				}
				env, err := dynamo.DecodeEnvelope(storedEnvelope(b, 1, uint64(p)+1, queues[p][0], dynamo.EventTopic))
				if err != nil {
					b.Fatalf("DecodeEnvelope: %v", err)
				}
				envs = append(envs, env)
				if queues[p] = queues[p][1:]; len(queues[p]) == 0 {
					left--
				}
			}
			now := time.Unix(1000, 0)
			var st IntakeStats
			var dst []kv.Event
			b.ReportAllocs()
			for b.Loop() {
				st = IntakeStats{}
				in := newIntake(&st, time.Minute)
				for i := range envs {
					dst, _ = in.sequenced(&envs[i], now, dst[:0])
				}
			}
			if want := uint64(pubs * n); st.Events > want || st.Events < want*98/100 {
				b.Fatalf("one pass took %d events of %d sequences", st.Events, want)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(envs)), "ns/envelope")
		})
	}
}

// sequenceSink keeps the benchmarks' results live.
var sequenceSink uint64

// BenchmarkSeqWindow_Take measures one sequence decision: impl=window is
// seqWindow.take, impl=watermark the high-water mark it replaced (wrong
// for late copies, shown for its cost), on one stream's arrivals through
// one broker (copies=1) or two lossy ones (copies=2, lag up to 1024).
func BenchmarkSeqWindow_Take(b *testing.B) {
	for _, copies := range []int{1, 2} {
		const n = 1 << 16
		rng := rand.New(rand.NewPCG(3, 4))
		arrivals := make([]uint64, n)
		for s := range arrivals {
			arrivals[s] = uint64(s)
		}
		if copies == 2 {
			arrivals, _ = lossyCopies(rng, n, 0.01, 1024)
		}
		b.Run(fmt.Sprintf("impl=window/copies=%d", copies), func(b *testing.B) {
			w, taken := newSeqWindow(0), uint64(0)
			for i := 0; b.Loop(); i++ {
				if i%len(arrivals) == 0 {
					w = newSeqWindow(0)
				}
				if v, _ := w.take(arrivals[i%len(arrivals)]); v != seqDuplicate {
					taken++
				}
			}
			sequenceSink += taken
		})
		b.Run(fmt.Sprintf("impl=watermark/copies=%d", copies), func(b *testing.B) {
			var last, taken uint64
			for i := 0; b.Loop(); i++ {
				if i%len(arrivals) == 0 {
					last = 0
				}
				if seq := arrivals[i%len(arrivals)]; seq > last {
					last, taken = seq, taken+1
				}
			}
			sequenceSink += taken
		})
	}
}
