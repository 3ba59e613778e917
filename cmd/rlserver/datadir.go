package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rlserver/rlserver/internal/snapshot"
)

// lockFileName is the file in the data directory that the running server
// holds an exclusive flock on, and that names its pid.
const lockFileName = "rlserver.lock"

// dataDir is a data directory this process holds: no other rlserver can use
// it until Release (or the process's exit, which releases the lock too).
type dataDir struct {
	path string
	lock *os.File
}

// openDataDir prepares dir for this server: it creates it if missing, takes
// the lock (refusing, with the holder's pid, if another server has it), and
// checks that a file can be written there, so that a directory the server
// cannot save into fails the start rather than every save.
func openDataDir(dir string) (*dataDir, error) {
	if err := checkIsDir(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, notWritable(dir, err)
	}
	lockPath := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, notWritable(dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("--data-dir %s is in use by another rlserver (%s, per %s): two servers on one directory "+
				"would overwrite each other's snapshot; stop that one, or give this one another --data-dir", dir, holder(lockPath), lockPath)
		}
		return nil, fmt.Errorf("--data-dir %s: locking %s: %w", dir, lockPath, err)
	}
	d := &dataDir{path: dir, lock: f}
	if err := d.writePid(); err != nil {
		d.Release()
		return nil, notWritable(dir, err)
	}
	if err := checkWritable(dir); err != nil {
		d.Release()
		return nil, notWritable(dir, err)
	}
	return d, nil
}

// checkIsDir explains a --data-dir that names the snapshot file, or exists
// but is not a directory.
func checkIsDir(dir string) error {
	if filepath.Base(dir) == snapshot.FileName {
		// Never a directory of that name: created, it would stand where
		// another server's snapshot goes.
		return fmt.Errorf("--data-dir %s names the snapshot file: give the directory that holds it (--data-dir %s)", dir, filepath.Dir(dir))
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.IsDir() {
		return nil // missing is fine (created); other errors surface at MkdirAll
	}
	return fmt.Errorf("--data-dir %s is a file, not a directory: give a directory (rlserver creates it if missing, and keeps %s in it), or move the file away",
		dir, snapshot.FileName)
}

// checkWritable creates and removes a file in dir: the lock file may exist
// already while the directory itself is read-only, and a snapshot is saved
// by creating a file there.
func checkWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".rlserver-write-check-*")
	if err != nil {
		return err
	}
	name := f.Name()
	_, err = f.Write([]byte{0})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	return err
}

func notWritable(dir string, err error) error {
	hint := ""
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS) {
		hint = fmt.Sprintf(" (this process runs as uid %d: make the directory writable for it, e.g. chown %d, or mount it read-write)", os.Getuid(), os.Getuid())
	}
	return fmt.Errorf("--data-dir %s is not writable, so no snapshot could be saved: %w%s", dir, err, hint)
}

// writePid records this process in the lock file, for the message another
// server prints when it finds the directory taken.
func (d *dataDir) writePid() error {
	if err := d.lock.Truncate(0); err != nil {
		return err
	}
	_, err := d.lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// holder names the process holding the lock file, as well as it can.
func holder(lockPath string) string {
	b, err := os.ReadFile(lockPath)
	if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
		return "pid " + strconv.Itoa(pid)
	}
	return "pid unknown"
}

// Release unlocks the directory. The lock file stays: removing it would let
// a server starting meanwhile lock a file that is no longer the one in the
// directory. It unlocks before closing: a flock lasts while any copy of the
// descriptor is open, and a child process forked at that moment holds one
// until its exec.
func (d *dataDir) Release() {
	if d != nil && d.lock != nil {
		unix.Flock(int(d.lock.Fd()), unix.LOCK_UN)
		d.lock.Close()
		d.lock = nil
	}
}
