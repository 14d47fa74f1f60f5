package shm

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/replica"
	"github.com/zeebo/xxh3"
)

// Layout constants of a replica file (see the package doc for the byte map).
const (
	// LayoutVersion is the file layout this package writes and reads (2:
	// lane integrity blocks after the lane records).
	LayoutVersion = 2
	// FixedHeaderBytes is the size of the fixed header at offset 0.
	FixedHeaderBytes = 256
	// LaneMetaBytes is the size of one lane's metadata record; lane l's
	// record starts at FixedHeaderBytes + l·LaneMetaBytes.
	LaneMetaBytes = 256
	// RegionAlignBytes aligns the bucket region: a page, which is also a
	// multiple of the replica's 64-byte cache-line alignment.
	RegionAlignBytes = 4096
	// MaxLanes is the most lanes a file holds (the replica's limit).
	MaxLanes = replica.MaxLanes
)

// magic opens every replica file.
const magic = "GOIXREPL"

// Byte offsets of the fixed header. Fields before offChecksum are written
// once, before the file is renamed into place, and covered by the checksum;
// the words from offState on are shared and accessed with sync/atomic.
const (
	offMagic       = 0
	offVersion     = 8  // u32
	offHeaderBytes = 12 // u32: offset of the bucket region
	offGeneration  = 16
	offSeed        = 24
	offBuckets     = 32
	offLanes       = 40 // u32
	offStride      = 44 // u32: words per replica row
	offRegionBytes = 48
	offDomain      = 56
	offConsumer    = 64
	offCreated     = 72
	offChecksum    = 80
	offState       = 88
	offHeartbeat   = 96
)

// File states (the word at offState).
const (
	stateLive    = 0
	stateRetired = 1
)

// Word indices of a lane's metadata record (8-byte words).
const (
	lwDC = iota
	lwState
	lwIncarnation
	lwLayoutGeneration
	lwEpoch
	lwInstalled
	lwLatest
	lwAppliedAt
	lwRTTMicros
	lwRTTAt
	lwLoadAt
	lwLoadReceivedAt
	lwActiveBlocks
	lwQueuedPrefillTokens
	lwActiveDecodeBlocks
	lwLiveWorkers
	lwCapacityBlocks
	lwPrefillTokensPerMs
	lwQueueTokensPerMs
	lwDecodeBlocksPerMs
	lwFaults
	lwSnapshots
	lwDeltas
	lwStoredBlocks      // added in place of a reserved word: older readers skip it
	lwStoredIncarnation // the relay incarnation lwStoredBlocks counts since
	laneWordsUsed
)

// Layout is what a replica file holds: the consumer's addressing format
// (every lane shares it), its domain and instance, and the DC of each lane.
type Layout struct {
	Seed             uint64
	Buckets          uint64   // power of two in [2, 2^24]
	Domain           uint64   // the one domain the consumer serves
	ConsumerInstance uint64   // the consumer that writes the file
	DCs              []uint64 // DC id of lane l at DCs[l]; 1..64 lanes
}

func (l *Layout) replicaConfig() replica.Config {
	return replica.Config{Lanes: len(l.DCs), Buckets: l.Buckets}
}

func (l *Layout) validate() error {
	if len(l.DCs) < 1 || len(l.DCs) > MaxLanes {
		return fmt.Errorf("%w: %d lanes, want 1..%d", ErrBadLayout, len(l.DCs), MaxLanes)
	}
	if _, err := replica.RegionWords(l.replicaConfig()); err != nil {
		return fmt.Errorf("%w: %w", ErrBadLayout, err)
	}
	return nil
}

// headerBytes returns the region offset for lanes: the fixed header, the
// lane records and the lanes' integrity blocks, rounded up to
// RegionAlignBytes.
func headerBytes(lanes int) int {
	n := FixedHeaderBytes + lanes*(LaneMetaBytes+IntegrityBytes)
	return (n + RegionAlignBytes - 1) / RegionAlignBytes * RegionAlignBytes
}

// rowWords returns the words per replica row: the lanes rounded up to
// whole cache lines of replica.GroupLanes words (the replica's layout).
func rowWords(cfg replica.Config) int {
	return (cfg.Lanes + replica.GroupLanes - 1) / replica.GroupLanes * replica.GroupLanes
}

// header is the decoded fixed header.
type header struct {
	generation  uint64
	seed        uint64
	buckets     uint64
	lanes       int
	stride      int
	headerBytes int
	regionBytes uint64
	domain      uint64
	consumer    uint64
	created     time.Time
	checksum    uint64
	dcs         []uint64
}

// checksum covers the immutable fixed header fields and the lanes' DC ids.
func checksum(b []byte, lanes int) uint64 {
	h := xxh3.New()
	h.Write(b[:offChecksum])
	for l := range lanes {
		off := FixedHeaderBytes + l*LaneMetaBytes + 8*lwDC
		h.Write(b[off : off+8])
	}
	return h.Sum64()
}

