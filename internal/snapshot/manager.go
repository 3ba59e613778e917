package snapshot

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

// exportChunk is how many keys a shard encodes per message while a snapshot
// is taken: small enough that a shard is never busy with it for more than
// about a millisecond, so decisions queued behind it wait no longer.
const exportChunk = 512

// flushAt is the size at which a KEYS record is written out.
const flushAt = 1 << 20

// ErrInProgress is returned by BGSave (and Save) while another save runs.
// (The Redis protocol words it as Redis does: "Background save already in
// progress".)
var ErrInProgress = errors.New("a background save is already in progress")

// Config configures a Manager.
type Config struct {
	Dir           string // the data directory; created if missing
	Rules         *rules.Store
	Keys          *keyspace.Map
	Clock         func() int64 // ns since the epoch
	ServerVersion string
	Logger        *slog.Logger
	// Scripts returns the Lua script sources to save (nil: none).
	Scripts func() []string
}

// Status describes the last snapshot attempt.
type Status struct {
	LastOKUnix   int64 // unix seconds of the last good snapshot (0: none yet)
	LastDuration time.Duration
	LastOK       bool // whether the last attempt succeeded
	LastBytes    int64
	LastKeys     int
	// LastSkipped counts keys the last good snapshot left out because
	// their state was not valid (a bug: see algorithms.Valid); each is
	// logged.
	LastSkipped    int
	LastErr        error
	InProgress     bool
	ChangesAtStart uint64 // keyspace Changes when the last good snapshot began
}

// Manager takes snapshots of the live keyspace: on request (SAVE, BGSAVE),
// every Interval, and at shutdown. One snapshot is taken at a time. Its
// methods are safe for concurrent use.
type Manager struct {
	cfg  Config
	path string
	log  *slog.Logger

	busy   atomic.Bool // a save is running
	mu     sync.Mutex  // guards status
	status Status

	stop     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
	bg       sync.WaitGroup
}

// NewManager returns a Manager writing Dir/FileName. It creates Dir, and
// removes the temporary files of saves a crash interrupted. It refuses a
// keyspace whose key and value size limits would let it hold a key no
// snapshot could save (see CheckSizes).
func NewManager(cfg Config) (*Manager, error) {
	if err := CheckSizes(cfg.Keys.MaxSizes()); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Manager{cfg: cfg, path: filepath.Join(cfg.Dir, FileName), log: cfg.Logger}
	m.removeStaleTemps()
	if fi, err := os.Stat(m.path); err == nil {
		m.status.LastOKUnix = fi.ModTime().Unix()
		m.status.LastOK = true
	}
	return m, nil
}

// Path returns the snapshot file's path.
func (m *Manager) Path() string { return m.path }

// Status returns the last attempt's outcome.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.status
	st.InProgress = m.busy.Load()
	return st
}

// Save takes a snapshot now and returns when it is on disk.
func (m *Manager) Save() error {
	if !m.busy.CompareAndSwap(false, true) {
		return ErrInProgress
	}
	defer m.busy.Store(false)
	return m.save()
}

// BGSave starts a snapshot in the background; it fails only if one is
// already running.
func (m *Manager) BGSave() error {
	if !m.busy.CompareAndSwap(false, true) {
		return ErrInProgress
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		defer m.busy.Store(false)
		m.save() // the outcome is in Status and the log
	}()
	return nil
}

// Start snapshots every interval until Stop; interval 0 starts nothing.
func (m *Manager) Start(interval time.Duration) {
	m.stop, m.stopped = make(chan struct{}), make(chan struct{})
	if interval <= 0 {
		close(m.stopped)
		return
	}
	go func() {
		defer close(m.stopped)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				if err := m.Save(); err != nil && !errors.Is(err, ErrInProgress) {
					m.log.Error("periodic snapshot failed", "path", m.path, "err", err)
				}
			}
		}
	}()
}

// Stop ends the periodic snapshots and waits for any background save. It is
// safe to call twice, and without Start.
func (m *Manager) Stop() {
	m.stopOnce.Do(func() {
		if m.stop != nil {
			close(m.stop)
			<-m.stopped
		}
	})
	m.bg.Wait()
}

