package hostile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/ingest"
	"github.com/goindex/goindex/goindex/relayproto/wire"
	"github.com/goindex/goindex/goindex/replica"
)

const (
	buckets  = 256
	domain   = relayproto.DomainID(1)
	instance = 42
)

// seed returns GOINDEX_HOSTILE_SEED or def, and prints it on failure.
func seed(t *testing.T, def uint64) uint64 {
	t.Helper()
	s := def
	if v := os.Getenv("GOINDEX_HOSTILE_SEED"); v != "" {
		if p, err := strconv.ParseUint(v, 10, 64); err == nil {
			s = p
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (set GOINDEX_HOSTILE_SEED to repeat)", s)
		}
	})
	return s
}

// site is a router site's consumer over a real replica table: lane 0
// (DC 1) and lane 1 (DC 2) READY from snapshots of random words.
type site struct {
	tbl    *replica.Table
	c      *ingest.Consumer
	format relayproto.Format
	ids    [2]relayproto.ProducerIdentity
	leases [2]relayproto.Lease
}

func newSite(t *testing.T, rng *rand.Rand) *site {
	t.Helper()
	cf, err := ckf.NewFormat(ckf.DefaultSeed, buckets)
	if err != nil {
		t.Fatal(err)
	}
	s := &site{format: relayproto.FormatOf(cf)}
	if s.tbl, err = replica.New(replica.Config{Lanes: 2, Buckets: buckets}); err != nil {
		t.Fatal(err)
	}
	pools := []relayproto.PoolID{{Domain: domain, DC: 1}, {Domain: domain, DC: 2}}
	m := relayproto.Manifest{ConsumerInstance: instance, Domain: domain, Format: s.format, Lanes: pools}
	if s.c, err = ingest.New(m, s.tbl, ingest.Config{OrderedHeartbeats: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		l := s.c.Lane(i)
		if err := l.Claim(); err != nil {
			t.Fatal(err)
		}
		s.ids[i] = relayproto.ProducerIdentity{Pool: pools[i], Incarnation: 5, LayoutGeneration: 2, Format: s.format}
		// Two assignments, so a past epoch (1) exists and is encodable.
		for range 2 {
			s.leases[i] = l.NextLease()
			if err := l.Assign(s.ids[i], s.leases[i]); err != nil {
				t.Fatal(err)
			}
		}
		words := make([]uint64, buckets)
		for j := range words {
			words[j] = rng.Uint64()
		}
		frame, err := wire.AppendFrame(nil, &relayproto.Snapshot{Identity: s.ids[i], Lease: s.leases[i], Sequence: 10,
			Total: buckets, Words: words})
		if err != nil {
			t.Fatal(err)
		}
		if o, _, err := s.c.Apply(frame); o != ingest.Installed || err != nil {
			t.Fatalf("install lane %d: %v, %v", i, o, err)
		}
	}
	return s
}

// state is everything a frame may change: both lanes' words, the ready
// bits, and each lane's state and installed sequence.
type state struct {
	words [2][]uint64
	ready uint64
	lanes [2]string
}

func (s *site) state() state {
	var st state
	for i := range 2 {
		st.words[i] = make([]uint64, buckets)
		for b := range uint64(buckets) {
			st.words[i][b] = s.tbl.Word(i, b)
		}
		ls := s.c.Lane(i).Status()
		st.lanes[i] = fmt.Sprintf("%v@%d lease %v", ls.State, ls.Installed, ls.Lease)
	}
	st.ready = s.tbl.Ready()
	return st
}

func (a state) equal(b state) bool {
	return slices.Equal(a.words[0], b.words[0]) && slices.Equal(a.words[1], b.words[1]) && a.ready == b.ready && a.lanes == b.lanes
}

// frame encodes m or fails the test.
func frame(t *testing.T, m relayproto.Message) []byte {
	t.Helper()
	b, err := wire.AppendFrame(nil, m)
	if err != nil {
		t.Fatalf("AppendFrame(%T): %v", m, err)
	}
	return b
}

// withBodyLength rewrites a frame's header body length (and leaves the
// rest as it is).
func withBodyLength(f []byte, n uint32) []byte {
	f = slices.Clone(f)
	binary.LittleEndian.PutUint32(f[8:], n)
	return f
}

func TestHostile_UndecodableFramesAreRejectedAndChangeNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t, 1), 2))
	s := newSite(t, rng)
	good := frame(t, &relayproto.Delta{Identity: s.ids[0], Lease: s.leases[0], Base: 10, Sequence: 11,
		Images: []relayproto.Image{{Bucket: 3, Word: 0xbad}}})
	flipped := slices.Clone(good)
	flipped[len(flipped)-1] ^= 0x40
	version := slices.Clone(good)
	version[4]++
	huge := make([]byte, wire.MaxFrameBytes+1024)
	copy(huge, withBodyLength(good, wire.MaxFrameBytes))
	before := s.state()
	for _, c := range []struct {
		what string
		src  []byte
		want error
	}{
		{"empty", nil, wire.ErrMalformed},
		{"short header", good[:7], wire.ErrMalformed},
		{"bad magic", append([]byte("XXXX"), good[4:]...), wire.ErrMalformed},
		{"unknown wire version", version, wire.ErrVersion},
		{"body checksum mismatch", flipped, wire.ErrChecksum},
		{"truncated body", good[:len(good)-3], wire.ErrMalformed},
		{"header claims a body over MaxFrameBytes", withBodyLength(good, wire.MaxFrameBytes), wire.ErrTooLarge},
		{"an actual frame over MaxFrameBytes", huge, wire.ErrTooLarge},
		{"header claims 4 GiB", withBodyLength(good, ^uint32(0)), wire.ErrTooLarge},
	} {
		o, rest, err := s.c.Apply(c.src)
		var fe *wire.FrameError
		if !errors.Is(err, c.want) || !errors.As(err, &fe) || o != 0 || len(rest) != len(c.src) {
			t.Errorf("Apply(%s) = %v, rest %d of %d bytes, %v; want a *FrameError wrapping %v", c.what, o, len(rest), len(c.src), err, c.want)
		}
		if after := s.state(); !after.equal(before) {
			t.Errorf("Apply(%s) changed the site: %v → %v", c.what, before.lanes, after.lanes)
		}
	}
}

