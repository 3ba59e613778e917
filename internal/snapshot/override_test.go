package snapshot

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

// TestOverridesAreSaved: overrides survive a save and restore with their
// numbers, their expiry and their key's spent budget; one that expired while
// the server was down is not set again, and its key falls back to the rule
// with its budget kept.
func TestOverridesAreSaved(t *testing.T) {
	defs := []rules.Def{rules.MustParseDef("fw", "fixed_window", "3", "1h", ""), rules.MustParseDef("tb", "token_bucket", "10", "1h", "")}
	w := newWorld(t, defs)
	now := w.clock.now()
	set := func(rule, key, limit, window, burst string, ttl time.Duration) {
		t.Helper()
		def, err := rules.ParseDef(rule, w.store.Load().Get([]byte(rule)).Algorithm.String(), limit, window, burst)
		if err != nil {
			t.Fatal(err)
		}
		d := w.keys.NewDispatcher()
		op := keyspace.Op{Kind: keyspace.SetOverride, Rule: w.store.Load().Get([]byte(rule)), Key: []byte(key),
			Override: &keyspace.Override{Def: def, ExpireAt: now + int64(ttl)}}
		d.Apply(&op)
		if op.Err != nil {
			t.Fatal(op.Err)
		}
	}
	set("fw", "vip", "10", "1h", "", time.Hour)
	set("fw", "short", "10", "1h", "", time.Minute)
	set("tb", "vip", "100", "1h", "50", time.Hour)
	set("tb", "nostate", "5", "1h", "", time.Hour)
	for range 7 {
		w.op(keyspace.Allow, "fw", "vip", 1)
		w.op(keyspace.Allow, "fw", "short", 1)
	}
	w.op(keyspace.Allow, "tb", "vip", 40)
	dir := t.TempDir()
	if err := w.manager(t, dir).Save(); err != nil {
		t.Fatal(err)
	}
	snap, err := ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Overrides) != 4 {
		t.Fatalf("saved overrides: %+v", snap.Overrides)
	}
	r := newWorld(t, snap.Rules)
	r.clock.ns.Store(now + int64(2*time.Minute)) // two minutes down: "short" has expired
	rs := mustRestore(t, snap, r.store, r.keys, r.clock.now())
	if rs.Overrides != 3 {
		t.Fatalf("restore: %+v, want 3 overrides set again", rs)
	}
	if got := r.keys.Overrides(nil); len(got) != 3 || got[1].Key != "nostate" || got[1].ExpireAt != now+int64(time.Hour) {
		t.Fatalf("restored overrides: %+v", got)
	}
	for _, c := range []struct {
		rule, key        string
		limit, remaining int64
	}{
		{"fw", "vip", 10, 3},  // its override, 7 spent
		{"fw", "short", 3, 0}, // back to the rule, 7 spent
		{"tb", "vip", 50, 13}, // burst 50, 40 spent, then 2 minutes at 100/h refilled 3
		{"tb", "nostate", 5, 5},
	} {
		d := r.op(keyspace.Peek, c.rule, c.key, 1).Decision
		if d.Limit != c.limit || d.Remaining != c.remaining {
			t.Errorf("%s %s after restore: %+v, want limit %d, %d remaining", c.rule, c.key, d, c.limit, c.remaining)
		}
	}
}

// TestCorruptOverridesAreRefused: an override whose numbers are not valid
// for its rule, with no expiry, or naming no saved rule, is corruption; a
// good one decodes as written.
func TestCorruptOverridesAreRefused(t *testing.T) {
	h := &header{version: 3, rules: []Rule{rules.MustParseDef("fw", "fixed_window", "3", "1h", "")}}
	decode := func(o SavedOverride) (SavedOverride, error) {
		var got SavedOverride
		r := &reader{b: appendOverride([]byte{1}, o)}
		err := decodeOverrides(r, h, visitor{override: func(o SavedOverride) { got = o }})
		return got, err
	}
	good := SavedOverride{Rule: 0, Key: "k", Limit: 5, Window: int64(time.Hour), ExpireAt: 1}
	if got, err := decode(good); err != nil || got != good {
		t.Fatalf("good override: %+v, %v", got, err)
	}
	for _, o := range []SavedOverride{
		{Rule: 0, Key: "k", Limit: 0, Window: int64(time.Hour), ExpireAt: 1},
		{Rule: 0, Key: "k", Limit: 5, Window: int64(time.Hour), Burst: 3, ExpireAt: 1},
		{Rule: 0, Key: "k", Limit: 5, Window: int64(time.Hour), ExpireAt: 0},
		{Rule: 1, Key: "k", Limit: 5, Window: int64(time.Hour), ExpireAt: 1},
	} {
		if _, err := decode(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
