// Package doccheck keeps each package's doc.go honest: its file map must
// list exactly the package's non-test Go and assembly (.s) files. Every
// package's doc_test.go calls FileMap, so the check is written once.
//
// A file map is the list under a "Files" heading (either "Files:" or
// "# Files") of bullets "//   - name.go: job"; a bullet may name several
// files ("//   - a.go, b.go: job") and a bullet or its continuation lines
// may map more ("…; c.go: job"). doc.go itself may be listed or not.
//
// # Files
//
//   - doccheck.go: FileMap and Mapped.
package doccheck