func TestHostile_EncodersRefuseOverLimitMessages(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t, 2), 2))
	s := newSite(t, rng)
	images := make([]relayproto.Image, relayproto.MaxDeltaImages+1)
	for i := range images {
		images[i] = relayproto.Image{Bucket: uint32(i), Word: 1}
	}
	dst := []byte("keep")
	out, err := wire.AppendFrame(dst, &relayproto.Delta{Identity: s.ids[0], Lease: s.leases[0], Base: 10, Sequence: 11, Images: images})
	if !errors.Is(err, wire.ErrTooLarge) || string(out) != "keep" {
		t.Errorf("AppendFrame(delta of %d images) = %q…, %v; want dst unchanged and ErrTooLarge", len(images), out[:min(len(out), 8)], err)
	}
	words := make([]uint64, relayproto.MaxChunkWords+1)
	out, err = wire.AppendFrame(dst, &relayproto.Snapshot{Identity: s.ids[0], Lease: s.leases[0], Total: uint64(len(words)), Words: words})
	if !errors.Is(err, wire.ErrTooLarge) || string(out) != "keep" {
		t.Errorf("AppendFrame(snapshot chunk of %d words) = %v; want dst unchanged and ErrTooLarge", len(words), err)
	}
}

// TestHostile_ForgedAndForeignFramesAreIgnored sends well-formed frames a
// lane must ignore: another consumer's lease, an unknown lane, a lease of
// a past epoch, another pool's identity under the lane's lease, an older
// incarnation or layout generation of the lane's own pool (a replaced
// relay), stale and duplicate sequences, and another producer's load
// report. Each is reported as ignored and changes nothing at all.
func TestHostile_ForgedAndForeignFramesAreIgnored(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t, 3), 2))
	s := newSite(t, rng)
	id, lease := s.ids[0], s.leases[0]
	otherConsumer := lease
	otherConsumer.ConsumerInstance++
	noLane := lease
	noLane.Lane = 9
	pastEpoch := lease
	pastEpoch.Epoch--
	otherPool := id
	otherPool.Pool = relayproto.PoolID{Domain: domain, DC: 77}
	otherDomain := id
	otherDomain.Pool.Domain = 9
	lane1 := s.ids[1] // DC 2's identity, sent under lane 0's lease
	older := id
	older.Incarnation--
	oldLayout := id
	oldLayout.LayoutGeneration--
	delta := func(i relayproto.ProducerIdentity, l relayproto.Lease, base, seq uint64) *relayproto.Delta {
		return &relayproto.Delta{Identity: i, Lease: l, Base: base, Sequence: seq, Images: []relayproto.Image{{Bucket: 1, Word: 0xf0f0}}}
	}
	load := &relayproto.LoadReport{Identity: otherPool, Sequence: 99, TimestampUnixNano: 1, QueuedPrefillTokens: 1 << 60}
	before := s.state()
	for _, c := range []struct {
		what string
		m    relayproto.Message
		want ingest.Outcome
	}{
		{"delta under another consumer's lease", delta(id, otherConsumer, 10, 11), ingest.ForeignLease},
		{"delta naming a lane the consumer lacks", delta(id, noLane, 10, 11), ingest.ForeignLease},
		{"delta under a past epoch", delta(id, pastEpoch, 10, 11), ingest.ForeignLease},
		{"delta under no lease", delta(id, relayproto.Lease{}, 10, 11), ingest.ForeignLease},
		{"delta of another DC's identity", delta(otherPool, lease, 10, 11), ingest.ForeignIdentity},
		{"delta of another domain's identity", delta(otherDomain, lease, 10, 11), ingest.ForeignIdentity},
		{"delta of the neighbour lane's producer", delta(lane1, lease, 10, 11), ingest.ForeignIdentity},
		{"delta of a replaced incarnation", delta(older, lease, 10, 11), ingest.ForeignIdentity},
		{"delta of an older layout generation", delta(oldLayout, lease, 10, 11), ingest.ForeignIdentity},
		{"snapshot of a replaced incarnation", &relayproto.Snapshot{Identity: older, Lease: lease, Sequence: 50, Total: buckets, Words: make([]uint64, buckets)}, ingest.ForeignIdentity},
		{"heartbeat of another DC's identity", &relayproto.Heartbeat{Identity: otherPool, Lease: lease, Sequence: 1 << 40}, ingest.ForeignIdentity},
		{"drain marker of a replaced incarnation", &relayproto.DrainMarker{Identity: older, Lease: lease, Expected: 3}, ingest.ForeignIdentity},
		{"duplicate delta", delta(id, lease, 9, 10), ingest.StaleOrDuplicate},
		{"stale snapshot", &relayproto.Snapshot{Identity: id, Lease: lease, Sequence: 10, Total: buckets, Words: make([]uint64, buckets)}, ingest.StaleOrDuplicate},
		{"another pool's load report", load, ingest.ForeignLease},
	} {
		o, _, err := s.c.Apply(frame(t, c.m))
		if o != c.want || err != nil || !o.Ignored() {
			t.Errorf("Apply(%s) = %v, %v; want %v (ignored)", c.what, o, err, c.want)
		}
		if after := s.state(); !after.equal(before) {
			t.Errorf("Apply(%s) changed the site: %v → %v", c.what, before.lanes, after.lanes)
		}
	}
	// The lane still follows its own producer.
	if o, _, err := s.c.Apply(frame(t, delta(id, lease, 10, 11))); o != ingest.Applied || err != nil {
		t.Errorf("Apply(the producer's own next delta) = %v, %v; want Applied", o, err)
	}
}

