package harness

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDoc_FileMapMatchesDirectory keeps doc.go's file map in step with the
// package's non-test Go files.
func TestDoc_FileMapMatchesDirectory(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatalf("read doc.go: %v", err)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^//   - ([a-z_]+\.go):`).FindAllSubmatch(doc, -1) {
		listed = append(listed, string(m[1]))
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatalf("read dir: %v", err)
	}
	var files []string
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			files = append(files, n)
		}
	}
	slices.Sort(listed)
	slices.Sort(files)
	if !slices.Equal(listed, files) {
		t.Errorf("doc.go lists %v, directory has %v", listed, files)
	}
}
