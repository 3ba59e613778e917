package config

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Bounds on what Load reads, so a mistaken path (a home directory, a log
// file) fails quickly instead of filling memory.
const (
	MaxFiles     = 1000
	MaxFileBytes = 16 << 20
	MaxDirDepth  = 8
)

// Load reads the configuration at path: one file, or every file in a
// directory and its subdirectories, in lexical order. Names starting with a
// dot are skipped, files and directories alike: a Kubernetes ConfigMap
// volume holds each file twice, once as name -> ..data/name and once
// inside the timestamped directory ..2024_…, and reading both would define
// every domain twice (envoyproxy/ratelimit needs RUNTIME_IGNOREDOTFILES=true
// for this). Symbolic links are followed. Files are read whatever their
// name, as envoyproxy/ratelimit reads them.
func Load(path string, opts Options) (*Config, error) {
	files, err := ReadFiles(path)
	if err != nil {
		return nil, err
	}
	return Build(files, opts)
}

// ReadFiles reads the files Load reads at path, each at most MaxFileBytes.
func ReadFiles(path string) ([]File, error) {
	names, err := List(path)
	if err != nil {
		return nil, err
	}
	files := make([]File, 0, len(names))
	for _, name := range names {
		data, err := readFile(name)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Name: name, Data: data})
	}
	return files, nil
}

// List returns the files Load reads at path.
func List(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("envoy config: %w", err)
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	var files []string
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		if depth > MaxDirDepth {
			return fmt.Errorf("envoy config %s: directories nested deeper than %d (a symbolic link loop?)", dir, MaxDirDepth)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("envoy config: %w", err)
		}
		for _, e := range entries { // sorted by name
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			name := filepath.Join(dir, e.Name())
			fi, err := os.Stat(name) // follows links
			if err != nil {
				return fmt.Errorf("envoy config: %w", err)
			}
			switch {
			case fi.IsDir():
				if err := walk(name, depth+1); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				if len(files) == MaxFiles {
					return fmt.Errorf("envoy config %s: more than %d files", path, MaxFiles)
				}
				files = append(files, name)
			}
		}
		return nil
	}
	if err := walk(path, 0); err != nil {
		return nil, err
	}
	return slices.Clip(files), nil
}

func readFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("envoy config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("envoy config: %w", err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("envoy config %s: larger than %d bytes", name, MaxFileBytes)
	}
	return data, nil
}