// TestHostile_InvalidFramesFaultOnlyTheirLaneAndWriteNothing sends frames
// that spec §5.3 answers with a fault: out-of-range and duplicate bucket
// indices, an empty delta, a gap, a snapshot of the wrong layout size on a
// live lane, and a different format under the lane's own identity. The
// fault is reported as a *LaneError naming the outcome, the lane's words
// are untouched (validation before write), its ready bit is cleared, and
// the other lane is not disturbed at all.
func TestHostile_InvalidFramesFaultOnlyTheirLaneAndWriteNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t, 4), 2))
	wrongFormat, err := relayproto.NewFormat(ckf.DefaultSeed^1, buckets)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		m    func(s *site) relayproto.Message
		want ingest.Outcome
	}{
		{"bucket index = n", func(s *site) relayproto.Message {
			return &relayproto.Delta{Identity: s.ids[0], Lease: s.leases[0], Base: 10, Sequence: 11,
				Images: []relayproto.Image{{Bucket: 2, Word: 7}, {Bucket: buckets, Word: 7}}}
		}, ingest.InvalidIndex},
		{"bucket index 2^32-1", func(s *site) relayproto.Message {
			return &relayproto.Delta{Identity: s.ids[0], Lease: s.leases[0], Base: 10, Sequence: 11,
				Images: []relayproto.Image{{Bucket: ^uint32(0), Word: 7}}}
		}, ingest.InvalidIndex},
		{"duplicate bucket index", func(s *site) relayproto.Message {
			return &relayproto.Delta{Identity: s.ids[0], Lease: s.leases[0], Base: 10, Sequence: 11,
				Images: []relayproto.Image{{Bucket: 9, Word: 7}, {Bucket: 4, Word: 1}, {Bucket: 9, Word: 8}}}
		}, ingest.DuplicateIndex},
		{"empty delta", func(s *site) relayproto.Message {
			return &relayproto.Delta{Identity: s.ids[0], Lease: s.leases[0], Base: 10, Sequence: 11}
		}, ingest.EmptyDelta},
		{"sequence gap", func(s *site) relayproto.Message {
			return &relayproto.Delta{Identity: s.ids[0], Lease: s.leases[0], Base: 12, Sequence: 13,
				Images: []relayproto.Image{{Bucket: 1, Word: 7}}}
		}, ingest.BaseSequenceMismatch},
		{"snapshot of the wrong layout size", func(s *site) relayproto.Message {
			return &relayproto.Snapshot{Identity: s.ids[0], Lease: s.leases[0], Sequence: 20, Total: buckets * 2, Words: make([]uint64, buckets)}
		}, ingest.InvalidSnapshot},
		{"own identity with another format", func(s *site) relayproto.Message {
			id := s.ids[0]
			id.Format = wrongFormat
			return &relayproto.Delta{Identity: id, Lease: s.leases[0], Base: 10, Sequence: 11, Images: []relayproto.Image{{Bucket: 1, Word: 7}}}
		}, ingest.WrongIdentity},
		{"heartbeat proving a lost delta", func(s *site) relayproto.Message {
			return &relayproto.Heartbeat{Identity: s.ids[0], Lease: s.leases[0], Sequence: 15}
		}, ingest.DeltaLost},
	} {
		s := newSite(t, rng)
		before := s.state()
		o, _, err := s.c.Apply(frame(t, c.m(s)))
		var le *ingest.LaneError
		if o != c.want || !errors.As(err, &le) || le.Lane != 0 || le.Outcome != c.want {
			t.Errorf("Apply(%s) = %v, %v; want %v as a *LaneError on lane 0", c.what, o, err, c.want)
		}
		after := s.state()
		if !slices.Equal(after.words[0], before.words[0]) {
			t.Errorf("Apply(%s) wrote lane 0's words", c.what)
		}
		if after.ready&1 != 0 || s.c.Lane(0).Status().State != ingest.StateFaulted {
			t.Errorf("Apply(%s): lane 0 %v, ready bits %b; want FAULTED with its ready bit clear", c.what, after.lanes[0], after.ready)
		}
		if !slices.Equal(after.words[1], before.words[1]) || after.ready&2 == 0 || after.lanes[1] != before.lanes[1] {
			t.Errorf("Apply(%s) disturbed lane 1: %v → %v", c.what, before.lanes[1], after.lanes[1])
		}
	}
}

