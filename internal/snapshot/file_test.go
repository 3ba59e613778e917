package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

// TestStaleTempFilesAreRemoved: the temporary files of saves a crash
// interrupted are removed at start and after the next good save; nothing
// else in the directory is touched.
func TestStaleTempFilesAreRemoved(t *testing.T) {
	w, _ := populate(t)
	dir := t.TempDir()
	stale := func(name string) string {
		path := filepath.Join(dir, name)
		writeFile(t, path, bytes.Repeat([]byte("x"), 1000))
		return path
	}
	a, b := stale("rlserver.snap.tmp-123"), stale("rlserver.snap.tmp-456")
	other := stale("notes.txt")
	m := w.manager(t, dir)
	for _, p := range []string{a, b} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s survived the start: %v", p, err)
		}
	}
	c := stale("rlserver.snap.tmp-789") // a crash after start
	if err := m.Save(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s survived a save: %v", c, err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[0] != "notes.txt" || names[1] != FileName {
		t.Fatalf("directory holds %v", names)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCheckSizes(t *testing.T) {
	if err := CheckSizes(keyspace.DefaultMaxKeySize, keyspace.DefaultMaxValueSize); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	if err := CheckSizes(1<<20, 62<<20); err != nil {
		t.Fatalf("62 MiB values and 1 MiB keys fit a 64 MiB record: %v", err)
	}
	if err := CheckSizes(64<<10, 64<<20); err == nil || !strings.Contains(err.Error(), "--max-value-size") {
		t.Fatalf("64 MiB values: %v", err)
	}
	if err := CheckSizes(64<<20, 1); err == nil {
		t.Fatal("64 MiB keys fit?")
	}
	w, _ := populate(t)
	if _, err := NewManager(Config{Dir: t.TempDir(), Rules: w.store, Keys: keyspace.New(keyspace.Config{Shards: 1, Clock: w.clock.now,
		Rules: w.store, MaxValueSize: 100 << 20})}); err == nil {
		t.Fatal("a manager for a keyspace holding values no snapshot can save")
	}
}

// TestLargestEntriesSave: keys and values at the largest size the limits
// allow save and load, wherever they fall in a record (issue 11: one 70 MB
// value made every later snapshot fail).
func TestLargestEntriesSave(t *testing.T) {
	const maxKey, maxValue = 1 << 20, 62 << 20
	if err := CheckSizes(maxKey, maxValue); err != nil {
		t.Fatal(err)
	}
	st, _ := rules.NewStore([]rules.Def{def(t, "log", "sliding_log", "100000", "1h", "")})
	clk := &fakeClock{}
	clk.ns.Store(t0)
	keys := keyspace.New(keyspace.Config{Shards: 2, Clock: clk.now, Rules: st, MaxKeySize: maxKey, MaxValueSize: maxValue})
	t.Cleanup(keys.Stop)
	w := &world{st, keys, clk}
	set := func(key string, value []byte) {
		t.Helper()
		if err := w.setPlain(key, value, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2000 { // small keys first, so the big ones land after them
		set(fmt.Sprint("small:", i), []byte("v"))
	}
	huge := bytes.Repeat([]byte("v"), maxValue)
	bigKey := strings.Repeat("k", maxKey)
	set(bigKey, huge)
	if op := w.op(keyspace.Allow, "log", bigKey, 100000); op.Err != nil || !op.Decision.Allowed {
		t.Fatalf("a full log under the largest key: %+v", op)
	}
	dir := t.TempDir()
	if err := w.manager(t, dir).Save(); err != nil {
		t.Fatal(err)
	}
	snap, err := ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Plain) != 2001 || len(snap.Keys) != 1 || len(snap.Keys[0].State.Log) != 100000 {
		t.Fatalf("%d plain keys, %d limiter keys", len(snap.Plain), len(snap.Keys))
	}
	for _, p := range snap.Plain {
		if p.Key == bigKey && !bytes.Equal(p.Value, huge) {
			t.Fatal("the largest value changed")
		}
	}
}

// TestInvalidStateIsLeftOut: the encoder writes no state the decoder would
// refuse; the save leaves it out and says so, instead of writing a file
// that would refuse to load.
func TestInvalidStateIsLeftOut(t *testing.T) {
	d := def(t, "tb", "token_bucket", "10", "1h", "")
	var buf bytes.Buffer
	enc := newEncoder(&buf, t0, "test", []Rule{d})
	if err := enc.addKey(0, "bad", &algorithms.State{Stamp: t0, Count: algorithms.MaxLimit + 1}); err == nil {
		t.Fatal("an invalid state was encoded")
	}
	if err := enc.addKey(0, "good", &algorithms.State{Stamp: t0, Count: 3, Aux: 1}); err != nil {
		t.Fatal(err)
	}
	if err := enc.finish(); err != nil {
		t.Fatal(err)
	}
	snap, err := Decode(buf.Bytes())
	if err != nil || len(snap.Keys) != 1 || snap.Keys[0].Key != "good" {
		t.Fatalf("%v %+v", err, snap)
	}
}
