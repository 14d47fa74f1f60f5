package cbi1

import (
	"encoding/binary"
	"fmt"

	"github.com/zeebo/xxh3"
)

// Sizes and limits of the layout (doc.go).
const (
	HeaderBytes       = 48
	snapshotPrefix    = 16
	deltaPrefix       = 12
	imageBytes        = 12
	WireVersion       = 1
	FormatVersion     = 1
	FingerprintBits   = 16
	SlotsPerBucket    = 4
	FlagSnapshotChunk = 1
	FlagDelta         = 2
	// MaxChunkWords is the most bucket words of one snapshot chunk (4 MiB).
	MaxChunkWords = 512 << 10
	// MaxDeltaImages is the most images of one delta; a larger
	// publication is a snapshot.
	MaxDeltaImages = 349525
	// MaxFrameBytes bounds every frame: a full chunk with its prefix.
	MaxFrameBytes = HeaderBytes + snapshotPrefix + 8*MaxChunkWords
	minBuckets    = 2
	maxBuckets    = 1 << 24
)

var magic = [4]byte{'C', 'B', 'I', '1'}

// Header is what every frame repeats: the filter's format, the DC and the
// frame's epoch (its publication sequence).
type Header struct {
	Seed        uint64
	BucketCount uint64
	DCID        uint64
	Epoch       uint64
}

// Image is one absolute bucket word.
type Image struct {
	Bucket uint32
	Word   uint64
}

// Chunk is a decoded snapshot chunk; Words is a view of its own allocation.
type Chunk struct {
	Index, Count uint32
	Offset       uint64
	Words        []uint64
}

// Delta is a decoded delta.
type Delta struct {
	BaseEpoch uint64
	Images    []Image
}

// Frame is a decoded frame: exactly one of Chunk and Delta is set.
type Frame struct {
	Header Header
	Chunk  *Chunk
	Delta  *Delta
}

func (h *Header) check() error {
	if n := h.BucketCount; n < minBuckets || n > maxBuckets || n&(n-1) != 0 {
		return malformed("bucket_count", 20, "%d is not a power of two in [%d, %d]", n, minBuckets, maxBuckets)
	}
	return nil
}

func appendHeader(dst []byte, h *Header, flags uint16) []byte {
	dst = append(dst, magic[:]...)
	dst = binary.LittleEndian.AppendUint16(dst, WireVersion)
	dst = binary.LittleEndian.AppendUint16(dst, flags)
	dst = append(dst, FingerprintBits, SlotsPerBucket)
	dst = binary.LittleEndian.AppendUint16(dst, FormatVersion)
	dst = binary.LittleEndian.AppendUint64(dst, h.Seed)
	dst = binary.LittleEndian.AppendUint64(dst, h.BucketCount)
	dst = binary.LittleEndian.AppendUint64(dst, h.DCID)
	dst = binary.LittleEndian.AppendUint64(dst, h.Epoch)
	return binary.LittleEndian.AppendUint32(dst, 0) // checksum, set by seal
}

// seal writes the checksum of the body that follows the header at start.
func seal(frame []byte, start int) []byte {
	binary.LittleEndian.PutUint32(frame[start+44:], uint32(xxh3.Hash(frame[start+HeaderBytes:])))
	return frame
}

// AppendSnapshotChunk appends chunk index of count, holding words from
// bucket offset on, to dst.
func AppendSnapshotChunk(dst []byte, h Header, index, count uint32, offset uint64, words []uint64) ([]byte, error) {
	if err := h.check(); err != nil {
		return dst, err
	}
	switch {
	case index >= count:
		return dst, malformed("chunk_index", HeaderBytes, "%d of %d chunks", index, count)
	case len(words) == 0 || len(words) > MaxChunkWords:
		return dst, malformed("bucket words", HeaderBytes+snapshotPrefix, "%d words, want 1..%d", len(words), MaxChunkWords)
	case offset > h.BucketCount || uint64(len(words)) > h.BucketCount-offset:
		return dst, malformed("bucket_offset", HeaderBytes+8, "%d words at %d past %d buckets", len(words), offset, h.BucketCount)
	}
	start := len(dst)
	dst = appendHeader(dst, &h, FlagSnapshotChunk)
	dst = binary.LittleEndian.AppendUint32(dst, index)
	dst = binary.LittleEndian.AppendUint32(dst, count)
	dst = binary.LittleEndian.AppendUint64(dst, offset)
	for _, w := range words {
		dst = binary.LittleEndian.AppendUint64(dst, w)
	}
	return seal(dst, start), nil
}

