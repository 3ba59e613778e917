package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestScriptsRoundTrip saves Lua script sources beside the keys and reads
// them back, byte for byte, through both ways of reading a snapshot.
func TestScriptsRoundTrip(t *testing.T) {
	w, _ := populate(t)
	srcs := []string{"return 1", "return redis.call('get', KEYS[1])", "-- binary \x00\r\n", strings.Repeat("x", 70_000)}
	dir := t.TempDir()
	m := w.manager(t, dir)
	m.cfg.Scripts = func() []string { return srcs }
	if err := m.Save(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	snap, err := ReadFile(path)
	if err != nil || snap.Version != 3 || !slices.Equal(snap.Scripts, srcs) || len(snap.Keys) == 0 {
		t.Fatalf("%v: version %d, scripts %q", err, snap.Version, snap.Scripts)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := f.Scripts()
	if err != nil || !slices.Equal(got, srcs) {
		t.Fatalf("File.Scripts: %v, %q", err, got)
	}
}

// TestScriptsSplitIntoRecords checks that scripts too many for one record
// are spread over several, each under the record limit.
func TestScriptsSplitIntoRecords(t *testing.T) {
	var out bytes.Buffer
	e := newEncoder(&out, 1, "test", nil)
	big := strings.Repeat("y", maxEntries/3)
	e.addScripts([]string{big, big, big, big, "small"})
	if err := e.finish(); err != nil {
		t.Fatal(err)
	}
	if e.records != 2+2+1 { // META, RULES, two SCRIPTS, END
		t.Fatalf("%d records", e.records)
	}
	snap, err := Decode(out.Bytes())
	if err != nil || len(snap.Scripts) != 5 || snap.Scripts[4] != "small" {
		t.Fatalf("%v, %d scripts", err, len(snap.Scripts))
	}
}

// TestScriptsRecordRefusedBeforeV3: a SCRIPTS record in a file that says
// it is version 2 is corruption, as any record kind its version lacks.
func TestScriptsRecordRefusedBeforeV3(t *testing.T) {
	var out bytes.Buffer
	e := newEncoder(&out, 1, "test", nil)
	e.addScripts([]string{"return 1"})
	if err := e.finish(); err != nil {
		t.Fatal(err)
	}
	data := out.Bytes()
	binary.LittleEndian.PutUint32(data[8:], 2)
	if _, err := Decode(data); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("v2 with a SCRIPTS record: %v", err)
	}
}
