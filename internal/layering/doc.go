// Package layering holds the tests that keep rlserver's structure as
// docs/architecture.md draws it: which package may import which, how large
// a package and a function may grow. It has no code of its own.
package layering
