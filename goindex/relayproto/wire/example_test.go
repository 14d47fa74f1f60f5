package wire_test

import (
	"fmt"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/wire"
)

// Example encodes two messages into one stream of frames and decodes them
// back in order with a reused Decoder.
func Example() {
	format, _ := relayproto.NewFormat(1, 8)
	id := relayproto.ProducerIdentity{Pool: relayproto.PoolID{Domain: 1, DC: 3}, Incarnation: 1, LayoutGeneration: 1, Format: format}
	lease := relayproto.Lease{ConsumerInstance: 9, Lane: 0, Epoch: 1}
	stream, _ := wire.AppendFrame(nil, &relayproto.Delta{Identity: id, Lease: lease, Base: 4, Sequence: 5,
		Images: []relayproto.Image{{Bucket: 2, Word: 0xB49E}}})
	stream, _ = wire.AppendFrame(stream, &relayproto.DrainMarker{Identity: id, Lease: lease, Expected: 5})

	var dec wire.Decoder
	for len(stream) > 0 {
		m, rest, err := dec.Decode(stream)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(m.Type())
		stream = rest
	}
	// Output:
	// delta
	// drain-marker
}
