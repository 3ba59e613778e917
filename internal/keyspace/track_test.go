package keyspace

import (
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rlserver/rlserver/internal/rules"
)

// trackFixture is a keyspace of 4 shards under two rules at a fixed
// instant, tracking the keys that start with "m:".
func trackFixture(t *testing.T) (*Map, *Dispatcher, *rules.Rule, *rules.Rule, int64) {
	t.Helper()
	now := int64(1_700_000_000_000_000_000)
	st, err := rules.NewStore([]rules.Def{
		rules.MustParseDef("r", "fixed_window", "5", "1h", ""),
		rules.MustParseDef("b", "token_bucket", "10", "1m", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	m := New(Config{Shards: 4, Clock: func() int64 { return now }, Rules: st})
	t.Cleanup(m.Stop)
	return m, m.NewDispatcher(), st.Load().Get([]byte("r")), st.Load().Get([]byte("b")), now
}

func applyOp(t *testing.T, d *Dispatcher, op Op) {
	t.Helper()
	d.Apply(&op)
	if op.Err != nil {
		t.Fatal(op.Err)
	}
}

func runTask(t *testing.T, d *Dispatcher, key string, fn func(db *DB, k []byte)) {
	t.Helper()
	k := []byte(key)
	if err := d.Do([][]byte{k}, TaskFunc(func(db *DB) { fn(db, k) })); err != nil {
		t.Fatal(err)
	}
}

// TestTrackRecordsWrites: from Track on, every kind of write to a
// matching key is recorded once, reads and non-matching keys are not, a
// flush is reported as such, and Untrack stops the record.
func TestTrackRecordsWrites(t *testing.T) {
	m, d, r, b, now := trackFixture(t)
	applyOp(t, d, Op{Kind: Allow, Rule: r, Key: []byte("m:before"), Cost: 1}) // before Track: not recorded
	runTask(t, d, "m:del", func(db *DB, k []byte) { db.SetString(k, []byte("v")) })
	runTask(t, d, "m:ttl", func(db *DB, k []byte) { db.SetString(k, []byte("v")) })
	m.Track(func(key []byte) bool { return strings.HasPrefix(string(key), "m:") })

	applyOp(t, d, Op{Kind: Allow, Rule: r, Key: []byte("m:allow"), Cost: 1})
	applyOp(t, d, Op{Kind: Allow, Rule: b, Key: []byte("m:allow"), Cost: 1}) // same name, another rule (shard)
	applyOp(t, d, Op{Kind: Allow, Rule: r, Key: []byte("x:other"), Cost: 1})
	applyOp(t, d, Op{Kind: Peek, Rule: r, Key: []byte("m:peek"), Cost: 1})
	applyOp(t, d, Op{Kind: Reset, Rule: r, Key: []byte("m:before")})
	applyOp(t, d, Op{Kind: SetOverride, Rule: r, Key: []byte("m:ovr"),
		Override: &Override{Def: rules.MustParseDef("r", "fixed_window", "50", "1h", ""), ExpireAt: now + 1e12}})
	runTask(t, d, "m:set", func(db *DB, k []byte) { db.SetString(k, []byte("v")) })
	runTask(t, d, "m:del", func(db *DB, k []byte) { db.Delete(k) })
	runTask(t, d, "m:ttl", func(db *DB, k []byte) { db.SetExpiry(k, now+1e9) })
	runTask(t, d, "m:get", func(db *DB, k []byte) { db.Get(k) })

	keys, all := m.Dirty()
	slices.Sort(keys)
	want := []string{"m:allow", "m:before", "m:del", "m:ovr", "m:set", "m:ttl"}
	if !slices.Equal(keys, want) || all {
		t.Fatalf("Dirty() = %q, %v; want %q, false", keys, all, want)
	}
	if keys, all := m.Dirty(); len(keys) != 0 || all {
		t.Fatalf("second Dirty() = %q, %v; want a new, empty record", keys, all)
	}
	d.Flush()
	if _, all := m.Dirty(); !all {
		t.Fatal("Dirty() after a flush: all = false")
	}
	m.Untrack()
	applyOp(t, d, Op{Kind: Allow, Rule: r, Key: []byte("m:late"), Cost: 1})
	if keys, all := m.Dirty(); len(keys) != 0 || all {
		t.Fatalf("Dirty() after Untrack = %q, %v", keys, all)
	}
}

// TestExportNamedAndForget: ExportNamed hands over every state a name has
// (plain value, each rule's state, its override) and nothing of other
// names; Forget drops all of it, ForgetMatching all of the matching names.
func TestExportNamedAndForget(t *testing.T) {
	m, d, r, b, now := trackFixture(t)
	applyOp(t, d, Op{Kind: Allow, Rule: r, Key: []byte("k"), Cost: 2})
	applyOp(t, d, Op{Kind: Allow, Rule: b, Key: []byte("k"), Cost: 3})
	applyOp(t, d, Op{Kind: SetOverride, Rule: r, Key: []byte("k"),
		Override: &Override{Def: rules.MustParseDef("r", "fixed_window", "50", "1h", ""), ExpireAt: now + 1e12}})
	runTask(t, d, "k", func(db *DB, k []byte) { db.SetString(k, []byte("v")) })
	applyOp(t, d, Op{Kind: Allow, Rule: r, Key: []byte("other"), Cost: 1})

	export := func(names ...string) []string {
		var got []string
		m.ExportNamed(names, func(x Exported) {
			switch {
			case x.Rule == nil:
				got = append(got, x.Key+" plain "+string(x.Value.(*String).B))
			default:
				got = append(got, x.Key+" "+x.Rule.Name+" count "+strconv.FormatInt(x.State.Count, 10))
			}
		}, func(o Override) {
			got = append(got, o.Key+" override "+o.Def.Name+" "+strconv.FormatInt(o.Def.Limit, 10))
		})
		slices.Sort(got)
		return got
	}
	want := []string{"k b count 3", "k override r 50", "k plain v", "k r count 2"}
	if got := export("k", "missing"); !slices.Equal(got, want) {
		t.Fatalf("ExportNamed = %q, want %q", got, want)
	}
	m.Forget([]string{"k"})
	if got := export("k"); len(got) != 0 {
		t.Fatalf("after Forget: %q", got)
	}
	if got := m.Overrides(nil); len(got) != 0 {
		t.Fatalf("after Forget, overrides %v", got)
	}
	m.ForgetMatching(func(k string) bool { return k == "other" })
	if st := m.Stats(); st.Keys != 0 {
		t.Fatalf("after ForgetMatching: %d keys left", st.Keys)
	}
}

// TestConcurrentExports: two exports at once (a snapshot being saved while
// slots are handed over) each visit every key: a shard's scan is one
// export's at a time.
func TestConcurrentExports(t *testing.T) {
	m, d, r, _, _ := trackFixture(t)
	const n = 4000
	for i := range n {
		d.Add(Op{Kind: Allow, Rule: r, Key: []byte("k" + strconv.Itoa(i)), Cost: 1})
	}
	d.Run()
	counts := make([]int, 2)
	var wg sync.WaitGroup
	for i := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Export(16, func(Exported) { counts[i]++ }, func() error { runtime.Gosched(); return nil })
		}()
	}
	wg.Wait()
	if counts[0] != n || counts[1] != n {
		t.Fatalf("two exports at once visited %v keys, want %d each", counts, n)
	}
}
