//go:build unix

package snapshot

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSnapshotMustBeARegularFile: where the snapshot should be, anything
// but a readable regular file (or a symbolic link to one) is an error
// naming the path; a dangling link started the server empty, and a named
// pipe hung it.
func TestSnapshotMustBeARegularFile(t *testing.T) {
	good := filepath.Join(t.TempDir(), "good.snap")
	writeFile(t, good, validSnapshot(t))
	for _, tt := range []struct {
		name string
		make func(path string) error
		want string // "" for success
	}{
		{"a regular file", func(p string) error { return os.WriteFile(p, mustRead(t, good), 0o644) }, ""},
		{"a symbolic link to a regular file", func(p string) error { return os.Symlink(good, p) }, ""},
		{"a dangling symbolic link", func(p string) error { return os.Symlink(filepath.Join(filepath.Dir(p), "gone"), p) }, "which does not exist"},
		{"a named pipe", func(p string) error { return unix.Mkfifo(p, 0o644) }, "named pipe"},
		{"a directory", func(p string) error { return os.Mkdir(p, 0o755) }, "a directory"},
		{"a link to a named pipe", func(p string) error {
			fifo := p + ".fifo"
			if err := unix.Mkfifo(fifo, 0o644); err != nil {
				return err
			}
			return os.Symlink(fifo, p)
		}, "named pipe"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			if err := tt.make(path); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				f, err := Open(path)
				if f != nil {
					f.Close()
				}
				if err == nil && f == nil {
					err = errors.New("no file found")
				}
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Open blocked")
			}
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open: %v, want an error naming %s and saying %q", err, path, tt.want)
			}
			if _, err := ReadFile(path); err == nil {
				t.Fatal("ReadFile accepted it")
			}
		})
	}
	if f, err := Open(filepath.Join(t.TempDir(), FileName)); f != nil || err != nil {
		t.Fatalf("nothing there: %v %v, want no file and no error", f, err)
	}
}
