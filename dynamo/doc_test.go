package dynamo

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDoc_FileMapMatchesDirectory keeps doc.go's file map in step with the
// package directory: every Go file (and testdata/) is listed, and nothing
// listed is missing.
func TestDoc_FileMapMatchesDirectory(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	entry := regexp.MustCompile(`(?m)^//   - ([A-Za-z0-9_./]+):`)
	var listed []string
	for _, m := range entry.FindAllStringSubmatch(string(doc), -1) {
		listed = append(listed, m[1])
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var present []string
	for _, e := range entries {
		switch {
		case e.IsDir() && e.Name() == "testdata":
			present = append(present, "testdata/")
		case !e.IsDir() && strings.HasSuffix(e.Name(), ".go"):
			present = append(present, e.Name())
		}
	}
	slices.Sort(listed)
	slices.Sort(present)
	if !slices.Equal(listed, present) {
		t.Errorf("doc.go file map = %v, directory has %v", listed, present)
	}
}
