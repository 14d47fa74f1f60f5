package dynkv

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
	"time"
)

// The append-only log holds every write command the server executed,
// accepted or rejected, in the order the engine ran it, with the time it ran
// and its outcome. Record: u32 body length, u32 CRC-32C of the body, body =
// u32 argc, argc × (u32 len, bytes), all little-endian. The first three
// arguments are the stamp (recordStamp, the unix time in nanoseconds as 8
// big-endian bytes, and the outcome: '+' accepted, '-' rejected), the rest
// the command. Replay re-executes every record at its time: the engine is
// deterministic, so a replay reproduces every effect, including any a
// rejected command might have, and one outcome that differs from the
// recorded one (a bug) is counted (Log.Diverged) rather than stopping the
// server from starting. Records of earlier versions (stamp recordStampV1
// without an outcome: accepted mutations only; or no stamp: replayed at the
// current time) replay the same way. A torn or corrupt tail (a crash
// mid-write) is truncated on open; everything before it is replayed.
//
// A rewrite (Log.rewrite, run by the server's SAVE, BGSAVE, BGREWRITEAOF and
// automatic trigger) replaces the log with a compact one: the engine's state
// image (image.go) as records imageChunk, each a part of it, closed by
// imageEnd (the image's length and CRC-32C), then every record appended
// since the image was taken. It writes that into a temporary file beside
// the log (rewriteSuffix), syncs it, renames it over the log and syncs the
// directory, so a crash at any point leaves either the old log or the new
// one, each complete; a temporary file left by a crash is removed on open.
// Replay restores the image, then re-executes the records after it. An
// image that does not start the log, or a log that ends inside its image
// (possible only if the file was damaged), is an error: the server refuses
// to start rather than serve an empty index.

// maxRecordBytes bounds one log record (the largest command the server accepts).
const maxRecordBytes = MaxRequestBytes + 1<<16

// maxRecordArgs bounds a record's arguments: the stamp's three and the
// longest command's six (REPLACE_RANK_IF_GENERATION).
const maxRecordArgs = 16

// recordStamp marks a record's time stamp. Replay needs the time because
// owner leases depend on it: a second owner may register once the first
// one's lease has expired, which replayed at the current time would be
// refused as DYNKV_WORKER_OWNED and stop the server from starting.
const recordStamp = "GOINDEX.RUN"

// recordStampV1 marks records of logs that held accepted mutations only,
// with a time stamp but no outcome.
const recordStampV1 = "GOINDEX.AT"

// Records of a state image: imageChunk carries one part of the image,
// imageEnd closes it with the image's length (8 bytes) and CRC-32C (4
// bytes), both big-endian.
const (
	imageChunk = "GOINDEX.IMAGE"
	imageEnd   = "GOINDEX.IMAGEEND"
	// imageChunkBytes is the image bytes one record carries.
	imageChunkBytes = 1 << 20
)

// rewriteSuffix names the temporary file a rewrite writes beside the log.
const rewriteSuffix = ".rewrite"

