//go:build unix

package snapshot

import (
	"os"

	"golang.org/x/sys/unix"
)

// openNonBlocking opens path for reading without blocking, even if a named
// pipe was put there after it was checked (opening one for reading would
// otherwise wait for a writer).
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
}
