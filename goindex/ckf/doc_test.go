package ckf

import (
	"testing"

	"github.com/goindex/goindex/internal/doccheck"
)

// TestDoc_FileMapMatchesDirectory keeps doc.go's file map in step with the
// package's non-test Go files.
// Files named xxh3inline* belong to the replica work and are documented
// in goindex/replica, so they are left out.
func TestDoc_FileMapMatchesDirectory(t *testing.T) { doccheck.FileMap(t, ".", "xxh3inline") }
