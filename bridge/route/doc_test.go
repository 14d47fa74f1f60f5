package route

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestDoc_FileMapMatchesDirectory(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatalf("read doc.go: %v", err)
	}
	var mapped []string
	for _, m := range regexp.MustCompile(`(?m)^//   - ([a-z0-9_]+\.go):`).FindAllStringSubmatch(string(doc), -1) {
		mapped = append(mapped, m[1])
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatalf("read dir: %v", err)
	}
	var files []string
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") && n != "doc.go" {
			files = append(files, n)
		}
	}
	slices.Sort(mapped)
	if !slices.Equal(mapped, files) {
		t.Errorf("doc.go maps %v, directory has %v", mapped, files)
	}
}