func (m *Manager) save() error {
	start := time.Now()
	changes := m.cfg.Keys.Stats().Changes
	bytes, keys, skipped, err := m.write()
	dur := time.Since(start)
	m.mu.Lock()
	m.status.LastDuration, m.status.LastOK, m.status.LastErr = dur, err == nil, err
	if err == nil {
		m.status.LastOKUnix = time.Now().Unix()
		m.status.LastBytes, m.status.LastKeys, m.status.LastSkipped = bytes, keys, skipped
		m.status.ChangesAtStart = changes
	}
	m.mu.Unlock()
	if err != nil {
		m.log.Error("snapshot failed", "path", m.path, "err", err)
		return fmt.Errorf("snapshot %s: %w", m.path, err)
	}
	m.removeStaleTemps()
	m.log.Debug("snapshot written", "path", m.path, "keys", keys, "bytes", bytes, "duration", dur)
	return nil
}

// removeStaleTemps removes what saves a crash interrupted left behind. It
// runs only while no save is running (at start, and at the end of a save,
// which holds busy), so it never removes a file being written.
func (m *Manager) removeStaleTemps() {
	n, size, err := removeStaleTemps(m.cfg.Dir)
	if err != nil {
		m.log.Warn("cannot remove the temporary files of interrupted snapshots", "dir", m.cfg.Dir, "err", err)
	}
	if n > 0 {
		m.log.Info("removed the temporary files of interrupted snapshots", "dir", m.cfg.Dir, "files", n, "bytes", size)
	}
}

// write encodes the rule set as it is now and every key, shard by shard.
// A key whose shard still holds it under an older revision of its rule is
// rescaled to the saved revision as it is encoded, so every key is saved
// with the numbers of the rule saved beside it.
func (m *Manager) write() (bytes int64, keys, skipped int, err error) {
	set := m.cfg.Rules.Load()
	var saved []Rule
	index := map[uint64]int{}  // rule ID -> position in saved
	byName := map[string]int{} // rule name -> position in saved
	for _, r := range set.Rules() {
		index[r.ID] = len(saved)
		byName[r.Name] = len(saved)
		saved = append(saved, r.Def)
	}
	now := m.cfg.Clock()
	err = writeAtomic(m.path, func(w *bufio.Writer) error {
		enc := newEncoder(w, now, m.cfg.ServerVersion, saved)
		if m.cfg.Scripts != nil {
			enc.addScripts(m.cfg.Scripts())
		}
		var unsaveable error // a value of a kind the format cannot hold: a bug, never silently dropped
		emit := func(x keyspace.Exported) {
			if x.Rule == nil {
				if str, ok := x.Value.(*keyspace.String); ok {
					enc.addPlain(x.Key, str.B, x.ExpireAt)
				} else if !enc.addTyped(x.Key, x.Value, x.ExpireAt) {
					unsaveable = fmt.Errorf("plain key %q holds a %T, which the snapshot format cannot save", x.Key, x.Value)
				}
				return
			}
			i, ok := index[x.Rule.ID]
			if !ok {
				return // the rule was deleted (or replaced) after the set was taken
			}
			s := x.State
			if live := set.ByID(x.Rule.ID); live.Rev != x.Rule.Rev {
				rescaled := algorithms.Rescale(x.Rule.Params, live.Params, *x.State, now)
				s = &rescaled
			}
			if err := enc.addKey(i, x.Key, s); err != nil {
				// Writing it would make the whole file unreadable; leaving
				// it out loses one key's budget. Neither should happen:
				// every state the keyspace holds is valid.
				if skipped++; skipped == 1 {
					m.log.Error("snapshot: key left out, its state is invalid", "rule", x.Rule.Name, "key", x.Key, "err", err)
				}
			}
		}
		flush := func() error {
			if enc.pending() >= flushAt {
				enc.flushKeys()
			}
			// Let queued decisions run before asking for the next chunk,
			// rather than holding a processor for a whole time slice.
			runtime.Gosched()
			if unsaveable != nil {
				return unsaveable
			}
			return enc.err
		}
		if err := m.cfg.Keys.Export(exportChunk, emit, flush); err != nil {
			return err
		}
		if skipped > 1 {
			m.log.Error("snapshot: keys left out, their state is invalid", "keys", skipped)
		}
		enc.addOverrides(byName, m.cfg.Keys.Overrides(nil))
		err := enc.finish()
		bytes, keys = enc.bytes, enc.keys
		return err
	})
	return bytes, keys, skipped, err
}
