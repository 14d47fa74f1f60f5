package syncbuf

import (
	"strings"
	"sync"
	"testing"

	"github.com/goindex/goindex/internal/doccheck"
)

func TestDoc_FileMapMatchesDirectory(t *testing.T) { doccheck.FileMap(t, ".") }

// Writers and a reader run at once (go test -race checks the guard); every
// write is kept whole.
func TestBuffer_ConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if _, err := b.Write([]byte("ab\n")); err != nil {
					t.Errorf("Write: %v", err)
				}
				_ = b.String()
			}
		})
	}
	wg.Wait()
	s := b.String()
	if n := strings.Count(s, "ab\n"); n != 800 || len(s) != 800*3 {
		t.Errorf("buffer holds %d whole writes in %d bytes, want 800 in 2400", n, len(s))
	}
}
