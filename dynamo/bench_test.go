package dynamo

import (
	"slices"
	"strconv"
	"testing"
)

var benchSink []uint64

// BenchmarkMooncakeLocal compares the Mooncake fast path with the generic
// path (materialise tokens, then hash) on the same ids; both must agree.
func BenchmarkMooncakeLocal(b *testing.B) {
	ids := make([]uint64, 64)
	for i := range ids {
		ids[i] = uint64(i) * 7919
	}
	for _, bs := range []int{16, 128, 512} {
		h := mustHasher(b, HasherConfig{BlockSize: bs})
		want := AppendMooncakeLocal(nil, ids, bs)
		impls := []struct {
			name string
			run  func(dst []uint64, tokens []uint32) ([]uint64, []uint32)
		}{
			{"generic", func(dst []uint64, tokens []uint32) ([]uint64, []uint32) {
				tokens = MooncakeTokens(tokens[:0], ids, bs)
				return h.AppendLocal(dst[:0], tokens), tokens
			}},
			{"fast", func(dst []uint64, tokens []uint32) ([]uint64, []uint32) {
				return AppendMooncakeLocal(dst[:0], ids, bs), tokens
			}},
		}
		for _, impl := range impls {
			b.Run("impl="+impl.name+"/bs="+strconv.Itoa(bs), func(b *testing.B) {
				dst := make([]uint64, 0, len(ids))
				var tokens []uint32
				if got, _ := impl.run(dst, tokens); !slices.Equal(got, want) {
					b.Fatalf("%s(bs=%d) = %v, want %v", impl.name, bs, got, want)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					dst, tokens = impl.run(dst, tokens)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids)), "ns/block")
				benchSink = dst
			})
		}
	}
}

// BenchmarkDecode measures each decoder on its golden message.
func BenchmarkDecode(b *testing.B) {
	jsonMsg := golden(b, "json_cur_stored.json")
	envMsg := golden(b, "envelope_stored.msgpack")
	zmqMsg := golden(b, "zmq_vllm.msgpack")
	cases := []struct {
		name string
		size int
		run  func() error
	}{
		{"json", len(jsonMsg), func() error { _, err := DecodeJSON(jsonMsg); return err }},
		{"envelope+msgpack", len(envMsg), func() error { _, _, err := DecodeMessage(envMsg); return err }},
		{"zmq", len(zmqMsg), func() error { _, err := DecodeEngineBatch(zmqMsg, ZMQConfig{}); return err }},
	}
	for _, c := range cases {
		b.Run("format="+c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(c.size))
			for b.Loop() {
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
