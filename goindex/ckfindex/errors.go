package ckfindex

import "errors"

// ErrNoFreeLane means a stored event named a new member while every lane is
// taken; nothing changed.
var ErrNoFreeLane = errors.New("ckfindex: no free lane for a new member")

// ErrBadConfig reports an invalid Config.
var ErrBadConfig = errors.New("ckfindex: bad config")
