package snapshot

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/values"
)

// populateTyped adds a hash, a list and a sorted set to w, with and
// without a TTL, one of them expiring 2 s on.
func populateTyped(t testing.TB, w *world) {
	t.Helper()
	now := w.clock.now()
	h := values.NewHash()
	mustDo(t)(h.Set(values.Limits{}, [][]byte{[]byte("tokens"), []byte("9.5"), []byte("ts"), []byte("1704067200000"), []byte("\x00bin"), []byte("\r\n")}))
	l := values.NewList()
	mustDo(t)(l.PushLeft(values.Limits{}, []byte("1000"), []byte("1001"), []byte("")))
	z := values.NewZSet()
	mustDo(t)(z.Add(values.Limits{}, values.ZAddOptions{}, [][]byte{[]byte("1.5"), []byte("a"), []byte("-inf"), []byte("b"), []byte("1e300"), []byte("c")}))
	short := values.NewList()
	mustDo(t)(short.PushRight(values.Limits{}, []byte("gone soon")))
	for _, kv := range []struct {
		key string
		v   keyspace.Value
		at  int64
	}{{"typed:hash", h, 0}, {"typed:list", l, now + 60*sec}, {"typed:zset", z, now + 60*sec}, {"typed:short", short, now + 2*sec}} {
		if err := w.put(kv.key, kv.v, kv.at); err != nil {
			t.Fatal(err)
		}
	}
}

// mustDo fails the test if an operation's error is not nil.
func mustDo(t testing.TB) func(_ any, err error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// put stores v under key, expiring at at (0: never).
func (w *world) put(key string, v keyspace.Value, at int64) error {
	var err error
	d := w.keys.NewDispatcher()
	d.AddTask([]byte(key), keyspace.TaskFunc(func(db *keyspace.DB) {
		if err = db.Put([]byte(key), v); err == nil && at != 0 {
			db.SetExpiry([]byte(key), at)
		}
	}))
	d.Run()
	return err
}

// encoded returns key's value's encoding (nil for a missing key or a
// string), its type and its expiry.
func (w *world) encoded(key string) (enc []byte, typ string, at int64) {
	d := w.keys.NewDispatcher()
	d.AddTask([]byte(key), keyspace.TaskFunc(func(db *keyspace.DB) {
		switch v := db.Get([]byte(key)).(type) {
		case *values.Hash:
			enc, typ = v.AppendBinary(nil), "hash"
		case *values.List:
			enc, typ = v.AppendBinary(nil), "list"
		case *values.ZSet:
			enc, typ = v.AppendBinary(nil), "zset"
		}
		at, _ = db.Expiry([]byte(key))
	}))
	d.Run()
	return enc, typ, at
}

// TestTypedKeysRoundTrip: hashes, lists and sorted sets are saved in their
// records and restored equal, with their TTLs, by both restore paths (the
// streaming File.Restore and Restore of a decoded snapshot); a key whose
// TTL ran out while down is not loaded.
func TestTypedKeysRoundTrip(t *testing.T) {
	w, _ := populate(t)
	populatePlain(w)
	populateTyped(t, w)
	dir := t.TempDir()
	if err := w.manager(t, dir).Save(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	snap, err := ReadFile(path)
	if err != nil || len(snap.Typed) != 4 || len(snap.Plain) != 4 || snap.Version != 3 {
		t.Fatalf("%v: %d typed, %d plain keys, version %d", err, len(snap.Typed), len(snap.Plain), snap.Version)
	}
	streamed := newWorld(t, snap.Rules)
	streamed.clock.ns.Store(w.clock.now() + 5*sec)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs, err := f.Restore(streamed.store, streamed.keys, streamed.clock.now())
	if err != nil {
		t.Fatal(err)
	}
	decoded := newWorld(t, snap.Rules)
	decoded.clock.ns.Store(w.clock.now() + 5*sec)
	rs2 := mustRestore(t, snap, decoded.store, decoded.keys, decoded.clock.now())
	// Of 8 plain keys, the CL.THROTTLE key and typed:short expired.
	if rs.Plain != 6 || rs.Expired != 2 || rs2 != rs {
		t.Fatalf("restore: %+v, from the decoded snapshot %+v", rs, rs2)
	}
	for _, r := range []*world{streamed, decoded} {
		for _, key := range []string{"typed:hash", "typed:list", "typed:zset"} {
			want, wantType, wantAt := w.encoded(key)
			got, typ, at := r.encoded(key)
			if !bytes.Equal(got, want) || typ != wantType || at != wantAt || want == nil {
				t.Errorf("%s: %s %q expiring %d, restored %s %q expiring %d", key, wantType, want, wantAt, typ, got, at)
			}
		}
		if _, typ, _ := r.encoded("typed:short"); typ != "" {
			t.Errorf("typed:short, whose TTL ran out while down, was restored")
		}
	}
}

// TestTypedRecordsNeedVersion3: a version-2 file cannot hold typed
// records, and an empty value is refused (the keyspace never holds one).
func TestTypedRecordsNeedVersion3(t *testing.T) {
	data := validSnapshot(t)
	if _, err := Decode(data); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeValue(kindList, []byte{0}); err == nil {
		t.Error("an empty list decoded")
	}
	if _, err := decodeValue(kindHash, []byte{0}); err == nil {
		t.Error("an empty hash decoded")
	}
	if _, err := decodeValue(kindZSet, []byte{0}); err == nil {
		t.Error("an empty sorted set decoded")
	}
}

// TestGoldenV3 reads the committed version-3 snapshot (limiter state,
// plain keys, a hash, a list and sorted set). Regenerate only with
// -update-golden, and only when changing what the file holds.
func TestGoldenV3(t *testing.T) {
	path := filepath.Join("testdata", "v3.snap")
	if *updateGolden {
		w, _ := populate(t)
		populatePlain(w)
		populateTyped(t, w)
		dir := t.TempDir()
		if err := w.manager(t, dir).Save(); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(filepath.Join(dir, FileName))
		os.WriteFile(path, data, 0o644)
	}
	snap, err := ReadFile(path)
	if err != nil || snap == nil {
		t.Fatalf("golden snapshot: %v", err)
	}
	if snap.Version != 3 || len(snap.Keys) != 41 || len(snap.Plain) != 4 || len(snap.Typed) != 4 {
		t.Fatalf("version %d, %d keys, %d plain, %d typed", snap.Version, len(snap.Keys), len(snap.Plain), len(snap.Typed))
	}
	want, _ := populate(t)
	populateTyped(t, want)
	r := newWorld(t, snap.Rules)
	r.clock.ns.Store(want.clock.now())
	mustRestore(t, snap, r.store, r.keys, r.clock.now())
	sameAnswers(t, want, r)
	for _, key := range []string{"typed:hash", "typed:list", "typed:zset", "typed:short"} {
		a, at, wantAt := want.encoded(key)
		b, bt, gotAt := r.encoded(key)
		if !bytes.Equal(a, b) || at != bt || wantAt != gotAt {
			t.Errorf("%s: %s %q expiring %d, golden %s %q expiring %d", key, at, a, wantAt, bt, b, gotAt)
		}
	}
}