// Record outcomes.
const (
	outcomeAccepted = '+'
	outcomeRejected = '-'
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Log is an open append-only log. Safe for concurrent use.
type Log struct {
	mu       sync.Mutex
	path     string
	f        *os.File
	w        *bufio.Writer
	size     int64 // bytes appended, buffered or not
	fsync    bool
	buf      []byte
	diverged int
	closed   bool
}

// Diverged returns how many replayed records had another outcome than the
// one recorded: 0 unless the engine is not deterministic (a bug).
func (l *Log) Diverged() int { return l.diverged }

// OpenLog opens (or creates) the log at path, replays it into e and returns
// it ready for appends. fsync makes every append durable before the reply.
func OpenLog(path string, e *Engine, fsync bool) (*Log, int, error) {
	if err := os.Remove(path + rewriteSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, 0, fmt.Errorf("dynkv: remove the temporary file of an unfinished rewrite: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("dynkv: open log: %w", err)
	}
	good, n, diverged, err := replay(f, e)
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("dynkv: truncate torn log tail at %d: %w", good, err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("dynkv: seek log: %w", err)
	}
	return &Log{path: path, f: f, w: bufio.NewWriterSize(f, 1<<16), size: good, fsync: fsync, diverged: diverged}, n, nil
}

// replay restores the state image the log may start with and re-executes
// every intact record after it; it returns the offset after the last one,
// the records replayed and how many had another outcome than the one
// recorded.
func replay(f *os.File, e *Engine) (good int64, n, diverged int, err error) {
	r := bufio.NewReaderSize(f, 1<<16)
	var img []byte
	inImage, imaged := false, false
	for {
		// A first record cut short that names an image part is a damaged
		// image, not an empty log.
		first, _ := r.Peek(8 + 8 + len(imageChunk))
		args, size, ok := readRecord(r)
		if !ok {
			if good == 0 && bytes.HasSuffix(first, []byte(imageChunk)) {
				inImage = true
			}
			if inImage {
				return 0, 0, 0, fmt.Errorf("dynkv: log ends inside its state image (%d bytes read): the file is damaged", len(img))
			}
			return good, n, diverged, nil // clean end, or a torn tail
		}
		switch name := string(args[0]); {
		case name == imageChunk:
			if len(args) != 2 || imaged || n > 0 {
				return 0, 0, 0, fmt.Errorf("dynkv: log record at %d: a state image part after commands", good)
			}
			inImage = true
			img = append(img, args[1]...)
		case name == imageEnd:
			if !inImage || len(args) != 3 || len(args[1]) != 8 || len(args[2]) != 4 ||
				binary.BigEndian.Uint64(args[1]) != uint64(len(img)) || binary.BigEndian.Uint32(args[2]) != crc32.Checksum(img, crcTable) {
				return 0, 0, 0, fmt.Errorf("dynkv: log record at %d: state image end does not match its parts", good)
			}
			if err := e.restoreImage(img); err != nil {
				return 0, 0, 0, err
			}
			img, inImage, imaged = nil, false, true
		case inImage:
			return 0, 0, 0, fmt.Errorf("dynkv: log record at %d: a command inside the state image", good)
		default:
			if !replayRecord(e, args) {
				diverged++
			}
			n++
		}
		good += size
	}
}

// readRecord reads one intact record and its size on disk; ok is false at
// the end, at a torn record or at a corrupt one.
func readRecord(r *bufio.Reader) (args [][]byte, size int64, ok bool) {
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, 0, false
	}
	n, sum := binary.LittleEndian.Uint32(head[:4]), binary.LittleEndian.Uint32(head[4:])
	if n > maxRecordBytes {
		return nil, 0, false
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil || crc32.Checksum(body, crcTable) != sum {
		return nil, 0, false
	}
	args, err := decodeRecord(body)
	if err != nil {
		return nil, 0, false
	}
	return args, int64(len(head)) + int64(n), true
}

// replayRecord re-executes one command record at its time and reports
// whether its outcome is the one recorded.
func replayRecord(e *Engine, args [][]byte) bool {
	now, want := time.Now(), byte(outcomeAccepted)
	switch {
	case len(args) >= 4 && string(args[0]) == recordStamp && len(args[1]) == 8 && len(args[2]) == 1:
		now, want = time.Unix(0, int64(binary.BigEndian.Uint64(args[1]))), args[2][0]
		args = args[3:]
	case len(args) >= 3 && string(args[0]) == recordStampV1 && len(args[1]) == 8:
		now = time.Unix(0, int64(binary.BigEndian.Uint64(args[1])))
		args = args[2:]
	}
	got := byte(outcomeAccepted)
	if res := e.ExecAt(now, args); res.kind == replyError {
		got = outcomeRejected
	}
	return got == want
}

func decodeRecord(b []byte) ([][]byte, error) {
	if len(b) < 4 {
		return nil, errors.New("short record")
	}
	argc := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if argc == 0 || argc > maxRecordArgs {
		return nil, errors.New("bad argc")
	}
	args := make([][]byte, argc)
	for i := range args {
		if len(b) < 4 {
			return nil, errors.New("short arg length")
		}
		l := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if uint64(l) > uint64(len(b)) {
			return nil, errors.New("short arg")
		}
		args[i], b = b[:l], b[l:]
	}
	if len(b) != 0 {
		return nil, errors.New("trailing bytes")
	}
	return args, nil
}

// Append writes the record of one write command executed at time now,
// accepted or not (and syncs when configured).
func (l *Log) Append(now time.Time, accepted bool, args [][]byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	outcome := byte(outcomeRejected)
	if accepted {
		outcome = outcomeAccepted
	}
	stamp := [][]byte{[]byte(recordStamp), binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano())), {outcome}}
	l.buf = appendRecord(l.buf[:0], stamp, args)
	if _, err := l.w.Write(l.buf); err != nil {
		return fmt.Errorf("dynkv: append log: %w", err)
	}
	l.size += int64(len(l.buf))
	if err := l.w.Flush(); err != nil {
		return fmt.Errorf("dynkv: flush log: %w", err)
	}
	if l.fsync {
		if err := l.f.Sync(); err != nil {
			return fmt.Errorf("dynkv: sync log: %w", err)
		}
	}
	return nil
}

// appendRecord appends the record (header and body) of the arguments of
// every list, in order.
func appendRecord(dst []byte, lists ...[][]byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, 8)...)
	argc := 0
	for _, l := range lists {
		argc += len(l)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(argc))
	for _, l := range lists {
		for _, a := range l {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(a)))
			dst = append(dst, a...)
		}
	}
	body := dst[start+8:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(body, crcTable))
	return dst
}

// Size returns the bytes the log holds (appended records included).
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Sync makes every appended record durable.
func (l *Log) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.w.Flush(); err != nil {
		return fmt.Errorf("dynkv: flush log: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("dynkv: sync log: %w", err)
	}
	return nil
}

func (l *Log) fsyncs() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fsync
}

// setFsync turns the fsync before every reply on or off (CONFIG SET
// appendfsync).
func (l *Log) setFsync(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fsync = on
}

// Close flushes and closes the log.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if err := l.w.Flush(); err != nil {
		l.f.Close()
		return fmt.Errorf("dynkv: flush log: %w", err)
	}
	return l.f.Close()
}