func TestHostile_AssignmentOfAWrongFormatOrForeignPoolIsRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t, 5), 2))
	s := newSite(t, rng)
	wrongFormat, err := relayproto.NewFormat(ckf.DefaultSeed, buckets*2)
	if err != nil {
		t.Fatal(err)
	}
	l := s.c.Lane(0)
	if err := l.Retire(); err != nil {
		t.Fatal(err)
	}
	before := l.Status()
	bad := s.ids[0]
	bad.Format = wrongFormat
	foreign := s.ids[0]
	foreign.Pool.DC = 77
	staleLease := s.leases[0]
	for _, c := range []struct {
		what  string
		id    relayproto.ProducerIdentity
		lease relayproto.Lease
		want  error
	}{
		{"another bucket count", bad, l.NextLease(), ingest.ErrWrongFormat},
		{"another DC's pool", foreign, l.NextLease(), ingest.ErrForeignPool},
		{"a reused epoch", s.ids[0], staleLease, ingest.ErrStaleEpoch},
	} {
		if err := l.Assign(c.id, c.lease); !errors.Is(err, c.want) {
			t.Errorf("Assign(%s) = %v, want %v", c.what, err, c.want)
		}
		if after := l.Status(); after.State != before.State || after.Identity != before.Identity || after.Lease != before.Lease {
			t.Errorf("Assign(%s) changed the lane: %v → %v", c.what, before.State, after.State)
		}
	}
}

