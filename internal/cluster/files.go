package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// NewNodeID returns a random node id: 40 lower-case hex digits (160
// random bits), as Redis makes its node ids.
func NewNodeID() string {
	var b [20]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return short)
	return hex.EncodeToString(b[:])
}

// LoadOrCreateNodeID returns the node id stored in the file at path,
// creating the file with a new id if it does not exist. A node keeps its
// id across restarts this way, so a map naming it stays valid (the id is
// what a node looks for in a map). The file holds the id and a newline;
// anything else in it is an error, never silently replaced.
func LoadOrCreateNodeID(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if !validID(id) {
			return "", fmt.Errorf("%s: %q is not a node id (40 lower-case hex digits)", path, clip([]byte(id)))
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	id := NewNodeID()
	if err := writeFileAtomic(path, []byte(id+"\n")); err != nil {
		return "", err
	}
	return id, nil
}

// ReadMapFile reads and validates the map in the file at path
// (--cluster-config), refusing a file larger than MaxMapBytes before
// reading it whole.
func ReadMapFile(path string) (*Map, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxMapBytes+1))
	if err != nil {
		return nil, err
	}
	m, err := ParseMap(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// NewestMapFile reads the maps in paths that exist and returns the one
// with the highest version, or nil if none exists: at start a node takes
// the newer of --cluster-config and the map it saved when one was last
// pushed. A file that exists but holds no valid map is an error, not
// skipped.
func NewestMapFile(paths ...string) (*Map, error) {
	var newest *Map
	for _, p := range paths {
		m, err := ReadMapFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if newest == nil || m.Version() > newest.Version() {
			newest = m
		}
	}
	return newest, nil
}

// WriteMapFile writes m's canonical JSON to path atomically (a temporary
// file, synced, renamed over path, the directory synced), so that a node
// that saves each pushed map finds a whole map, old or new, after a crash.
func WriteMapFile(path string, m *Map) error {
	b, err := m.MarshalJSON()
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'))
}

func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
