package snapshot

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

// restart saves w, reads the file back and restores it into a new world
// whose rules are the snapshot's with file applied over them (as a restart
// with --rules does), at w's instant.
func restart(t *testing.T, w *world, file []rules.Def) *world {
	t.Helper()
	dir := t.TempDir()
	if err := w.manager(t, dir).Save(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := newWorld(t, MergeRules(f.Rules, file))
	r.clock.ns.Store(w.clock.now())
	if _, err := f.Restore(r.store, r.keys, r.clock.now()); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLoweredLimitSurvivesRestart is issue 11's repro: a limit lowered below
// what a key spent made the next start refuse the snapshot ("bucket state
// out of range", "log of 8 entries for a limit of 2").
func TestLoweredLimitSurvivesRestart(t *testing.T) {
	for _, alg := range algs {
		t.Run(alg, func(t *testing.T) {
			w := newWorld(t, []rules.Def{def(t, "x", alg, "10", "1h", "")})
			w.op(keyspace.Allow, "x", "k", 8)
			w.store.Put(def(t, "x", alg, "2", "1h", ""))
			w.keys.Reconcile()
			w.clock.ns.Add(sec)
			r := restart(t, w, nil)
			want, got := w.op(keyspace.Peek, "x", "k", 1), r.op(keyspace.Peek, "x", "k", 1)
			if got.Decision != want.Decision || got.Decision.Allowed {
				t.Fatalf("restored %+v, never restarted %+v (an over-spent key stays denied)", got.Decision, want.Decision)
			}
			// A restart whose rules file lowers the limit, then any save.
			w2 := newWorld(t, []rules.Def{def(t, "x", alg, "10", "1h", "")})
			w2.op(keyspace.Allow, "x", "k", 8)
			r2 := restart(t, restart(t, w2, []rules.Def{def(t, "x", alg, "2", "1h", "")}), nil)
			if d := r2.op(keyspace.Peek, "x", "k", 1).Decision; d.Allowed || d.Limit != 2 {
				t.Fatalf("after a restart with a lowered limit and another restart: %+v", d)
			}
		})
	}
}

// randomDef returns a valid rule named name: any algorithm, and limit,
// window and burst from small and large values, so successive calls raise
// and lower each.
func randomDef(rng *rand.Rand, name string) rules.Def {
	for {
		a := algorithms.Algorithm(1 + rng.IntN(5))
		d := rules.Def{Name: name, Algorithm: a,
			Limit:  []int64{1, 2, 3, 5, 8, 20, 100, 1_000_000}[rng.IntN(8)],
			Window: []time.Duration{time.Millisecond, 50 * time.Millisecond, time.Second, 10 * time.Second, time.Minute, time.Hour, 24 * time.Hour}[rng.IntN(7)]}
		if a.IsBucket() && rng.IntN(2) == 0 {
			d.Burst = []int64{1, 4, 30, 500}[rng.IntN(4)]
		}
		if d.Validate() == nil {
			return d
		}
	}
}

// TestRuleChangesSurviveRestart is the property issue 11 asks for: random
// rule changes — limit up and down, burst, window, algorithm, deletion —
// interleaved with decisions, with the server restarted from a snapshot at
// random points (sometimes with a rules file changing a rule at the
// restart), answer exactly as a server that never restarted and saw the
// same changes at the same instants.
func TestRuleChangesSurviveRestart(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	names := []string{"a", "b", "c"}
	keys := []string{"k1", "k2", "k3", "k4", "k5"}
	restarts := 0
	for iter := range 30 {
		var defs []rules.Def
		for _, n := range names {
			defs = append(defs, randomDef(rng, n))
		}
		steady, restarted := newWorld(t, defs), newWorld(t, defs)
		at := t0 + rng.Int64N(int64(time.Hour))
		for step := range 300 {
			at += []int64{0, int64(time.Millisecond), int64(37 * time.Millisecond), sec, 90 * sec, 3600 * sec}[rng.IntN(6)]
			steady.clock.ns.Store(at)
			restarted.clock.ns.Store(at)
			switch p := rng.IntN(100); {
			case p < 8: // a rule changes (or is deleted), as RL.RULE SET / DEL does
				name := names[rng.IntN(len(names))]
				del, d := rng.IntN(10) == 0, randomDef(rng, name)
				for _, w := range []*world{steady, restarted} {
					if del { // deleted and created again: its keys start fresh
						w.store.Delete(name)
						w.keys.Reconcile()
					}
					w.store.Put(d)
					w.keys.Reconcile()
				}
			case p < 12: // a restart, sometimes with a rules file changing a rule
				var file []rules.Def
				if rng.IntN(2) == 0 {
					d := randomDef(rng, names[rng.IntN(len(names))])
					file = []rules.Def{d}
					steady.store.Put(d)
					steady.keys.Reconcile()
				}
				restarted = restart(t, restarted, file)
				restarts++
			default: // a decision, or a peek
				kind := keyspace.Allow
				if rng.IntN(5) == 0 {
					kind = keyspace.Peek
				}
				name, key := names[rng.IntN(len(names))], keys[rng.IntN(len(keys))]
				rule := steady.store.Load().Get([]byte(name))
				if rule == nil {
					continue
				}
				cost := 1 + rng.Int64N(min(rule.Params.Capacity, 10))
				want, got := steady.op(kind, name, key, cost), restarted.op(kind, name, key, cost)
				if got.Decision != want.Decision || got.Err != want.Err {
					t.Fatalf("iter %d step %d: %s %s cost %d under %+v: restarted %+v %v, never restarted %+v %v",
						iter, step, name, key, cost, rule.Def, got.Decision, got.Err, want.Decision, want.Err)
				}
			}
		}
	}
	if restarts < 100 {
		t.Fatalf("only %d restarts exercised", restarts)
	}
}

// TestRestoreStreamsWhatDecodeReads: the server's path (Open, then
// File.Restore, streaming) loads exactly what the in-memory path does.
func TestRestoreStreamsWhatDecodeReads(t *testing.T) {
	w, _ := populate(t)
	populatePlain(w)
	dir := t.TempDir()
	if err := w.manager(t, dir).Save(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	snap, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mem := newWorld(t, snap.Rules)
	memStats := mustRestore(t, snap, mem.store, mem.keys, w.clock.now())
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	streamed := newWorld(t, f.Rules)
	st, err := f.Restore(streamed.store, streamed.keys, w.clock.now())
	if err != nil || st != memStats || st.Loaded != len(snap.Keys) || st.Plain != len(snap.Plain) {
		t.Fatalf("streamed %+v (%v), in memory %+v", st, err, memStats)
	}
	mem.clock.ns.Store(w.clock.now())
	streamed.clock.ns.Store(w.clock.now())
	sameAnswers(t, mem, streamed)
	for _, p := range snap.Plain {
		a, atA, okA := mem.getPlain(p.Key)
		b, atB, okB := streamed.getPlain(p.Key)
		if a != b || atA != atB || okA != okB {
			t.Fatalf("%s: %q, streamed %q", p.Key, a, b)
		}
	}
}

// TestCorruptFileLoadsNothing: Restore checks the whole file before it
// stores a key, so a file corrupt near its end leaves the keyspace empty.
func TestCorruptFileLoadsNothing(t *testing.T) {
	data := validSnapshot(t)
	data[len(data)-12] ^= 0x40 // inside the last record before END
	path := filepath.Join(t.TempDir(), FileName)
	writeFile(t, path, data)
	f, err := Open(path)
	if err != nil {
		t.Fatalf("the header is intact, so Open succeeds: %v", err)
	}
	defer f.Close()
	r := newWorld(t, f.Rules)
	if _, err := f.Restore(r.store, r.keys, t0); err == nil {
		t.Fatal("a corrupt file restored")
	}
	if n := r.keys.Stats().Keys; n != 0 {
		t.Fatalf("%d keys loaded from a corrupt file", n)
	}
}

// TestEveryStateOnTheWayIsSaved drives random decisions and rule changes and
// saves after each, checking that every save decodes: no state the
// keyspace holds is one the decoder refuses.
func TestEveryStateOnTheWayIsSaved(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	w := newWorld(t, []rules.Def{randomDef(rng, "a"), randomDef(rng, "b")})
	dir := t.TempDir()
	m := w.manager(t, dir)
	for step := range 200 {
		w.clock.ns.Add(rng.Int64N(10 * sec))
		if rng.IntN(4) == 0 {
			w.store.Put(randomDef(rng, []string{"a", "b"}[rng.IntN(2)]))
			w.keys.Reconcile()
		}
		for i := range 5 {
			name := []string{"a", "b"}[rng.IntN(2)]
			cost := 1 + rng.Int64N(min(w.store.Load().Get([]byte(name)).Params.Capacity, 20))
			w.op(keyspace.Allow, name, fmt.Sprint("k", i), cost)
		}
		if err := m.Save(); err != nil {
			t.Fatal(err)
		}
		if st := m.Status(); st.LastSkipped != 0 {
			t.Fatalf("step %d: %d keys left out of the snapshot", step, st.LastSkipped)
		}
		if _, err := ReadFile(filepath.Join(dir, FileName)); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
