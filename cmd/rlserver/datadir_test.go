package main

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestReleaseFreesTheDirectoryWhileACopyOfTheLockIsOpen: a child process
// forked at the moment (a test running node or redis-server beside the
// server, or a hook of the host) holds a copy of every descriptor until
// its exec closes it, and a flock lasts while any copy is open. Release
// must unlock, not just close, or a server restarted at once on the same
// directory is refused as if another one held it.
func TestReleaseFreesTheDirectoryWhileACopyOfTheLockIsOpen(t *testing.T) {
	dir := t.TempDir()
	d, err := openDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	copyFd, err := unix.Dup(int(d.lock.Fd())) // what a forked child holds
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(copyFd)
	d.Release()
	again, err := openDataDir(dir)
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	again.Release()
}
