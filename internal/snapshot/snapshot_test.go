package snapshot

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/v3.snap, the current version's golden file (only when deliberately changing what it holds)")

const (
	sec = int64(1e9)
	t0  = int64(1_704_067_200) * sec // aligned to every window used here
)

type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() int64 { return c.ns.Load() }

var algs = []string{"token_bucket", "leaky_bucket", "fixed_window", "sliding_log", "sliding_counter"}

// def is a rule definition for tests.
func def(_ testing.TB, name, alg, limit, window, burst string) rules.Def {
	return rules.MustParseDef(name, alg, limit, window, burst)
}

// world is a rule store and keyspace under a fake clock.
type world struct {
	store *rules.Store
	keys  *keyspace.Map
	clock *fakeClock
}

func newWorld(t testing.TB, defs []rules.Def) *world {
	t.Helper()
	st, err := rules.NewStore(defs)
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{}
	clk.ns.Store(t0)
	m := keyspace.New(keyspace.Config{Shards: 4, Clock: clk.now, Rules: st})
	t.Cleanup(m.Stop)
	return &world{st, m, clk}
}

func (w *world) op(kind keyspace.OpKind, rule, key string, cost int64) keyspace.Op {
	d := w.keys.NewDispatcher()
	tk := d.Add(keyspace.Op{Kind: kind, Rule: w.store.Load().Get([]byte(rule)), Key: []byte(key), Cost: cost})
	d.Run()
	return *d.Op(tk)
}

