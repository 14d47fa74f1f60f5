package relay

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
	"github.com/zeebo/xxh3"
)

// A pool's checkpoint file (Config.CheckpointDir) holds the exact state of
// the members whose latest events came in sequenced Dynamo envelopes,
// grouped by the envelopes' publisher, with each publisher's last sequence
// taken. Little-endian; offsets in bytes:
//
//	 0  [8]  magic "GOIXCKPT"
//	 8  u32  version (CheckpointVersion)
//	12  u32  publishers P
//	16  u64  domain
//	24  u64  DC
//	32  u64  addressing seed
//	40  u64  bucket count
//	48  u64  written, ns since the Unix epoch
//	56  P publisher records: u64 publisher id, u64 last sequence,
//	    u32 members M, u32 zero; then M member records: u64 worker,
//	    u32 rank, u32 zero, u64 mappings N; then N × (u64 source block id,
//	    u64 canonical hash)
//	end u64  XXH3-64 of every byte before it
const (
	checkpointMagic = "GOIXCKPT"
	// CheckpointVersion is the checkpoint layout this package writes and
	// reads; a file of another version is not restored (the pool starts
	// empty, as without a checkpoint).
	CheckpointVersion = 1
	// MaxCheckpointBytes bounds the checkpoint file a pool reads at start:
	// 16 bytes per block, so 1 GiB holds 64M blocks, well past one pool's
	// exact state at the relay's memory (about 64 bytes a block).
	MaxCheckpointBytes = 1 << 30

	checkpointHeaderBytes    = 56
	checkpointPublisherBytes = 24
	checkpointMemberBytes    = 24
	checkpointMappingBytes   = 16
	checkpointSumBytes       = 8
)

// checkpointHeader is what a checkpoint says it is the state of.
type checkpointHeader struct {
	Domain, DC    uint64
	Seed, Buckets uint64
	Written       time.Time
	Publishers    uint32
}

// checkpointMember is one member's exact state in a checkpoint.
type checkpointMember struct {
	Member   kv.Member
	Mappings []ckf.Mapping
}

// checkpointPublisher is one publisher's members in a checkpoint and the
// last envelope sequence taken from it.
type checkpointPublisher struct {
	ID, Sequence uint64
	Members      []checkpointMember
}

// checkpointWriter streams a checkpoint: every byte goes to the file's
// buffer and to the running sum.
type checkpointWriter struct {
	w   *bufio.Writer
	sum *xxh3.Hasher
	buf [checkpointPublisherBytes]byte
	n   int64
}

func (cw *checkpointWriter) put(b []byte) {
	_, _ = cw.sum.Write(b)
	_, _ = cw.w.Write(b) // bufio keeps the first error for Flush
	cw.n += int64(len(b))
}

func (cw *checkpointWriter) words(vs ...uint64) {
	b := cw.buf[:0]
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	cw.put(b)
}

// header writes the fixed header.
func (cw *checkpointWriter) header(h *checkpointHeader) {
	var b [checkpointHeaderBytes]byte
	copy(b[:], checkpointMagic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], CheckpointVersion)
	le.PutUint32(b[12:], h.Publishers)
	le.PutUint64(b[16:], h.Domain)
	le.PutUint64(b[24:], h.DC)
	le.PutUint64(b[32:], h.Seed)
	le.PutUint64(b[40:], h.Buckets)
	le.PutUint64(b[48:], uint64(h.Written.UnixNano()))
	cw.put(b[:])
}

// publisher starts a publisher record of members members.
func (cw *checkpointWriter) publisher(id, seq uint64, members uint32) {
	cw.words(id, seq, uint64(members))
}

// member writes one member record and its mappings.
func (cw *checkpointWriter) member(m kv.Member, mappings []ckf.Mapping) {
	cw.words(m.Worker, uint64(m.Rank), uint64(len(mappings)))
	for _, mp := range mappings {
		cw.words(mp.Source, mp.Canonical)
	}
}

// writeCheckpoint writes a checkpoint at path through fill, which writes
// the header and records: beside path under a temporary name, synced, then
// renamed into place, so a crash leaves the previous checkpoint or the new
// one, never a torn file. The temporary name is the same for every write
// (path + ".tmp"), so what a killed writer left is truncated and reused by
// the next write instead of piling up beside the checkpoint; two relays
// misconfigured onto one file can at worst rename a mixed file, which the
// checksum refuses at restore. It returns the file's size.
func writeCheckpoint(path string, fill func(cw *checkpointWriter)) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, fmt.Errorf("relay: checkpoint %s: %w", path, err)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, fmt.Errorf("relay: checkpoint %s: %w", path, err)
	}
	cw := &checkpointWriter{w: bufio.NewWriterSize(f, 1<<20), sum: xxh3.New()}
	fill(cw)
	var sum [checkpointSumBytes]byte
	binary.LittleEndian.PutUint64(sum[:], cw.sum.Sum64())
	_, _ = cw.w.Write(sum[:])
	err = cw.w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("relay: checkpoint %s: %w", path, err)
	}
	return cw.n + checkpointSumBytes, nil
}

