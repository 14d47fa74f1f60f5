package ckf

import "errors"

// ErrBadFormat reports an invalid addressing format or sizing request.
var ErrBadFormat = errors.New("ckf: bad format")