// AppendDelta appends a delta from base to h.Epoch carrying images to dst.
func AppendDelta(dst []byte, h Header, base uint64, images []Image) ([]byte, error) {
	if err := h.check(); err != nil {
		return dst, err
	}
	if len(images) > MaxDeltaImages {
		return dst, malformed("image_count", HeaderBytes+8, "%d images over %d", len(images), MaxDeltaImages)
	}
	for i, im := range images {
		if uint64(im.Bucket) >= h.BucketCount {
			return dst, malformed("bucket", HeaderBytes+deltaPrefix+i*imageBytes, "bucket %d of %d", im.Bucket, h.BucketCount)
		}
	}
	start := len(dst)
	dst = appendHeader(dst, &h, FlagDelta)
	dst = binary.LittleEndian.AppendUint64(dst, base)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(images)))
	for _, im := range images {
		dst = binary.LittleEndian.AppendUint32(dst, im.Bucket)
		dst = binary.LittleEndian.AppendUint64(dst, im.Word)
	}
	return seal(dst, start), nil
}

// Decode checks and decodes one frame. The frame's words and images are
// copied out of src.
func Decode(src []byte) (Frame, error) {
	var f Frame
	le := binary.LittleEndian
	switch {
	case len(src) < HeaderBytes:
		return f, malformed("header", 0, "%d bytes, want at least %d", len(src), HeaderBytes)
	case len(src) > MaxFrameBytes:
		return f, malformed("frame", 0, "%d bytes over %d", len(src), MaxFrameBytes)
	case [4]byte(src[:4]) != magic:
		return f, malformed("magic", 0, "%q, want %q", src[:4], magic[:])
	case le.Uint16(src[4:]) != WireVersion:
		return f, malformed("wire_version", 4, "%d, want %d", le.Uint16(src[4:]), WireVersion)
	case src[8] != FingerprintBits || src[9] != SlotsPerBucket:
		return f, malformed("fingerprint_bits", 8, "%d bits × %d slots, want %d × %d", src[8], src[9], FingerprintBits, SlotsPerBucket)
	case le.Uint16(src[10:]) != FormatVersion:
		return f, malformed("format_version", 10, "%d, want %d", le.Uint16(src[10:]), FormatVersion)
	}
	f.Header = Header{Seed: le.Uint64(src[12:]), BucketCount: le.Uint64(src[20:]), DCID: le.Uint64(src[28:]), Epoch: le.Uint64(src[36:])}
	if err := f.Header.check(); err != nil {
		return f, err
	}
	body := src[HeaderBytes:]
	if got, want := uint32(xxh3.Hash(body)), le.Uint32(src[44:]); got != want {
		return f, &FormatError{Field: "body_checksum", Offset: 44, Reason: fmt.Sprintf("body hashes to %#x, header says %#x", got, want), Err: ErrChecksum}
	}
	switch flags := le.Uint16(src[6:]); flags {
	case FlagSnapshotChunk:
		c, err := decodeChunk(body, f.Header.BucketCount)
		f.Chunk = c
		return f, err
	case FlagDelta:
		d, err := decodeDelta(body, f.Header.BucketCount)
		f.Delta = d
		return f, err
	default:
		return f, malformed("flags", 6, "%d, want %d (snapshot chunk) or %d (delta)", flags, FlagSnapshotChunk, FlagDelta)
	}
}

func decodeChunk(body []byte, buckets uint64) (*Chunk, error) {
	le := binary.LittleEndian
	if len(body) < snapshotPrefix+8 || (len(body)-snapshotPrefix)%8 != 0 {
		return nil, malformed("snapshot body", HeaderBytes, "%d bytes: not a prefix and whole words", len(body))
	}
	c := &Chunk{Index: le.Uint32(body), Count: le.Uint32(body[4:]), Offset: le.Uint64(body[8:])}
	n := uint64(len(body)-snapshotPrefix) / 8
	switch {
	case c.Index >= c.Count:
		return nil, malformed("chunk_index", HeaderBytes, "%d of %d chunks", c.Index, c.Count)
	case n > MaxChunkWords:
		return nil, malformed("bucket words", HeaderBytes+snapshotPrefix, "%d words over %d", n, MaxChunkWords)
	case c.Offset > buckets || n > buckets-c.Offset:
		return nil, malformed("bucket_offset", HeaderBytes+8, "%d words at %d past %d buckets", n, c.Offset, buckets)
	}
	c.Words = make([]uint64, n)
	for i := range c.Words {
		c.Words[i] = le.Uint64(body[snapshotPrefix+8*i:])
	}
	return c, nil
}

