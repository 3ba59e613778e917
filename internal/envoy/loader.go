package envoy

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/rlserver/rlserver/internal/envoy/config"
)

// LoaderOptions configure a Loader.
type LoaderOptions struct {
	// Config changes how files are read (config.Options).
	Config config.Options
	// Debounce is the quiet time after a file system event before the
	// files are re-read (default 100 ms): one editor save or one
	// ConfigMap update is several events. A burst of events longer than 20
	// debounce periods still reloads at least that often.
	Debounce time.Duration
	// Logger receives every load's outcome; nil uses the Service's.
	Logger *slog.Logger
}

// DefaultDebounce is LoaderOptions.Debounce's default.
const DefaultDebounce = 100 * time.Millisecond

// Loader reads the configuration at a path (a file, or a directory of
// files; see config.Load) into a Service: on Reload (SIGHUP), and, once
// Watch is called, whenever the files change. A configuration that fails to
// read or validate is logged with the reason and counted, and the one in
// force stays.
//
// Watching follows how files get replaced. It watches directories, never
// files: the directory of a single file (an editor or `kubectl cp`
// replaces the file, which ends a watch on the file itself), every
// directory of a configuration directory, and the directories the files'
// symbolic links point into. A Kubernetes ConfigMap volume updates by
// writing a new ..<timestamp> directory and renaming the ..data symlink
// over the old one; both show up as events in the volume's directory. Any
// event schedules a re-read of everything after Debounce; a re-read whose
// bytes equal the configuration in force publishes nothing. After each
// load the set of watched directories is recomputed.
type Loader struct {
	path string
	svc  *Service
	opts LoaderOptions
	log  *slog.Logger

	mu      sync.Mutex // serialises loads; guards the fields below
	digest  [sha256.Size]byte
	loaded  bool
	lastErr error

	watcher *fsnotify.Watcher
	watched map[string]bool // guarded by mu
	stop    chan struct{}
	done    chan struct{}

	// onLoad, when set (tests), is sent every load's outcome from the
	// watcher's goroutine.
	onLoad chan<- error
}

// NewLoader returns a loader of path into svc. It reads nothing until
// Reload.
func NewLoader(path string, svc *Service, opts LoaderOptions) *Loader {
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	log := opts.Logger
	if log == nil {
		log = svc.log
	}
	return &Loader{path: path, svc: svc, opts: opts, log: log}
}

// Path returns the configuration's path.
func (l *Loader) Path() string { return l.path }

// Reload reads the configuration and publishes it, or logs and returns
// why not (the configuration in force then stays). Unchanged files publish
// nothing.
func (l *Loader) Reload() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.reload()
	l.lastErr = err
	if l.watcher != nil {
		l.rewatch()
	}
	return err
}

func (l *Loader) reload() error {
	files, err := config.ReadFiles(l.path)
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%d:%s%d:", len(f.Name), f.Name, len(f.Data))
		h.Write(f.Data)
	}
	var digest [sha256.Size]byte
	h.Sum(digest[:0])
	if err == nil && l.loaded && digest == l.digest {
		return nil
	}
	var cfg *config.Config
	if err == nil {
		cfg, err = config.Build(files, l.opts.Config)
	}
	if err == nil {
		for _, w := range cfg.Warnings {
			l.log.Warn("Envoy configuration: " + w)
		}
		err = l.svc.Apply(cfg) // counts its own failure
	} else {
		l.svc.loadFailed()
	}
	if err != nil {
		l.log.Error("Envoy configuration not loaded; keeping the current one", "path", l.path, "err", err)
		return err
	}
	l.digest, l.loaded = digest, true
	l.log.Info("Envoy configuration loaded", "path", l.path, "files", len(files), "domains", len(cfg.Domains), "rules", len(cfg.Defs))
	return nil
}

// LastError returns the last load's error (nil if it succeeded).
func (l *Loader) LastError() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

// Watch starts re-reading the configuration when its files change, until
// Stop.
func (l *Loader) Watch() error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching the Envoy configuration: %w", err)
	}
	l.mu.Lock()
	if l.watcher != nil {
		l.mu.Unlock()
		w.Close()
		return errors.New("the Envoy configuration is already watched")
	}
	l.watcher, l.watched = w, map[string]bool{}
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	l.rewatch()
	stop, done := l.stop, l.done
	l.mu.Unlock()
	go l.run(w, stop, done)
	return nil
}

// Stop stops watching and waits for the watcher to end. It is safe to call
// twice, and without Watch.
func (l *Loader) Stop() {
	l.mu.Lock()
	stop, done := l.stop, l.done
	l.stop, l.watcher = nil, nil // Reload stops re-watching
	l.mu.Unlock()
	if stop != nil {
		close(stop)
	}
	if done != nil {
		<-done
	}
}

func (l *Loader) run(w *fsnotify.Watcher, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	defer w.Close()
	var timer *time.Timer
	var fire <-chan time.Time
	var first time.Time // first event since the last load
	for {
		select {
		case <-stop:
			if timer != nil {
				timer.Stop()
			}
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			l.log.Debug("Envoy configuration: file event", "event", ev.String())
			now := time.Now()
			if fire == nil {
				first = now
			}
			// Debounce: wait for quiet, but not past 20 periods since
			// the first event.
			wait := min(l.opts.Debounce, max(0, first.Add(20*l.opts.Debounce).Sub(now)))
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			fire = timer.C
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			l.log.Warn("Envoy configuration: file watch error; reloading to be safe", "err", err)
			l.notify(l.Reload())
		case <-fire:
			fire = nil
			l.notify(l.Reload())
		}
	}
}

func (l *Loader) notify(err error) {
	if l.onLoad != nil {
		l.onLoad <- err
	}
}

// rewatch makes the watched directories those the configuration lives in
// now. The caller holds mu.
func (l *Loader) rewatch() {
	want := map[string]bool{}
	addTree := func(dir string) {
		want[dir] = true
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || p == dir {
				return nil
			}
			if filepath.Base(p)[0] == '.' {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if fi, err := os.Stat(p); err == nil && fi.IsDir() { // directories and links to them
				if len(want) < config.MaxFiles {
					want[p] = true
				}
			}
			return nil
		})
	}
	if fi, err := os.Stat(l.path); err == nil && fi.IsDir() {
		addTree(l.path)
	} else {
		want[filepath.Dir(l.path)] = true
	}
	if names, err := config.List(l.path); err == nil {
		for _, name := range names {
			if real, err := filepath.EvalSymlinks(name); err == nil {
				want[filepath.Dir(real)] = true
			}
		}
	}
	for dir := range l.watched {
		if !want[dir] {
			_ = l.watcher.Remove(dir) // fails when the directory is gone, which also ends its watch
			delete(l.watched, dir)
		}
	}
	for dir := range want {
		if l.watched[dir] {
			continue
		}
		if err := l.watcher.Add(dir); err != nil {
			l.log.Warn("Envoy configuration: cannot watch a directory; changes there need a reload (SIGHUP)", "dir", dir, "err", err)
			continue
		}
		l.watched[dir] = true
	}
}
