package score

import "errors"

// ErrNoCandidate means no candidate had every signal the policy needs.
var ErrNoCandidate = errors.New("score: no eligible candidate")

// ErrBadConfig reports an invalid Config or request.
var ErrBadConfig = errors.New("score: bad config")