func decodeDelta(body []byte, buckets uint64) (*Delta, error) {
	le := binary.LittleEndian
	if len(body) < deltaPrefix {
		return nil, malformed("delta body", HeaderBytes, "%d bytes, want at least %d", len(body), deltaPrefix)
	}
	d := &Delta{BaseEpoch: le.Uint64(body)}
	n := le.Uint32(body[8:])
	switch {
	case n > MaxDeltaImages:
		return nil, malformed("image_count", HeaderBytes+8, "%d images over %d", n, MaxDeltaImages)
	case uint64(len(body)) != deltaPrefix+uint64(n)*imageBytes:
		return nil, malformed("images", HeaderBytes+deltaPrefix, "%d bytes for %d images", len(body)-deltaPrefix, n)
	}
	d.Images = make([]Image, n)
	for i := range d.Images {
		off := deltaPrefix + i*imageBytes
		d.Images[i] = Image{Bucket: le.Uint32(body[off:]), Word: le.Uint64(body[off+4:])}
		if uint64(d.Images[i].Bucket) >= buckets {
			return nil, malformed("bucket", HeaderBytes+off, "bucket %d of %d", d.Images[i].Bucket, buckets)
		}
	}
	return d, nil
}

// Assembly puts one snapshot's chunks together: in order, contiguous from
// bucket 0, all of the first chunk's epoch, format and dc, until the
// bucket count is covered.
type Assembly struct {
	header Header
	count  uint32
	next   uint32
	words  []uint64
}

// Add takes the next chunk; done is true once the snapshot is whole. An
// error leaves the assembly unusable (start a new one).
func (a *Assembly) Add(f Frame) (done bool, err error) {
	c := f.Chunk
	switch {
	case c == nil:
		return false, malformed("flags", 6, "a delta inside a snapshot")
	case a.next == 0 && c.Index == 0:
		a.header, a.count, a.words = f.Header, c.Count, make([]uint64, 0, min(f.Header.BucketCount, 1<<20))
	case a.next == 0:
		return false, malformed("chunk_index", HeaderBytes, "snapshot starts at chunk %d, want 0", c.Index)
	case f.Header != a.header || c.Count != a.count:
		return false, malformed("header", 0, "chunk %d changes the snapshot's epoch, format, dc or chunk count", c.Index)
	case c.Index != a.next:
		return false, malformed("chunk_index", HeaderBytes, "chunk %d, want %d", c.Index, a.next)
	}
	if c.Offset != uint64(len(a.words)) {
		return false, malformed("bucket_offset", HeaderBytes+8, "%d, want %d (contiguous)", c.Offset, len(a.words))
	}
	a.words = append(a.words, c.Words...)
	a.next++
	full := uint64(len(a.words)) == a.header.BucketCount
	switch {
	case full && a.next != a.count:
		return false, malformed("chunk_count", HeaderBytes+4, "buckets covered after %d of %d chunks", a.next, a.count)
	case !full && a.next == a.count:
		return false, malformed("chunk_count", HeaderBytes+4, "%d chunks cover %d of %d buckets", a.count, len(a.words), a.header.BucketCount)
	}
	return full, nil
}

// Snapshot returns the assembled header and words once Add said done.
func (a *Assembly) Snapshot() (Header, []uint64) { return a.header, a.words }

// SnapshotChunks appends the frames of a whole snapshot of words, in
// chunks of at most chunkWords (MaxChunkWords when 0), to dst.
func SnapshotChunks(dst [][]byte, h Header, words []uint64, chunkWords int) ([][]byte, error) {
	if chunkWords <= 0 || chunkWords > MaxChunkWords {
		chunkWords = MaxChunkWords
	}
	if uint64(len(words)) != h.BucketCount {
		return dst, malformed("bucket words", 0, "%d words for %d buckets", len(words), h.BucketCount)
	}
	count := uint32((len(words) + chunkWords - 1) / chunkWords)
	for i := uint32(0); i < count; i++ {
		lo := int(i) * chunkWords
		frame, err := AppendSnapshotChunk(nil, h, i, count, uint64(lo), words[lo:min(lo+chunkWords, len(words))])
		if err != nil {
			return dst, err
		}
		dst = append(dst, frame)
	}
	return dst, nil
}
