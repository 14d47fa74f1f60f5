//go:build race

package ckfindex

// raceEnabled: the race detector makes sync.Pool drop items, so allocation
// counts are not meaningful under -race.
const raceEnabled = true