// writeHeader fills the immutable header of a fresh, zeroed file image b.
func writeHeader(b []byte, l *Layout, generation uint64, created time.Time) {
	le := binary.LittleEndian
	cfg := l.replicaConfig()
	regionWords, _ := replica.RegionWords(cfg)
	copy(b[offMagic:], magic)
	le.PutUint32(b[offVersion:], LayoutVersion)
	le.PutUint32(b[offHeaderBytes:], uint32(headerBytes(len(l.DCs))))
	le.PutUint64(b[offGeneration:], generation)
	le.PutUint64(b[offSeed:], l.Seed)
	le.PutUint64(b[offBuckets:], l.Buckets)
	le.PutUint32(b[offLanes:], uint32(len(l.DCs)))
	le.PutUint32(b[offStride:], uint32(rowWords(cfg)))
	le.PutUint64(b[offRegionBytes:], uint64(regionWords)*8)
	le.PutUint64(b[offDomain:], l.Domain)
	le.PutUint64(b[offConsumer:], l.ConsumerInstance)
	le.PutUint64(b[offCreated:], uint64(created.UnixNano()))
	for i, dc := range l.DCs {
		le.PutUint64(b[FixedHeaderBytes+i*LaneMetaBytes+8*lwDC:], dc)
	}
	le.PutUint64(b[offChecksum:], checksum(b, len(l.DCs)))
}

// parseHeader validates the header of a file image b of fileBytes bytes
// (b may be just the header pages) and decodes it.
func parseHeader(path string, b []byte, fileBytes int64) (header, error) {
	le := binary.LittleEndian
	bad := func(err error, field string, off int, format string, args ...any) (header, error) {
		return header{}, &FieldError{Path: path, Field: field, Offset: off, Reason: fmt.Sprintf(format, args...), Err: err}
	}
	if len(b) < FixedHeaderBytes || fileBytes < FixedHeaderBytes {
		return bad(ErrForeign, "size", 0, "%d bytes, a header needs %d", fileBytes, FixedHeaderBytes)
	}
	if string(b[offMagic:offMagic+len(magic)]) != magic {
		return bad(ErrForeign, "magic", offMagic, "%q, want %q", b[offMagic:offMagic+len(magic)], magic)
	}
	if v := le.Uint32(b[offVersion:]); v != LayoutVersion {
		return bad(ErrVersion, "version", offVersion, "%d, want %d", v, LayoutVersion)
	}
	h := header{
		generation:  le.Uint64(b[offGeneration:]),
		seed:        le.Uint64(b[offSeed:]),
		buckets:     le.Uint64(b[offBuckets:]),
		lanes:       int(le.Uint32(b[offLanes:])),
		stride:      int(le.Uint32(b[offStride:])),
		headerBytes: int(le.Uint32(b[offHeaderBytes:])),
		regionBytes: le.Uint64(b[offRegionBytes:]),
		domain:      le.Uint64(b[offDomain:]),
		consumer:    le.Uint64(b[offConsumer:]),
		created:     time.Unix(0, int64(le.Uint64(b[offCreated:]))),
	}
	if h.lanes < 1 || h.lanes > MaxLanes {
		return bad(ErrCorrupt, "lanes", offLanes, "%d, want 1..%d", h.lanes, MaxLanes)
	}
	if h.headerBytes != headerBytes(h.lanes) {
		return bad(ErrCorrupt, "header bytes", offHeaderBytes, "%d, %d lanes need %d", h.headerBytes, h.lanes, headerBytes(h.lanes))
	}
	if len(b) < h.headerBytes {
		return bad(ErrCorrupt, "size", len(b), "%d bytes, the header needs %d", fileBytes, h.headerBytes)
	}
	if got, want := le.Uint64(b[offChecksum:]), checksum(b, h.lanes); got != want {
		return bad(ErrCorrupt, "checksum", offChecksum, "%#x, header bytes hash to %#x", got, want)
	}
	h.checksum = le.Uint64(b[offChecksum:])
	if _, err := ckf.NewFormat(h.seed, h.buckets); err != nil {
		return bad(ErrCorrupt, "buckets", offBuckets, "%v", err)
	}
	cfg := replica.Config{Lanes: h.lanes, Buckets: h.buckets}
	words, err := replica.RegionWords(cfg)
	if err != nil {
		return bad(ErrCorrupt, "lanes", offLanes, "%v", err)
	}
	if h.regionBytes != uint64(words)*8 {
		return bad(ErrCorrupt, "region bytes", offRegionBytes, "%d, %d lanes × %d buckets need %d", h.regionBytes, h.lanes, h.buckets, words*8)
	}
	if h.stride != rowWords(cfg) {
		return bad(ErrCorrupt, "row words", offStride, "%d, want %d", h.stride, rowWords(cfg))
	}
	if want := int64(h.headerBytes) + int64(h.regionBytes); fileBytes < want {
		return bad(ErrCorrupt, "size", 0, "%d bytes, header says %d", fileBytes, want)
	}
	h.dcs = make([]uint64, h.lanes)
	for l := range h.dcs {
		h.dcs[l] = le.Uint64(b[FixedHeaderBytes+l*LaneMetaBytes+8*lwDC:])
	}
	return h, nil
}
