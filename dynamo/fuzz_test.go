package dynamo

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// Each fuzz target checks that a decoder never panics and that whatever it
// accepts survives a round trip through the matching encoder.

func FuzzDecodeJSON(f *testing.F) {
	for _, name := range []string{"json_g2025_stored.json", "json_g2025_signed.json", "json_cur_stored.json", "json_cur_removed.json", "json_cur_cleared.json"} {
		f.Add(golden(f, name))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeJSON(b)
		if err != nil {
			return
		}
		out, err := AppendJSON(nil, &ev)
		if err != nil {
			t.Fatalf("AppendJSON(DecodeJSON(%q)): %v", b, err)
		}
		back, err := DecodeJSON(out)
		if err != nil || !reflect.DeepEqual(back, ev) {
			t.Fatalf("DecodeJSON(AppendJSON(%+v)) = %+v, %v", ev, back, err)
		}
	})
}

func FuzzDecodeMessage(f *testing.F) {
	for _, name := range []string{"envelope_stored.msgpack", "envelope_removed.msgpack", "envelope_cleared_ns.msgpack", "envelope_early.json"} {
		f.Add(golden(f, name))
	}
	f.Add(frame(golden(f, "envelope_stored.msgpack")))
	f.Fuzz(func(t *testing.T, b []byte) {
		env, ev, err := DecodeMessage(b)
		if err != nil {
			return
		}
		payload, err := AppendMsgpackEvents(nil, ev)
		if err != nil {
			t.Fatalf("AppendMsgpack(DecodeMessage(%x)): %v", b, err)
		}
		env.Encoding, env.Payload = EncodingMsgpack, payload
		env2, ev2, err := DecodeMessage(AppendEnvelope(nil, &env))
		if err != nil || !reflect.DeepEqual(ev2, ev) || !reflect.DeepEqual(env2, env) {
			t.Fatalf("re-encoded message decodes to %+v, %+v, %v; want %+v, %+v", env2, ev2, err, env, ev)
		}
	})
}

func FuzzDecodeMsgpack(f *testing.F) {
	for _, name := range []string{"envelope_stored.msgpack", "envelope_removed.msgpack", "envelope_cleared_ns.msgpack"} {
		env, err := DecodeEnvelope(golden(f, name))
		if err != nil {
			f.Fatalf("DecodeEnvelope(%s): %v", name, err)
		}
		f.Add(env.Payload)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeMsgpack(b)
		if err != nil {
			return
		}
		out, err := AppendMsgpack(nil, &ev)
		if err != nil {
			t.Fatalf("AppendMsgpack(DecodeMsgpack(%x)): %v", b, err)
		}
		back, err := DecodeMsgpack(out)
		if err != nil || !reflect.DeepEqual(back, ev) {
			t.Fatalf("DecodeMsgpack(AppendMsgpack(%+v)) = %+v, %v", ev, back, err)
		}
	})
}

