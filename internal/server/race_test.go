//go:build race

package server_test

// raceEnabled: the race detector's shadow memory roughly doubles what a
// process touches, so memory bounds in process tests allow for it.
const raceEnabled = true
