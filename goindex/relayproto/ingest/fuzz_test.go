package ingest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/goindex/goindex/goindex/relayproto/internal/prototest"
)

// FuzzConsumerApply feeds arbitrary bytes to a consumer with a READY lane:
// nothing panics, and a frame that fails to decode changes no lane.
func FuzzConsumerApply(f *testing.F) {
	prototest.AddFrameSeeds(f, "../wire/testdata")
	f.Fuzz(func(t *testing.T, src []byte) {
		c, tbl, fm := newTestConsumer(t, 2, 8, Config{OrderedHeartbeats: true})
		readyLane(t, c, 1, prototest.Identity(fm, 2, 1), []uint64{1, 2, 3, 4, 5, 6, 7, 8}, 3)
		for len(src) > 0 {
			before := tbl.laneCopy(1)
			st := c.Lane(1).Status()
			_, rest, err := c.Apply(src)
			var le *LaneError
			if err != nil && !errors.As(err, &le) {
				if !reflect.DeepEqual(before, tbl.words[1]) || c.Lane(1).Status() != st {
					t.Fatalf("a frame error changed lane 1")
				}
				return
			}
			src = rest
		}
	})
}
