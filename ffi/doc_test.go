package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The file map in doc.go must name exactly the package's non-test Go files.
func TestDoc_FileMapMatchesDirectory(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatalf("reading doc.go: %v", err)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^//   - ([a-z_]+\.go):`).FindAllSubmatch(doc, -1) {
		listed = append(listed, string(m[1]))
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatalf("reading the package directory: %v", err)
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
		t.Errorf("doc.go's file map lists %v, the directory has %v", listed, files)
	}
}
