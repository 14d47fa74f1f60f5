package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// TB is the part of testing.TB FileMap uses.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

var (
	heading   = regexp.MustCompile(`^//\s*(# )?Files:?\s*$`)
	goFile    = regexp.MustCompile(`[A-Za-z0-9_]+\.(?:go|s)\b`)
	mappedTag = regexp.MustCompile(`([A-Za-z0-9_]+\.(?:go|s)):`)
)

// FileMap fails t unless dir/doc.go's file map lists exactly the non-test
// .go files and the assembly (.s) files in dir, leaving out files whose names start with one of skip
// (files another package documents). Test files the map mentions are not
// checked.
func FileMap(t TB, dir string, skip ...string) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(dir, "doc.go"))
	if err != nil {
		t.Fatalf("doccheck: read doc.go: %v", err)
	}
	mapped := Mapped(string(doc))
	if len(mapped) == 0 {
		t.Fatalf("doccheck: %s/doc.go has no file map (a Files heading with '//   - name.go: job' bullets)", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("doccheck: read %s: %v", dir, err)
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if !(strings.HasSuffix(n, ".go") || strings.HasSuffix(n, ".s")) || strings.HasSuffix(n, "_test.go") || n == "doc.go" || skipped(n, skip) {
			continue
		}
		files = append(files, n)
	}
	mapped = slices.DeleteFunc(mapped, func(n string) bool {
		return n == "doc.go" || strings.HasSuffix(n, "_test.go") || skipped(n, skip)
	})
	if !slices.Equal(mapped, files) {
		t.Errorf("doccheck: %s/doc.go maps %v, directory has %v", dir, mapped, files)
	}
}

// Mapped returns the sorted, de-duplicated file names a doc comment's file
// map lists.
func Mapped(doc string) []string {
	var out []string
	in, bullets := false, false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case heading.MatchString(line):
			in, bullets = true, false
			continue
		case !in:
			continue
		case strings.TrimSpace(line) == "//" && !bullets:
			continue // blank lines between the heading and the list
		case strings.HasPrefix(line, "//   - "):
			bullets = true
			head, _, _ := strings.Cut(strings.TrimPrefix(line, "//   - "), ": ")
			out = append(out, goFile.FindAllString(head, -1)...)
		case strings.HasPrefix(line, "//     "):
		default:
			in = false
			continue
		}
		for _, m := range mappedTag.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func skipped(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
