package sim

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDoc_FilesSectionListsEveryFile keeps doc.go's "# Files" list equal to
// the package's Go files (tests excluded).
func TestDoc_FilesSectionListsEveryFile(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatalf("read doc.go: %v", err)
	}
	_, section, ok := strings.Cut(string(src), "// # Files\n")
	if !ok {
		t.Fatal("doc.go has no # Files section")
	}
	section, _, _ = strings.Cut(section, "\n//\n")
	var listed []string
	for _, line := range strings.Split(section, "\n") {
		name, _, ok := strings.Cut(strings.TrimPrefix(line, "//   - "), ":")
		if ok && strings.HasSuffix(name, ".go") {
			listed = append(listed, name)
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
	slices.Sort(listed)
	if !slices.Equal(listed, files) {
		t.Errorf("doc.go lists %v, the directory has %v", listed, files)
	}
}
