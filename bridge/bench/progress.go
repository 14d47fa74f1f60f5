package bench

import (
	"fmt"
	"io"
	"time"
)

// progress reports a long phase at most once a second, and not at all for
// phases shorter than a second. A nil writer reports nothing.
type progress struct {
	w     io.Writer
	label string
	next  time.Time
}

func newProgress(w io.Writer, label string) *progress {
	if w == nil {
		w = io.Discard
	}
	return &progress{w: w, label: label, next: time.Now().Add(time.Second)}
}

func (p *progress) tick(done, total int) {
	if now := time.Now(); now.After(p.next) {
		fmt.Fprintf(p.w, "bench: %s %d/%d\n", p.label, done, total)
		p.next = now.Add(time.Second)
	}
}