func (w *world) manager(t testing.TB, dir string) *Manager {
	t.Helper()
	m, err := NewManager(Config{Dir: dir, Rules: w.store, Keys: w.keys, Clock: w.clock.now, ServerVersion: "test",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

// populate spends on 40 keys per algorithm, in one-hour windows.
func populate(t testing.TB) (*world, []rules.Def) {
	var defs []rules.Def
	for _, a := range algs {
		defs = append(defs, def(t, a, a, "50", "1h", ""))
	}
	defs = append(defs, def(t, "burst", "token_bucket", "10", "1m", "25"))
	w := newWorld(t, defs)
	for i := range 400 {
		w.clock.ns.Add(sec)
		w.op(keyspace.Allow, algs[i%5], fmt.Sprint("key:", i%40), int64(1+i%4))
	}
	w.op(keyspace.Allow, "burst", "b", 20)
	return w, defs
}

// sameAnswers checks that every key answers alike in two worlds.
func sameAnswers(t *testing.T, a, b *world) {
	t.Helper()
	for _, alg := range algs {
		for i := range 40 {
			key := fmt.Sprint("key:", i)
			x, y := a.op(keyspace.Peek, alg, key, 1), b.op(keyspace.Peek, alg, key, 1)
			if x.Decision != y.Decision {
				t.Fatalf("%s %s: before %+v, restored %+v", alg, key, x.Decision, y.Decision)
			}
		}
	}
}

func TestRoundTripEveryAlgorithm(t *testing.T) {
	w, defs := populate(t)
	dir := t.TempDir()
	m := w.manager(t, dir)
	if err := m.Save(); err != nil {
		t.Fatal(err)
	}
	st := m.Status()
	if !st.LastOK || st.LastKeys != w.keys.Stats().Keys || st.LastBytes == 0 {
		t.Fatalf("status %+v, keyspace has %d keys", st, w.keys.Stats().Keys)
	}
	snap, err := ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Rules) != len(defs) || len(snap.Keys) != st.LastKeys || snap.Created != w.clock.now() {
		t.Fatalf("read back %d rules, %d keys", len(snap.Rules), len(snap.Keys))
	}
	restored := newWorld(t, MergeRules(snap.Rules, nil))
	restored.clock.ns.Store(w.clock.now())
	rs := mustRestore(t, snap, restored.store, restored.keys, restored.clock.now())
	if rs.Loaded != st.LastKeys || rs.Fresh != 0 || rs.Orphan != 0 {
		t.Fatalf("restore: %+v", rs)
	}
	sameAnswers(t, w, restored)
	if x, y := w.op(keyspace.Peek, "burst", "b", 1), restored.op(keyspace.Peek, "burst", "b", 1); x.Decision != y.Decision {
		t.Fatalf("burst rule: %+v vs %+v", x.Decision, y.Decision)
	}
}

func TestDowntimeCounts(t *testing.T) {
	w := newWorld(t, []rules.Def{def(t, "tb", "token_bucket", "10", "10s", ""), def(t, "fw", "fixed_window", "10", "1h", "")})
	w.op(keyspace.Allow, "tb", "a", 10) // empty: one token per second
	w.op(keyspace.Allow, "fw", "a", 4)
	w.op(keyspace.Allow, "tb", "gone", 1) // full again after a second
	dir := t.TempDir()
	if err := w.manager(t, dir).Save(); err != nil {
		t.Fatal(err)
	}
	snap, err := ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	r := newWorld(t, snap.Rules)
	r.clock.ns.Store(t0 + 3*sec) // three seconds of downtime
	rs := mustRestore(t, snap, r.store, r.keys, r.clock.now())
	if rs.Loaded != 2 || rs.Fresh != 1 {
		t.Fatalf("restore: %+v (the key full again during downtime should be dropped)", rs)
	}
	if op := r.op(keyspace.Peek, "tb", "a", 1); op.Decision.Remaining != 3 {
		t.Fatalf("token bucket after 3s down: %+v, want 3 refilled", op.Decision)
	}
	if op := r.op(keyspace.Peek, "fw", "a", 1); op.Decision.Remaining != 6 {
		t.Fatalf("fixed window: %+v", op.Decision)
	}
}

func TestRulesFileAppliedOverSnapshot(t *testing.T) {
	saved := []rules.Def{def(t, "api", "token_bucket", "10", "1m", ""), def(t, "runtime", "fixed_window", "5", "1m", ""),
		def(t, "old", "sliding_log", "5", "1m", "")}
	file := []rules.Def{def(t, "api", "token_bucket", "20", "1m", ""), def(t, "old", "fixed_window", "5", "1m", ""),
		def(t, "new", "leaky_bucket", "1", "1s", "")}
	got := MergeRules(saved, file)
	names := map[string]rules.Def{}
	for _, d := range got {
		names[d.Name] = d
	}
	if len(got) != 4 || names["api"].Limit != 20 || names["runtime"].Limit != 5 || names["old"].Algorithm != algorithms.FixedWindow {
		t.Fatalf("merged: %+v", got)
	}

	w := newWorld(t, saved)
	w.op(keyspace.Allow, "api", "k", 4)
	w.op(keyspace.Allow, "old", "k", 1)
	w.op(keyspace.Allow, "runtime", "k", 1)
	dir := t.TempDir()
	w.manager(t, dir).Save()
	snap, _ := ReadFile(filepath.Join(dir, FileName))
	r := newWorld(t, got)
	rs := mustRestore(t, snap, r.store, r.keys, t0)
	if rs.Loaded != 2 || rs.Orphan != 1 {
		t.Fatalf("restore: %+v ('old' changed algorithm: its key starts fresh)", rs)
	}
	if op := r.op(keyspace.Peek, "api", "k", 1); op.Decision.Remaining != 16 || op.Decision.Limit != 20 {
		t.Fatalf("api keeps its 4 spent under the file's new limit: %+v", op.Decision)
	}
}

// validSnapshot returns a snapshot holding records of every kind.
func validSnapshot(t testing.TB) []byte {
	w, _ := populate(t)
	populatePlain(w)
	populateTyped(t, w)
	dir := t.TempDir()
	if err := w.manager(t, dir).Save(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestEveryCorruptionIsDetected(t *testing.T) {
	data := validSnapshot(t)
	if _, err := Decode(data); err != nil {
		t.Fatal(err)
	}
	for i := range data {
		for _, flip := range []byte{0x01, 0x80, 0xFF} {
			bad := append([]byte(nil), data...)
			bad[i] ^= flip
			if v := binary.LittleEndian.Uint32(bad[8:12]); i >= 8 && i < 12 && v >= 1 && v < Version {
				// An older version the file's records also are (a v3 file
				// without SCRIPTS records is a v2 file): it reads the same.
				continue
			}
			if _, err := Decode(bad); err == nil {
				t.Fatalf("flipping byte %d by %#x went undetected", i, flip)
			}
		}
	}
	for n := range len(data) {
		if _, err := Decode(data[:n]); err == nil {
			t.Fatalf("truncation to %d bytes went undetected", n)
		}
	}
	if _, err := Decode(append(append([]byte(nil), data...), 0)); err == nil {
		t.Fatal("a trailing byte went undetected")
	}
	future := append([]byte(nil), data...)
	future[8] = 9
	if _, err := Decode(future); err == nil || !strings.Contains(err.Error(), "version 9 is not supported") {
		t.Fatalf("unknown version: %v", err)
	}
}

func TestReadFileNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	if snap, err := ReadFile(filepath.Join(dir, "none")); snap != nil || err != nil {
		t.Fatalf("missing file: %v %v", snap, err)
	}
	path := filepath.Join(dir, FileName)
	os.WriteFile(path, []byte(magic+"\x01\x00\x00\x00\x00\x00\x00\x00garbage"), 0o644)
	_, err := ReadFile(path)
	if err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt file: %v", err)
	}
}

func TestFailedWriteKeepsTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	os.WriteFile(path, []byte("old"), 0o644)
	err := writeAtomic(path, func(w *bufio.Writer) error {
		w.WriteString("half of a new snap")
		return errors.New("disk full")
	})
	if err == nil {
		t.Fatal("error lost")
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("old file replaced by %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temporary file left behind: %v", entries)
	}
}

func TestSaveIsExclusive(t *testing.T) {
	w, _ := populate(t)
	m := w.manager(t, t.TempDir())
	m.busy.Store(true) // a save in progress
	if err := m.BGSave(); !errors.Is(err, ErrInProgress) {
		t.Fatalf("BGSAVE during a save: %v", err)
	}
	if err := m.Save(); !errors.Is(err, ErrInProgress) {
		t.Fatalf("SAVE during a save: %v", err)
	}
	m.busy.Store(false)
	if err := m.BGSave(); err != nil {
		t.Fatal(err)
	}
	m.Stop() // waits for the background save
	if st := m.Status(); !st.LastOK || st.InProgress {
		t.Fatalf("after BGSAVE: %+v", st)
	}
}

// TestGoldenV1 reads a snapshot written by format version 1 and committed,
// so every later version of rlserver must still read it. Regenerate only
// with -update-golden, and only when changing what the file holds.
func TestGoldenV1(t *testing.T) {
	path := filepath.Join("testdata", "v1.snap")
	snap, err := ReadFile(path)
	if err != nil || snap == nil {
		t.Fatalf("golden snapshot: %v", err)
	}
	if len(snap.Rules) != 6 || snap.ServerVersion != "test" || snap.Version != 1 {
		t.Fatalf("rules %+v, version %q", snap.Rules, snap.ServerVersion)
	}
	perAlg := map[algorithms.Algorithm]int{}
	logEntries := 0
	for _, k := range snap.Keys {
		perAlg[snap.Rules[k.Rule].Algorithm]++
		logEntries += len(k.State.Log)
	}
	if len(snap.Keys) != 41 || len(perAlg) != 5 || logEntries == 0 {
		t.Fatalf("%d keys, per algorithm %v, %d log entries", len(snap.Keys), perAlg, logEntries)
	}
	// What it holds still answers as the world that wrote it does.
	want, _ := populate(t)
	r := newWorld(t, snap.Rules)
	r.clock.ns.Store(want.clock.now())
	mustRestore(t, snap, r.store, r.keys, r.clock.now())
	sameAnswers(t, want, r)
}

func FuzzDecode(f *testing.F) {
	for _, name := range []string{"v1.snap", "v2.snap", "v3.snap"} {
		if data, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(data)
			f.Add(data[:len(data)/2])
		}
	}
	f.Add([]byte(magic + "\x01\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		snap, err := Decode(data)
		if err == nil && snap == nil {
			t.Fatal("nil snapshot without an error")
		}
	})
}

