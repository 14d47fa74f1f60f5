package replica

import "errors"

// Errors of package replica. Each is returned wrapped with the lane, bucket
// or size it concerns; test with errors.Is. A call that returns one of them
// has changed nothing.
var (
	// ErrBadConfig reports an invalid Config (lanes outside [1, 64], a bucket
	// count that is not a power of two in [2, 2^24]) or SearchConfig (an
	// unknown mode, a window outside [1, 8], a format whose bucket count
	// differs from the table's).
	ErrBadConfig = errors.New("replica: bad config")
	// ErrBadRegion reports caller-provided storage that is shorter than
	// RegionWords or not aligned to RegionAlignBytes.
	ErrBadRegion = errors.New("replica: bad region")
	// ErrBadLane reports a lane index outside [0, Lanes()).
	ErrBadLane = errors.New("replica: bad lane")
	// ErrSnapshotSize reports a snapshot whose length is not the bucket count.
	ErrSnapshotSize = errors.New("replica: snapshot size mismatch")
	// ErrBadImage reports an image whose bucket index is not below the
	// bucket count; Apply validates every image before its first store.
	ErrBadImage = errors.New("replica: image bucket out of range")
)
