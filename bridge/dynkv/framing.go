package dynkv

// arrayFilter drops, where a command begins, the empty and null command
// arrays (`*0\r\n`, `*-1\r\n`, any count below 1), which Valkey ignores
// (no reply, the connection stays open) and redcon refuses (a protocol
// error, and the connection closed). Every other byte passes unchanged,
// in order. It follows RESP's framing only as far as it must to know
// where each command begins (a multibulk header, its bulk headers and
// bodies; an inline line); on anything else it stops filtering for the
// rest of the connection and leaves redcon to answer as before.
type arrayFilter struct {
	state  filterState
	header []byte // a '*' line read where a command begins, held back
	left   int64  // bulk strings left in the command
	size   int64  // the bulk length being read
	skip   int64  // bytes of the bulk and its CRLF still to pass
}

// filterState is where arrayFilter is in the stream.
type filterState uint8

const (
	atCommand    filterState = iota // the next byte begins a command
	inHeader                        // reading a '*' line, held back
	inInline                        // an inline command, up to '\n'
	atBulk                          // expecting a bulk header's '$'
	inBulkSize                      // the bulk header's digits
	atBulkSizeLF                    // the bulk header's '\n'
	inBulk                          // the bulk's bytes and CRLF
	opaque                          // lost: pass everything
)

// maxHeaderBytes bounds a held '*' line: a count of a command fits in a
// few bytes ("*1048576\r\n"); a longer line is not filtered.
const maxHeaderBytes = 24

// filter appends src, with the empty and null arrays that begin commands
// removed, to dst and returns it. Bytes of a '*' line not yet complete are
// held until it is.
func (f *arrayFilter) filter(dst, src []byte) []byte {
	for len(src) > 0 {
		switch f.state {
		case opaque:
			return append(dst, src...)
		case inBulk:
			n := min(int64(len(src)), f.skip)
			dst, src = append(dst, src[:n]...), src[n:]
			if f.skip -= n; f.skip == 0 {
				if f.left--; f.left == 0 {
					f.state = atCommand
				} else {
					f.state = atBulk
				}
			}
			continue
		}
		b := src[0]
		src = src[1:]
		switch f.state {
		case atCommand:
			switch b {
			case '*':
				f.state, f.header = inHeader, append(f.header[:0], b)
				continue
			case '\n':
			default:
				f.state = inInline
			}
		case inInline:
			if b == '\n' {
				f.state = atCommand
			}
		case inHeader:
			f.header = append(f.header, b)
			if b != '\n' {
				if len(f.header) > maxHeaderBytes {
					dst, f.state = append(dst, f.header...), opaque
				}
				continue
			}
			count, ok := headerCount(f.header)
			switch {
			case !ok:
				dst, f.state = append(dst, f.header...), opaque
			case count < 1:
				f.state = atCommand // dropped, as Valkey ignores it
			default:
				dst, f.state, f.left = append(dst, f.header...), atBulk, count
			}
			continue
		case atBulk:
			f.state, f.size = inBulkSize, 0
			if b != '$' {
				f.state = opaque
			}
		case inBulkSize:
			switch {
			case b >= '0' && b <= '9' && f.size <= MaxRequestBytes:
				f.size = f.size*10 + int64(b-'0')
			case b == '\r':
				f.state = atBulkSizeLF
			default:
				f.state = opaque
			}
		case atBulkSizeLF:
			f.state, f.skip = inBulk, f.size+2
			if b != '\n' {
				f.state = opaque
			}
		}
		dst = append(dst, b)
	}
	return dst
}

// headerCount parses a complete "*<count>\r\n" line.
func headerCount(line []byte) (int64, bool) {
	digits := line[1 : len(line)-1]
	if len(digits) < 2 || digits[len(digits)-1] != '\r' {
		return 0, false
	}
	digits = digits[:len(digits)-1]
	neg := digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' || n > MaxRequestBytes {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if len(digits) == 0 {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}
