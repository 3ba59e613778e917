//go:build !invariants

package algorithms

// invariants is false in ordinary builds: the post-condition checks it
// guards cost time on paths the tests already prove, so they run only in
// builds tagged invariants (go test -tags invariants), as CI's race run
// should.
const invariants = false
