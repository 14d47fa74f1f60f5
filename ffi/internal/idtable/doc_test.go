package idtable

import (
	"testing"

	"github.com/goindex/goindex/internal/doccheck"
)

// TestDoc_FileMapMatchesDirectory keeps doc.go's file map in step with the
// package's non-test Go files.
func TestDoc_FileMapMatchesDirectory(t *testing.T) { doccheck.FileMap(t, ".") }