// TestHostile_FrameFloodKeepsMemoryAndStateBounded pushes 200,000 hostile
// frames (random bytes, bit-flipped and length-forged real frames, forged
// identities and leases) through one consumer: none panics, the lanes stay
// READY with their words, and the live heap grows by less than 4 MiB.
func TestHostile_FrameFloodKeepsMemoryAndStateBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t, 6), 2))
	s := newSite(t, rng)
	forged := s.ids[0]
	forged.Pool.DC = 1000
	templates := [][]byte{
		frame(t, &relayproto.Delta{Identity: forged, Lease: s.leases[0], Base: 10, Sequence: 11, Images: []relayproto.Image{{Bucket: 1, Word: 1}}}),
		frame(t, &relayproto.Snapshot{Identity: forged, Lease: s.leases[1], Sequence: 99, Total: buckets, Words: make([]uint64, buckets)}),
		frame(t, &relayproto.Heartbeat{Identity: s.ids[1], Lease: relayproto.Lease{ConsumerInstance: 1, Lane: 1, Epoch: 9}, Sequence: 1 << 50}),
		frame(t, &relayproto.LoadReport{Identity: forged, Sequence: 1, TimestampUnixNano: 1}),
	}
	before := s.state()
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	buf := make([]byte, 0, 4096)
	const flood = 200_000
	rejected, ignored := 0, 0
	for i := range flood {
		buf = buf[:0]
		switch i % 4 {
		case 0: // random bytes, sometimes behind a valid magic and version
			n := rng.IntN(256)
			if rng.IntN(2) == 0 {
				buf = append(buf, 'G', 'I', 'R', 'F', wire.Version, byte(1+rng.IntN(5)), 0, 0)
			}
			for range n {
				buf = append(buf, byte(rng.Uint32()))
			}
		case 1: // a real frame with one bit flipped
			buf = append(buf, templates[rng.IntN(len(templates))]...)
			buf[rng.IntN(len(buf))] ^= 1 << rng.IntN(8)
		case 2: // a real frame claiming another body length
			buf = append(buf, templates[rng.IntN(len(templates))]...)
			binary.LittleEndian.PutUint32(buf[8:], rng.Uint32())
		case 3: // a forged but well-formed frame
			buf = append(buf, templates[rng.IntN(len(templates))]...)
		}
		o, _, err := s.c.Apply(buf)
		switch {
		case err != nil && o == 0:
			rejected++
		case o.Ignored():
			ignored++
		default:
			t.Fatalf("flood frame %d (%x…) = %v, %v; want a rejection or an ignore", i, buf[:min(len(buf), 24)], o, err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if grown := int64(m1.HeapAlloc) - int64(m0.HeapAlloc); grown > 4<<20 {
		t.Errorf("live heap grew %d bytes over %d hostile frames, want ≤ 4 MiB", grown, flood)
	}
	if after := s.state(); !after.equal(before) {
		t.Errorf("the flood changed the site: %v → %v", before.lanes, after.lanes)
	}
	if rejected == 0 || ignored < flood/4 {
		t.Errorf("flood: %d rejected, %d ignored of %d; want both kinds (the generator is broken otherwise)", rejected, ignored, flood)
	}
}

// TestHostile_DynamoDecodersRefuseOversizedInputBeforeAllocating feeds the
// event decoders messages over their limits, including tiny ones whose
// headers claim huge arrays; each fails with a *dynamo.LimitError (or a
// decode error) and allocates far less than the claim.
func TestHostile_DynamoDecodersRefuseOversizedInputBeforeAllocating(t *testing.T) {
	huge := make([]byte, dynamo.MaxMessageBytes+1)
	if _, _, err := dynamo.DecodeMessage(huge); !isLimit(err) {
		t.Errorf("DecodeMessage(%d bytes) = %v, want a LimitError", len(huge), err)
	}
	if _, err := dynamo.DecodeJSON(huge); !isLimit(err) {
		t.Errorf("DecodeJSON(%d bytes) = %v, want a LimitError", len(huge), err)
	}
	if _, err := dynamo.DecodeMsgpack(huge); !isLimit(err) {
		t.Errorf("DecodeMsgpack(%d bytes) = %v, want a LimitError", len(huge), err)
	}
	// A msgpack array32 header claiming 2^32-1 elements, then nothing: in
	// every position a decoder could read an array, a map or a string.
	claims := [][]byte{
		{0xdd, 0xff, 0xff, 0xff, 0xff},
		{0xdf, 0xff, 0xff, 0xff, 0xff},
		{0xdb, 0xff, 0xff, 0xff, 0xff},
		{0xc6, 0xff, 0xff, 0xff, 0xff},
		{0x82, 0xa5, 'e', 'v', 'e', 'n', 't', 0xdd, 0xff, 0xff, 0xff, 0xff},
	}
	for _, b := range claims {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		_, err1 := dynamo.DecodeMsgpack(b)
		_, _, err2 := dynamo.DecodeMessage(b)
		runtime.ReadMemStats(&m1)
		if err1 == nil || err2 == nil {
			t.Errorf("decode(%x) = %v / %v, want errors", b, err1, err2)
		}
		if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 1<<20 {
			t.Errorf("decode(%x) allocated %d bytes for a %d-byte input, want ≤ 1 MiB", b, alloc, len(b))
		}
	}
}

func isLimit(err error) bool {
	var le *dynamo.LimitError
	return errors.As(err, &le)
}
