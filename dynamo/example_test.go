package dynamo_test

import (
	"fmt"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
)

// Hash a prompt the way Dynamo's router does, then chain the local hashes.
func ExampleHasher() {
	h, err := dynamo.NewHasher(dynamo.HasherConfig{BlockSize: 4})
	if err != nil {
		panic(err)
	}
	locals := h.AppendLocal(nil, []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	fmt.Println(locals)
	fmt.Println(kv.AppendChain(nil, false, 0, locals))
	// Output:
	// [9143094415614847814 12124091508212882195]
	// [9143094415614847814 9510318385840434533]
}

// Publish a stored event on the event plane and decode it on the other side.
func ExampleDecodeMessage() {
	ev := dynamo.RouterEvent{WorkerID: 7, Residency: dynamo.ResidencyWorker, Event: dynamo.CacheEvent{
		EventID: 42, Kind: kv.Stored,
		Stored: dynamo.StoreData{Blocks: []dynamo.StoredBlock{{BlockHash: 101, TokensHash: 11}}},
	}}
	payload, err := dynamo.AppendMsgpack(nil, &ev)
	if err != nil {
		panic(err)
	}
	msg := dynamo.AppendEnvelope(nil, &dynamo.Envelope{Topic: dynamo.EventTopic, PublisherID: 1, Sequence: 0, Payload: payload})
	fmt.Println(dynamo.EventSubject("dynamo", "backend"))

	env, got, err := dynamo.DecodeMessage(msg)
	if err != nil {
		panic(err)
	}
	if primary, err := got[0].TargetsPrimary(); err == nil && primary {
		k, _ := got[0].KV()
		fmt.Println(env.Encoding, env.Sequence, k.Member, k.Kind, k.Blocks)
	}
	// Output:
	// namespace.dynamo.component.backend.kv-events
	// msgpack 0 7/0 stored [{101 11}]
}

// Turn an engine's ZMQ message into RouterEvents.
func ExampleNormalizer() {
	// [ts, [["BlockStored", [11], nil, [0,1,2,3], 4, nil, "GPU", nil]], 0]
	payload := []byte("\x93\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00\x91\x98\xabBlockStored\x91\x0b\xc0\x94\x00\x01\x02\x03\x04\xc0\xa3GPU\xc0\x00")
	frames := [][]byte{[]byte(""), {0, 0, 0, 0, 0, 0, 0, 0}, payload}
	batch, err := dynamo.DecodeZMQ(frames, dynamo.ZMQConfig{})
	if err != nil {
		panic(err)
	}
	n, err := dynamo.NewNormalizer(dynamo.NormalizerConfig{WorkerID: 5, BlockSize: 4})
	if err != nil {
		panic(err)
	}
	for _, ev := range n.Append(nil, &batch) {
		fmt.Println(ev.WorkerID, ev.StorageTier, ev.Event.EventID, ev.Event.Stored.Blocks[0].TokensHash)
	}
	// Output:
	// 5 device 0 9143094415614847814
}
