//go:build invariants

package algorithms

// invariants turns on the checks of post-conditions that would corrupt
// state if broken (go test -tags invariants); see invariants_off.go.
const invariants = true
