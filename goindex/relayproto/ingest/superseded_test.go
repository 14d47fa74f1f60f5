package ingest

import (
	"fmt"
	"testing"

	"github.com/goindex/goindex/goindex/relayproto"
)

// TestLane_Rule2EXT_ForeignPoolAndSupersededIdentityIgnored: frames of
// another pool, of an older incarnation or of an older layout generation
// of the lane's own pool are ignored as ForeignIdentity on a READY lane:
// no state, word or ready-bit change, whatever they carry. A newer
// incarnation still faults (TestLane_Rule2_WrongIdentityFaults).
func TestLane_Rule2EXT_ForeignPoolAndSupersededIdentityIgnored(t *testing.T) {
	fx := newLaneFixture(t, Config{})
	older := fx.id
	older.Incarnation--
	oldLayout := fx.id
	oldLayout.LayoutGeneration--
	otherDC := fx.id
	otherDC.Pool.DC++
	otherDomain := fx.id
	otherDomain.Pool.Domain++
	otherDomain.Incarnation += 100
	for _, c := range []struct {
		what string
		id   relayproto.ProducerIdentity
	}{{"older incarnation", older}, {"older layout generation", oldLayout}, {"another DC", otherDC}, {"another domain, newer incarnation", otherDomain}} {
		before, words, ready := fx.l.Status(), fx.tbl.laneCopy(0), fx.tbl.isReady(0)
		msgs := []relayproto.Message{
			// The delta would apply (base = installed) if it were the lane's.
			&relayproto.Delta{Identity: c.id, Lease: fx.lease, Base: before.Installed, Sequence: before.Installed + 1, Images: []relayproto.Image{{Bucket: 1, Word: 0xdead}}},
			whole(c.id, fx.lease, before.Installed+7, make([]uint64, 8)),
			&relayproto.Heartbeat{Identity: c.id, Lease: fx.lease, Sequence: before.Installed + 50},
			&relayproto.DrainMarker{Identity: c.id, Lease: fx.lease, Expected: before.Installed + 3},
		}
		for _, m := range msgs {
			call := fmt.Sprintf("%v from %s", m.Type(), c.what)
			if o := handleOn(fx.l, m); o != ForeignIdentity {
				t.Errorf("%s = %v, want ForeignIdentity", call, o)
			}
			fx.expectUnchanged(t, call, before, words, ready)
		}
	}
	// The lane still follows its own producer afterwards.
	st := fx.l.Status()
	if o := fx.l.Delta(fx.delta(st.Installed, st.Installed+1, relayproto.Image{Bucket: 2, Word: 42})); o != Applied {
		t.Errorf("Delta from the assigned identity after the foreign frames = %v, want Applied", o)
	}
}
