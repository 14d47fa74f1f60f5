//go:build !race

package ckfindex

const raceEnabled = false