func FuzzDecodeEngineBatch(f *testing.F) {
	for _, name := range []string{"zmq_vllm.msgpack", "zmq_vllm_cur.msgpack", "zmq_sglang_map.msgpack", "zmq_bytes_hash.msgpack"} {
		f.Add(golden(f, name), false)
		f.Add(golden(f, name), true)
	}
	fixedTail := []any{"BlockStored", []any{1}, nil, tokensAny(0, 3), 4, nil, "GPU", nil, nil, 0, nil, nil, "LOCAL", "engine"}
	f.Add(pack([]any{1.0, []any{fixedTail}, 0}), false)
	// A cache salt tagged in extra_keys, positional and map (lora_name
	// after extra_keys), with a 64-hex LoRA name.
	hexLoRA := strings.Repeat("a", 64)
	keys := []any{[]any{hexLoRA, "dynamo-cache-salt:abc", []any{"img", 1}}, nil}
	f.Add(pack([]any{1.0, []any{[]any{"BlockStored", []any{1, 2}, nil, tokensAny(0, 7), 4, nil, "GPU", hexLoRA, keys}}}), false)
	f.Add(pack([]any{1.0, []any{obj{"type", "BlockStored", "block_hashes", []any{1, 2}, "token_ids", tokensAny(0, 7),
		"block_size", 4, "extra_keys", keys, "lora_name", hexLoRA}}}), false)
	f.Fuzz(func(t *testing.T, b []byte, fold bool) {
		batch, err := DecodeEngineBatch(b, ZMQConfig{FoldByteHashes: fold})
		if err != nil {
			return
		}
		// Whatever decodes must normalize without panicking, into valid events.
		n, err := NewNormalizer(NormalizerConfig{WorkerID: 1, BlockSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range n.Append(nil, &batch) {
			if err := ev.Validate(); err != nil {
				t.Fatalf("normalized event %+v fails Validate: %v", ev, err)
			}
		}
	})
}

func FuzzDecodeZMQ(f *testing.F) {
	seq := []byte{0, 0, 0, 0, 0, 0, 1, 2}
	for _, name := range []string{"zmq_vllm.msgpack", "zmq_vllm_cur.msgpack", "zmq_sglang_map.msgpack"} {
		f.Add([]byte("kv@0"), seq, golden(f, name), uint8(3))
	}
	f.Add([]byte(""), seq[:7], golden(f, "zmq_vllm.msgpack"), uint8(3))
	f.Add([]byte("kv"), seq, golden(f, "zmq_vllm.msgpack"), uint8(2))
	f.Fuzz(func(t *testing.T, topic, seq, payload []byte, count uint8) {
		frames := [][]byte{topic, seq, payload, nil, nil}[:min(int(count), 5)]
		batch, err := DecodeZMQ(frames, ZMQConfig{})
		if len(frames) != 3 {
			if !errors.Is(err, ErrFrameCount) {
				t.Fatalf("DecodeZMQ(%d frames) error = %v, want ErrFrameCount", len(frames), err)
			}
			return
		}
		if err != nil {
			return
		}
		// An accepted message is its payload's batch with the topic and the
		// big-endian sequence frame.
		want, err := DecodeEngineBatch(payload, ZMQConfig{})
		if err != nil {
			t.Fatalf("DecodeZMQ accepted payload %x that DecodeEngineBatch rejects: %v", payload, err)
		}
		want.Topic, want.Sequence = string(topic), binary.BigEndian.Uint64(seq)
		if math.IsNaN(batch.Timestamp) && math.IsNaN(want.Timestamp) {
			batch.Timestamp, want.Timestamp = 0, 0 // NaN is not DeepEqual to itself
		}
		if !reflect.DeepEqual(batch, want) {
			t.Fatalf("DecodeZMQ(%q, %x, %x) = %+v, want %+v", topic, seq, payload, batch, want)
		}
	})
}

func FuzzDecodePlane(f *testing.F) {
	env := golden(f, "releases/v1.4-endpoint-batch.msgpack")
	f.Add([]byte(EventTopic), uint64(1<<53-1), uint64(1), frame(env))
	f.Add([]byte("namespace.n.component.c.endpoint.e.kv-events"), uint64(1<<53-1), uint64(1), append(frame(env), 1, 2))
	f.Fuzz(func(t *testing.T, topic []byte, pub, seq uint64, body []byte) {
		m, err := DecodePlane(planeFrames(string(topic), pub, seq, body[min(len(body), frameHeaderBytes):]))
		if err != nil {
			return
		}
		_ = m.CheckIdentity(Scope{Namespace: "n", Component: "c", Endpoint: "e"}, EventTopic, pub)
		_, _ = m.Envelope.Events()
		_, _ = DecodeActiveLoad(m.Envelope.Payload)
	})
}

func FuzzDecodeActiveLoad(f *testing.F) {
	env, err := DecodeEnvelope(golden(f, "releases/v1.6-active-load.msgpack"))
	if err != nil {
		f.Fatalf("DecodeEnvelope(v1.6-active-load): %v", err)
	}
	f.Add(env.Payload)
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := DecodeActiveLoad(b)
		if err != nil && l != (ActiveLoad{}) {
			t.Fatalf("DecodeActiveLoad(%x) = %+v with error %v, want the zero value", b, l, err)
		}
	})
}
