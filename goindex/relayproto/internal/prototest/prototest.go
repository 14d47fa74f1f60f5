package prototest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/goindex/goindex/goindex/relayproto"
	"github.com/goindex/goindex/goindex/relayproto/internal/bucketgen"
)

// Domain is the domain of every test identity.
const Domain relayproto.DomainID = 7

// Format returns the version-1 format of n buckets under a fixed seed,
// failing t when n is not a valid bucket count.
func Format(t testing.TB, n uint64) relayproto.Format {
	t.Helper()
	f, err := relayproto.NewFormat(0x5DEECE66D1B54A33, n)
	if err != nil {
		t.Fatalf("NewFormat(n=%d): %v", n, err)
	}
	return f
}

// Identity returns the identity of DC dc's producer in Domain, at
// incarnation incarnation and layout generation 1.
func Identity(f relayproto.Format, dc relayproto.DCID, incarnation uint64) relayproto.ProducerIdentity {
	return relayproto.ProducerIdentity{Pool: relayproto.PoolID{Domain: Domain, DC: dc}, Incarnation: incarnation, LayoutGeneration: 1, Format: f}
}

// AddFrameSeeds adds every golden frame of dir (the wire package's
// testdata: one file per frame type, *.frame), all of them concatenated,
// and two degenerate inputs to f's seed corpus.
func AddFrameSeeds(f *testing.F, dir string) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.frame"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("golden frames in %s: %d found, %v", dir, len(paths), err)
	}
	var all []byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		all = append(all, b...)
	}
	f.Add(all)
	f.Add([]byte("GIRF"))
	f.Add([]byte{})
}

// ModelSource is a trivial producer (a publisher's Source): a word array
// mutated at random, with a dirty window that drains net changes in
// ascending bucket order, as ckf.Producer does (spec §4.8).
type ModelSource struct {
	Words    []uint64
	original map[uint32]uint64 // bucket → word at first touch in this window
}

// NewModelSource returns a source of n empty buckets.
func NewModelSource(n uint64) *ModelSource {
	return &ModelSource{Words: make([]uint64, n), original: map[uint32]uint64{}}
}

// Set stores w in bucket b.
func (s *ModelSource) Set(b uint32, w uint64) {
	if _, ok := s.original[b]; !ok {
		s.original[b] = s.Words[b]
	}
	s.Words[b] = w
}

// Mutate changes k random buckets to random packed words (some emptied, some
// restored to their original, so that net reversions happen too).
func (s *ModelSource) Mutate(rng *rand.Rand, k int) {
	for range k {
		b := uint32(rng.IntN(len(s.Words)))
		switch rng.IntN(4) {
		case 0:
			s.Set(b, 0)
		case 1:
			if o, ok := s.original[b]; ok {
				s.Set(b, o)
				continue
			}
			s.Set(b, bucketgen.Word(rng))
		default:
			s.Set(b, bucketgen.Word(rng))
		}
	}
}

// Pending returns how many buckets the current window has touched.
func (s *ModelSource) Pending() int { return len(s.original) }

// AppendWords appends a copy of every word to dst.
func (s *ModelSource) AppendWords(dst []uint64) []uint64 { return append(dst, s.Words...) }

// Drain appends the net-changed images of the window, in ascending bucket
// order, and starts a new window.
func (s *ModelSource) Drain(dst []relayproto.Image) []relayproto.Image {
	start := len(dst)
	for b, o := range s.original {
		if s.Words[b] != o {
			dst = append(dst, relayproto.Image{Bucket: b, Word: s.Words[b]})
		}
	}
	slices.SortFunc(dst[start:], func(a, b relayproto.Image) int { return int(a.Bucket) - int(b.Bucket) })
	clear(s.original)
	return dst
}

// ErrSinkDown is what a Recorder returns when Fail says so.
var ErrSinkDown = errors.New("sink down")

// Recorder is a publisher's Sink that keeps deep copies of what it is sent
// and fails with ErrSinkDown when Fail returns true.
type Recorder struct {
	Msgs []relayproto.Message
	Fail func(m relayproto.Message) bool
}

// Send records a copy of m, or fails.
func (r *Recorder) Send(m relayproto.Message) error {
	if r.Fail != nil && r.Fail(m) {
		return ErrSinkDown
	}
	r.Msgs = append(r.Msgs, Clone(m))
	return nil
}

// Deltas returns the recorded deltas in order.
func (r *Recorder) Deltas() []*relayproto.Delta {
	var ds []*relayproto.Delta
	for _, m := range r.Msgs {
		if d, ok := m.(*relayproto.Delta); ok {
			ds = append(ds, d)
		}
	}
	return ds
}

// Clone returns a deep copy of m.
func Clone(m relayproto.Message) relayproto.Message {
	switch m := m.(type) {
	case *relayproto.Snapshot:
		c := *m
		c.Words = slices.Clone(m.Words)
		return &c
	case *relayproto.Delta:
		c := *m
		c.Images = slices.Clone(m.Images)
		return &c
	case *relayproto.DrainMarker:
		c := *m
		return &c
	case *relayproto.Heartbeat:
		c := *m
		return &c
	case *relayproto.LoadReport:
		c := *m
		return &c
	}
	panic(fmt.Sprintf("prototest.Clone(%T)", m))
}
