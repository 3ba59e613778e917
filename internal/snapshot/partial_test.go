package snapshot

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/values"
)

// moving is the test's moving slots: the keys starting with "m:".
func moving(key string) bool { return strings.HasPrefix(key, "m:") }

// transferDefs: a limiter rule whose state survives the test's seconds.
var transferDefs = []rules.Def{rules.MustParseDef("day", "token_bucket", "10", "24h", "")}

// dump lists what w holds for the moving keys: every state, value (with
// its expiry) and override, sorted.
func (w *world) dump(t *testing.T) []string {
	t.Helper()
	var out []string
	err := w.keys.Export(100, func(x keyspace.Exported) {
		if !moving(x.Key) {
			return
		}
		switch v := x.Value.(type) {
		case nil:
			out = append(out, fmt.Sprintf("%s %s %d/%d/%d", x.Key, x.Rule.Name, x.State.Stamp, x.State.Count, x.State.Aux))
		case *keyspace.String:
			out = append(out, fmt.Sprintf("%s = %q ex %d", x.Key, v.B, x.ExpireAt))
		case *values.Hash:
			out = append(out, fmt.Sprintf("%s hash %x ex %d", x.Key, v.AppendBinary(nil), x.ExpireAt))
		default:
			t.Errorf("unexpected value %T", v)
		}
	}, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range w.keys.Overrides(nil) {
		if moving(o.Key) {
			out = append(out, fmt.Sprintf("%s override %s %d until %d", o.Key, o.Def.Name, o.Def.Limit, o.ExpireAt))
		}
	}
	slices.Sort(out)
	return out
}

// setOverride gives key the limit under rule day until at.
func (w *world) setOverride(t *testing.T, key string, limit string, at int64) {
	t.Helper()
	d := w.keys.NewDispatcher()
	op := keyspace.Op{Kind: keyspace.SetOverride, Rule: w.store.Load().Get([]byte("day")), Key: []byte(key),
		Override: &keyspace.Override{Def: rules.MustParseDef("day", "token_bucket", limit, "24h", ""), ExpireAt: at}}
	d.Apply(&op)
	if op.Err != nil {
		t.Fatal(op.Err)
	}
}

// importInto decodes data and restores it into w, first dropping the
// moving keys w holds when first.
func importInto(t *testing.T, w *world, data []byte, first bool) {
	t.Helper()
	snap, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if first {
		w.keys.ForgetMatching(moving)
	}
	if _, err := Restore(snap, w.store, w.keys, w.clock.now()); err != nil {
		t.Fatal(err)
	}
}

// TestTransferBulkThenWritten: a slot move's two transfers — the bulk,
// read while the old owner keeps serving, then the keys written since —
// leave the new owner holding exactly what the old owner holds for the
// moving keys, whatever the writes in between were: spends, a string
// overwritten, a key deleted, a hash changed, an override set and another
// ended. What the new owner held in the slots before is dropped; its
// other keys stay.
func TestTransferBulkThenWritten(t *testing.T) {
	a, b := newWorld(t, transferDefs), newWorld(t, transferDefs)
	now := a.clock.now()
	hash := func(kv ...string) *values.Hash {
		h := values.NewHash()
		var pairs [][]byte
		for _, s := range kv {
			pairs = append(pairs, []byte(s))
		}
		mustDo(t)(h.Set(values.Limits{}, pairs))
		return h
	}
	a.op(keyspace.Allow, "day", "m:spent", 3)
	a.op(keyspace.Allow, "day", "m:later", 1)
	a.op(keyspace.Allow, "day", "m:ended", 2)
	a.setOverride(t, "m:ended", "20", now+3600*sec)
	mustDo(t)(nil, a.setPlain("m:s", []byte("v1"), now+60*sec))
	mustDo(t)(nil, a.setPlain("m:gone", []byte("x"), 0))
	mustDo(t)(nil, a.put("m:h", hash("f", "1"), 0))
	mustDo(t)(nil, b.setPlain("m:stale", []byte("from an earlier owner"), 0))
	mustDo(t)(nil, b.setPlain("x:keep", []byte("not moving"), 0))

	a.keys.Track(func(key []byte) bool { return moving(string(key)) })
	var bulk bytes.Buffer
	if _, err := EncodeKeys(&bulk, a.store, a.keys, moving, now, "test"); err != nil {
		t.Fatal(err)
	}
	importInto(t, b, bulk.Bytes(), true)

	// Writes after the bulk was read.
	a.op(keyspace.Allow, "day", "m:later", 4)
	a.op(keyspace.Allow, "day", "m:new", 5)
	a.op(keyspace.Allow, "day", "x:other", 1)
	a.setOverride(t, "m:ovr", "30", now+7200*sec)
	a.op(keyspace.Allow, "day", "m:ovr", 15) // above the rule's 10: only the override lets it
	d := a.keys.NewDispatcher()
	endOp := keyspace.Op{Kind: keyspace.DelOverride, Rule: a.store.Load().Get([]byte("day")), Key: []byte("m:ended")}
	d.Apply(&endOp)
	mustDo(t)(nil, a.setPlain("m:s", []byte("v2"), now+90*sec))
	mustDo(t)(nil, a.put("m:h", hash("f", "2", "g", "3"), 0))
	d.AddTask([]byte("m:gone"), keyspace.TaskFunc(func(db *keyspace.DB) { db.Delete([]byte("m:gone")) }))
	d.Run()

	written, all := a.keys.Dirty()
	slices.Sort(written)
	if want := []string{"m:ended", "m:gone", "m:h", "m:later", "m:new", "m:ovr", "m:s"}; !slices.Equal(written, want) || all {
		t.Fatalf("written %q (all %v), want %q", written, all, want)
	}
	var delta bytes.Buffer
	if _, err := EncodeNamed(&delta, a.store, a.keys, written, now, "test"); err != nil {
		t.Fatal(err)
	}
	importInto(t, b, delta.Bytes(), false)

	got, want := b.dump(t), a.dump(t)
	if !slices.Equal(got, want) {
		t.Errorf("the new owner holds\n\t%s\nthe old owner\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	if _, _, ok := b.getPlain("x:keep"); !ok {
		t.Error("the new owner lost a key outside the moving slots")
	}
}