// readCheckpointFile reads the checkpoint at path, refusing one over
// MaxCheckpointBytes. A missing file is fs.ErrNotExist.
func readCheckpointFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxCheckpointBytes+1))
	if err != nil {
		return nil, fmt.Errorf("relay: read checkpoint %s: %w", path, err)
	}
	if len(b) > MaxCheckpointBytes {
		return nil, fmt.Errorf("%w: %s is over %d bytes", ErrCheckpoint, path, MaxCheckpointBytes)
	}
	return b, nil
}

// checkpointPath returns the checkpoint file of a pool in dir.
func checkpointPath(dir string, n Names) string {
	return filepath.Join(dir, n.asset("checkpoint"))
}

// decodeCheckpoint checks b's sum, magic and version, decodes its header
// and hands it to accept (whose error stops the decode), then decodes the
// publisher records one at a time and hands each to each. Every count is
// checked against the bytes left before anything is allocated. Errors wrap
// ErrCheckpoint (ErrCheckpointVersion for another version), or are
// accept's or each's.
func decodeCheckpoint(b []byte, accept func(h *checkpointHeader) error, each func(p *checkpointPublisher) error) error {
	if len(b) < checkpointHeaderBytes+checkpointSumBytes {
		return fmt.Errorf("%w: %d bytes, shorter than a header", ErrCheckpoint, len(b))
	}
	if string(b[:len(checkpointMagic)]) != checkpointMagic {
		return fmt.Errorf("%w: no checkpoint magic", ErrCheckpoint)
	}
	le := binary.LittleEndian
	if v := le.Uint32(b[8:]); v != CheckpointVersion {
		return fmt.Errorf("%w: version %d, this relay reads %d", ErrCheckpointVersion, v, CheckpointVersion)
	}
	body := b[:len(b)-checkpointSumBytes]
	if got, want := xxh3.Hash(body), le.Uint64(b[len(body):]); got != want {
		return fmt.Errorf("%w: checksum %#x, the file says %#x", ErrCheckpoint, got, want)
	}
	h := checkpointHeader{Publishers: le.Uint32(b[12:]), Domain: le.Uint64(b[16:]), DC: le.Uint64(b[24:]),
		Seed: le.Uint64(b[32:]), Buckets: le.Uint64(b[40:]), Written: time.Unix(0, int64(le.Uint64(b[48:])))}
	if err := accept(&h); err != nil {
		return err
	}
	rest := body[checkpointHeaderBytes:]
	if uint64(h.Publishers) > uint64(len(rest))/checkpointPublisherBytes {
		return fmt.Errorf("%w: %d publishers in %d bytes", ErrCheckpoint, h.Publishers, len(rest))
	}
	for i := range h.Publishers {
		if len(rest) < checkpointPublisherBytes {
			return fmt.Errorf("%w: publisher %d cut short", ErrCheckpoint, i)
		}
		p := checkpointPublisher{ID: le.Uint64(rest), Sequence: le.Uint64(rest[8:])}
		members, zero := le.Uint32(rest[16:]), le.Uint32(rest[20:])
		rest = rest[checkpointPublisherBytes:]
		if zero != 0 || uint64(members) > uint64(len(rest))/checkpointMemberBytes {
			return fmt.Errorf("%w: publisher %d: %d members in %d bytes", ErrCheckpoint, i, members, len(rest))
		}
		p.Members = make([]checkpointMember, 0, members)
		for j := range members {
			if len(rest) < checkpointMemberBytes {
				return fmt.Errorf("%w: publisher %d member %d cut short", ErrCheckpoint, i, j)
			}
			rank, n := le.Uint64(rest[8:]), le.Uint64(rest[16:])
			m := checkpointMember{Member: kv.Member{Worker: le.Uint64(rest), Rank: uint32(rank)}}
			rest = rest[checkpointMemberBytes:]
			if rank>>32 != 0 || n > uint64(len(rest))/checkpointMappingBytes {
				return fmt.Errorf("%w: publisher %d member %d: rank %d, %d mappings in %d bytes", ErrCheckpoint, i, j, rank, n, len(rest))
			}
			m.Mappings = make([]ckf.Mapping, n)
			for k := range m.Mappings {
				m.Mappings[k] = ckf.Mapping{Source: le.Uint64(rest), Canonical: le.Uint64(rest[8:])}
				rest = rest[checkpointMappingBytes:]
			}
			p.Members = append(p.Members, m)
		}
		if err := each(&p); err != nil {
			return err
		}
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d bytes after the last publisher", ErrCheckpoint, len(rest))
	}
	return nil
}
