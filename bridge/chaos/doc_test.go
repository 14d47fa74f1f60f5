package chaos

import (
	"testing"

	"github.com/goindex/goindex/internal/doccheck"
)

func TestDoc_FileMapMatchesDirectory(t *testing.T) { doccheck.FileMap(t, ".") }
