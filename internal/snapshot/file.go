package snapshot

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FileName is the snapshot's name inside the data directory.
const FileName = "rlserver.snap"

// tempPrefix begins the name of the temporary file a save writes before
// renaming it over FileName.
const tempPrefix = FileName + ".tmp-"

// writeAtomic writes a file at path so that a crash at any moment leaves
// either the previous file or the new one, whole: it writes a temporary file
// in the same directory, fsyncs it, renames it over path, and fsyncs the
// directory so the rename itself is durable. write gets a buffered writer.
func writeAtomic(path string, write func(*bufio.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// removeStaleTemps deletes the temporary files of saves that never
// finished (the process died between creating and renaming one) from dir,
// and returns how many it removed and their bytes. Call it only when no
// save is running: at start, and after a save has renamed its own.
func removeStaleTemps(dir string) (n int, size int64, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix) || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, size, err
		}
		n++
		size += info.Size()
	}
	return n, size, nil
}

// openSnapshot opens the snapshot at path for reading, or returns (nil,
// nil) when nothing is there. Anything there that is not a readable
// regular file, or a symbolic link to one, is an error naming path: a
// dangling link would otherwise start the server empty without a word, and
// a named pipe would block the start.
func openSnapshot(path string) (*os.File, int64, error) {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("snapshot %s: %w", path, err)
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(path)
		if info, err = os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, 0, fmt.Errorf("snapshot %s is a symbolic link to %s, which does not exist", path, target)
		} else if err != nil {
			return nil, 0, fmt.Errorf("snapshot %s (a symbolic link to %s): %w", path, target, err)
		}
	}
	if !info.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("snapshot %s is %s, not a regular file", path, fileKind(info.Mode()))
	}
	f, err := openNonBlocking(path)
	if err != nil {
		return nil, 0, fmt.Errorf("snapshot %s: %w", path, err)
	}
	// What was opened is what was checked, unless it was swapped between.
	if info, err = f.Stat(); err != nil || !info.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("it is %s, not a regular file", fileKind(info.Mode()))
		}
		return nil, 0, fmt.Errorf("snapshot %s: %w", path, err)
	}
	return f, info.Size(), nil
}

// fileKind names the type of file mode describes.
func fileKind(mode fs.FileMode) string {
	switch {
	case mode.IsDir():
		return "a directory"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeDevice != 0:
		return "a device"
	case mode&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "a special file (" + mode.Type().String() + ")"
}

// ReadFile loads the whole snapshot at path into memory. It returns (nil,
// nil) when there is no file; any other failure is an error naming the
// file. The server loads with Open and File.Restore instead, which stream.
func ReadFile(path string) (*Snapshot, error) {
	f, _, err := openSnapshot(path)
	if f == nil || err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", path, err)
	}
	snap, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", path, err)
	}
	return snap, nil
}

// File is a snapshot on disk, opened: its header and rules are read (to
// decide the rules to start with), and Restore then checks and loads its
// keys.
type File struct {
	Path          string
	Version       uint32 // the file's format version
	Created       int64  // unix ns
	ServerVersion string // of the rlserver that wrote it
	Rules         []Rule

	f    *os.File
	size int64
	// The file's reader and record buffer, reused by every pass.
	rd  *bufio.Reader
	buf []byte
}

// Open opens the snapshot at path and reads its header and rules. It
// returns (nil, nil) when there is no file; any other failure, including a
// corrupt header or rule, is an error naming the file. The rest of the file
// is checked by Restore, before it loads anything.
func Open(path string) (*File, error) {
	f, size, err := openSnapshot(path)
	if f == nil || err != nil {
		return nil, err
	}
	file := &File{Path: path, f: f, size: size, rd: bufio.NewReaderSize(f, readBuffer)}
	h, err := walk(file.rd, size, visitor{headerOnly: true, buf: &file.buf})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("snapshot %s: %w", path, err)
	}
	file.Version, file.Created, file.ServerVersion, file.Rules = h.version, h.created, h.serverVersion, h.rules
	return file, nil
}

// readBuffer is how much of the file is read at once while loading.
const readBuffer = 1 << 20

// Close releases the file. It is safe to call twice.
func (f *File) Close() error {
	if f.f == nil {
		return nil
	}
	err := f.f.Close()
	f.f, f.rd, f.buf = nil, nil, nil
	return err
}
