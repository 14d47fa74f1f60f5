package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestMapped_ReadsEveryBulletForm(t *testing.T) {
	doc := `// Package x does things.
//
// # Files
//
//   - a.go: the first job.
//   - b.go, c.go: two files, one job
//     that continues here; d.go: another, and prose naming e.go.
//   - f.go: last
//
// Tests prove g.go: nothing (outside the map).
package x
`
	got := Mapped(doc)
	if want := []string{"a.go", "b.go", "c.go", "d.go", "f.go"}; !slices.Equal(got, want) {
		t.Errorf("Mapped = %v, want %v", got, want)
	}
	if got := Mapped("// Files:\n//   - only.go: job\npackage y\n"); !slices.Equal(got, []string{"only.go"}) {
		t.Errorf("Mapped(Files: form) = %v", got)
	}
}

func TestFileMap_CountsAssemblyFiles(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"a.go": "package p\n", "a_amd64.s": "TEXT ·f(SB), 0, $0\n",
		"doc.go": "// # Files\n//\n//   - a.go: job\npackage p\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var r recorder
	FileMap(&r, dir)
	if len(r.errs) != 1 {
		t.Errorf("FileMap with an unmapped .s file reported %v, want one error", r.errs)
	}
	if err := os.WriteFile(filepath.Join(dir, "doc.go"), []byte("// # Files\n//\n//   - a.go: job\n//   - a_amd64.s: the kernel\npackage p\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = recorder{}
	if FileMap(&r, dir); len(r.errs) != 0 {
		t.Errorf("FileMap with the .s file mapped reported %v, want none", r.errs)
	}
}

type recorder struct{ errs []string }

func (r *recorder) Helper()                   {}
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }
func (r *recorder) Fatalf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }

func TestFileMap_FlagsMissingAndExtraFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("doc.go", "// # Files\n//\n//   - a.go: job\n//   - gone.go: job\npackage p\n")
	write("a.go", "package p\n")
	write("a_test.go", "package p\n")
	write("other_x.go", "package p\n")
	var r recorder
	FileMap(&r, dir, "other_")
	if len(r.errs) != 1 {
		t.Fatalf("FileMap with a stale entry reported %v, want one error", r.errs)
	}
	write("doc.go", "// # Files\n//\n//   - a.go: job\npackage p\n")
	r = recorder{}
	FileMap(&r, dir, "other_")
	if len(r.errs) != 0 {
		t.Errorf("FileMap on a correct map reported %v", r.errs)
	}
	r = recorder{}
	FileMap(&r, dir)
	if len(r.errs) != 1 {
		t.Errorf("FileMap without the skip reported %v, want the unmapped other_x.go", r.errs)
	}
}

func TestFileMap_OwnPackage(t *testing.T) { FileMap(t, ".") }