// setPlain stores value under a plain key, expiring at the instant at (0:
// never), and returns the keyspace's error.
func (w *world) setPlain(key string, value []byte, at int64) error {
	var err error
	d := w.keys.NewDispatcher()
	d.AddTask([]byte(key), keyspace.TaskFunc(func(db *keyspace.DB) {
		if err = db.SetString([]byte(key), value); err == nil && at != 0 {
			db.SetExpiry([]byte(key), at)
		}
	}))
	d.Run()
	return err
}

// getPlain returns a plain key's value and expiry instant (0: none), and
// whether it exists.
func (w *world) getPlain(key string) (value string, at int64, ok bool) {
	d := w.keys.NewDispatcher()
	d.AddTask([]byte(key), keyspace.TaskFunc(func(db *keyspace.DB) {
		if v, _ := db.Get([]byte(key)).(*keyspace.String); v != nil {
			value, ok = string(v.B), true
			at, _ = db.Expiry([]byte(key))
		}
	}))
	d.Run()
	return value, at, ok
}

// populatePlain adds plain keys of every kind to w: with and without a TTL,
// counters and a CL.THROTTLE key (its arrival time, expiring then).
func populatePlain(w *world) {
	now := w.clock.now()
	w.setPlain("plain:forever", []byte("v1"), 0)
	w.setPlain("plain:minute", []byte("\x00binary\r\n"), now+60*sec)
	w.setPlain("plain:counter", []byte("41"), now+10*sec)
	w.setPlain("plain:cell", fmt.Appendf(nil, "%d", now+2*sec), now+2*sec)
}

