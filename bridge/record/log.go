package record

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// tailScanBytes is the chunk OpenLog reads backwards in to find the last
// newline of an existing log.
const tailScanBytes = 64 << 10

// OpenLog opens path for appending whole lines: created if missing,
// emptied with truncate, and otherwise cut back to just after its last
// newline (a killed writer's partial line is not an event). It returns the
// number of bytes cut.
func OpenLog(path string, truncate bool) (*os.File, int64, error) {
	flags := os.O_RDWR | os.O_CREATE | os.O_APPEND
	if truncate {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("record: %w", err)
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err == nil {
		var keep int64
		if keep, err = lastLineEnd(f, end); err == nil && keep < end {
			err = f.Truncate(keep) // O_APPEND: later writes land at the new end
		}
		if err == nil {
			return f, end - keep, nil
		}
	}
	f.Close()
	return nil, 0, fmt.Errorf("record: %s: %w", path, err)
}

// lastLineEnd returns the offset just after the last newline among the
// first size bytes of f (0 when there is none).
func lastLineEnd(f *os.File, size int64) (int64, error) {
	buf := make([]byte, min(size, tailScanBytes))
	for hi := size; hi > 0; {
		lo := max(0, hi-int64(len(buf)))
		chunk := buf[:hi-lo]
		if _, err := f.ReadAt(chunk, lo); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			return lo + int64(i) + 1, nil
		}
		hi = lo
	}
	return 0, nil
}
