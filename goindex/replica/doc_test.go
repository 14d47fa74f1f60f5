package replica

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDoc_FileMapMatchesDirectory keeps doc.go's file map in step with the
// package's non-test Go and assembly files.
func TestDoc_FileMapMatchesDirectory(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatalf("read doc.go: %v", err)
	}
	var mapped []string
	for _, m := range regexp.MustCompile(`(?m)^//   - ([a-z0-9_]+\.(?:go|s)):`).FindAllStringSubmatch(string(doc), -1) {
		mapped = append(mapped, m[1])
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatalf("read package directory: %v", err)
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		if (strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".s")) && !strings.HasSuffix(name, "_test.go") && name != "doc.go" {
			files = append(files, name)
		}
	}
	slices.Sort(mapped)
	if !slices.Equal(mapped, files) {
		t.Errorf("doc.go maps %v, directory has %v", mapped, files)
	}
}
