package dynkv

import (
	"bufio"
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

// Record outcomes.
const (
	outcomeAccepted = '+'
	outcomeRejected = '-'
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Log is an open append-only log. Safe for concurrent use.
type Log struct {
	mu       sync.Mutex
	f        *os.File
	w        *bufio.Writer
	fsync    bool
	buf      []byte
	diverged int
}

// Diverged returns how many replayed records had another outcome than the
// one recorded: 0 unless the engine is not deterministic (a bug).
func (l *Log) Diverged() int { return l.diverged }

// OpenLog opens (or creates) the log at path, replays it into e and returns
// it ready for appends. fsync makes every append durable before the reply.
func OpenLog(path string, e *Engine, fsync bool) (*Log, int, error) {
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
	return &Log{f: f, w: bufio.NewWriterSize(f, 1<<16), fsync: fsync, diverged: diverged}, n, nil
}

// replay re-executes every intact record and returns the offset after the
// last one, the records replayed and how many had another outcome than the
// one recorded.
func replay(f *os.File, e *Engine) (good int64, n, diverged int, err error) {
	r := bufio.NewReaderSize(f, 1<<16)
	var head [8]byte
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return good, n, diverged, nil // clean end or torn header
		}
		size, sum := binary.LittleEndian.Uint32(head[:4]), binary.LittleEndian.Uint32(head[4:])
		if size > maxRecordBytes {
			return good, n, diverged, nil
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(r, body); err != nil || crc32.Checksum(body, crcTable) != sum {
			return good, n, diverged, nil
		}
		args, err := decodeRecord(body)
		if err != nil {
			return good, n, diverged, nil
		}
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
		if got != want {
			diverged++
		}
		good += int64(len(head)) + int64(size)
		n++
	}
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
	body := binary.LittleEndian.AppendUint32(l.buf[:0], uint32(len(args)+3))
	body = binary.LittleEndian.AppendUint32(body, uint32(len(recordStamp)))
	body = append(body, recordStamp...)
	body = binary.LittleEndian.AppendUint32(body, 8)
	body = binary.BigEndian.AppendUint64(body, uint64(now.UnixNano()))
	body = binary.LittleEndian.AppendUint32(body, 1)
	body = append(body, outcome)
	for _, a := range args {
		body = binary.LittleEndian.AppendUint32(body, uint32(len(a)))
		body = append(body, a...)
	}
	l.buf = body
	var head [8]byte
	binary.LittleEndian.PutUint32(head[:4], uint32(len(body)))
	binary.LittleEndian.PutUint32(head[4:], crc32.Checksum(body, crcTable))
	if _, err := l.w.Write(head[:]); err != nil {
		return fmt.Errorf("dynkv: append log: %w", err)
	}
	if _, err := l.w.Write(body); err != nil {
		return fmt.Errorf("dynkv: append log: %w", err)
	}
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
	if err := l.w.Flush(); err != nil {
		l.f.Close()
		return fmt.Errorf("dynkv: flush log: %w", err)
	}
	return l.f.Close()
}
