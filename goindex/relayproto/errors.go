package relayproto

import "errors"

// ErrBadFormat reports a Format that is not format_version 1 with 16-bit
// fingerprints, 4 slots and a power-of-two bucket count in [2, 2^24]. The
// frame decoder reports a frame carrying one with this sentinel too.
var ErrBadFormat = errors.New("relayproto: bad format")

// errBadManifest reports a Manifest with no lanes, too many lanes, a
// duplicate owner or an owner outside the manifest's domain.
var errBadManifest = errors.New("relayproto: bad manifest")