func TestPlainKeysRoundTrip(t *testing.T) {
	w, _ := populate(t)
	populatePlain(w)
	dir := t.TempDir()
	if err := w.manager(t, dir).Save(); err != nil {
		t.Fatal(err)
	}
	snap, err := ReadFile(filepath.Join(dir, FileName))
	if err != nil || len(snap.Plain) != 4 || snap.Version != Version {
		t.Fatalf("%v, %+v", err, snap.Plain)
	}
	r := newWorld(t, snap.Rules)
	r.clock.ns.Store(w.clock.now() + 5*sec) // five seconds down
	rs := mustRestore(t, snap, r.store, r.keys, r.clock.now())
	// The CL.THROTTLE key expires at its TAT, 2 s after it was set.
	if rs.Plain != 3 || rs.Expired != 1 {
		t.Fatalf("restore: %+v", rs)
	}
	for _, key := range []string{"plain:forever", "plain:minute", "plain:counter"} {
		a, _, _ := w.getPlain(key)
		b, _, ok := r.getPlain(key)
		if a != b || !ok {
			t.Fatalf("%s: %q, restored %q", key, a, b)
		}
	}
	if _, at, _ := r.getPlain("plain:minute"); at-r.clock.now() != 55*sec {
		t.Fatalf("TTL after 5 s down: %d ns, want 55 s", at-r.clock.now())
	}
	// Ten more seconds and the counter's TTL has run out, even unread.
	r.clock.ns.Add(10 * sec)
	r.keys.Tick()
	if st := r.keys.Stats(); st.PlainKeys != 2 || st.ExpiredKeys != 1 {
		t.Fatalf("after expiry: %d plain keys, %d expired", st.PlainKeys, st.ExpiredKeys)
	}

	late := newWorld(t, snap.Rules)
	rs = mustRestore(t, snap, late.store, late.keys, w.clock.now()+120*sec)
	if rs.Plain != 1 || rs.Expired != 3 {
		t.Fatalf("after two minutes down: %+v (keys whose TTL ran out are not loaded)", rs)
	}
}

// TestGoldenV2 reads the committed version-2 snapshot (limiter state and
// plain keys), written by format version 2, so every later version of
// rlserver must still read it.
func TestGoldenV2(t *testing.T) {
	path := filepath.Join("testdata", "v2.snap")
	snap, err := ReadFile(path)
	if err != nil || snap == nil {
		t.Fatalf("golden snapshot: %v", err)
	}
	if snap.Version != 2 || len(snap.Keys) != 41 || len(snap.Plain) != 4 {
		t.Fatalf("version %d, %d keys, %d plain", snap.Version, len(snap.Keys), len(snap.Plain))
	}
	want, _ := populate(t)
	r := newWorld(t, snap.Rules)
	r.clock.ns.Store(want.clock.now())
	mustRestore(t, snap, r.store, r.keys, r.clock.now())
	sameAnswers(t, want, r)
	if got, _, _ := r.getPlain("plain:counter"); got != "41" {
		t.Fatalf("counter: %q", got)
	}
}

// mustRestore is Restore, failing the test on an error.
func mustRestore(t testing.TB, snap *Snapshot, store *rules.Store, keys *keyspace.Map, now int64) RestoreStats {
	t.Helper()
	rs, err := Restore(snap, store, keys, now)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
