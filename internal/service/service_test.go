package service

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

const t0 = int64(1_704_067_200) * 1e9

func newService(t *testing.T, cfg Config, defs ...rules.Def) *Service {
	t.Helper()
	st, err := rules.NewStore(defs)
	if err != nil {
		t.Fatal(err)
	}
	keys := keyspace.New(keyspace.Config{Shards: 4, Clock: func() int64 { return t0 }, Rules: st})
	t.Cleanup(keys.Stop)
	cfg.Rules, cfg.Keys = st, keys
	return New(cfg)
}

func decide(t *testing.T, svc *Service, kind OpKind, key, rule string, cost int64) Op {
	t.Helper()
	op, err := svc.Decision(kind, []byte(key), []byte(rule), cost)
	if err != nil {
		t.Fatal(err)
	}
	ss := svc.NewSession()
	tk := ss.Add(op)
	ss.Run()
	return *ss.Op(tk)
}

func TestDecisionValidates(t *testing.T) {
	svc := newService(t, Config{}, rules.MustParseDef("r", "token_bucket", "10", "1s", "5"))
	for _, tc := range []struct {
		rule string
		cost int64
		want error
		cap  int64
	}{
		{"nope", 1, ErrUnknownRule, 0},
		{"r", 0, nil, 0},
		{"r", -3, nil, 0},
		{"r", 6, nil, 5},
	} {
		_, err := svc.Decision(Allow, []byte("k"), []byte(tc.rule), tc.cost)
		var ce *CostError
		switch {
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s cost %d: %v, want %v", tc.rule, tc.cost, err, tc.want)
		case tc.want == nil && (!errors.As(err, &ce) || ce.Capacity != tc.cap || ce.Cost != tc.cost):
			t.Errorf("%s cost %d: %v, want a CostError with capacity %d", tc.rule, tc.cost, err, tc.cap)
		}
	}
	// Reset takes no cost.
	if _, err := svc.Decision(Reset, []byte("k"), []byte("r"), 0); err != nil {
		t.Fatal(err)
	}
	if op := decide(t, svc, Allow, "k", "r", 5); !op.Decision.Allowed || op.Decision.Remaining != 0 {
		t.Fatalf("%+v", op.Decision)
	}
}

func TestGroupValidates(t *testing.T) {
	svc := newService(t, Config{}, rules.MustParseDef("a", "fixed_window", "10", "1s", ""), rules.MustParseDef("b", "fixed_window", "2", "1s", ""))
	bs := func(words ...string) [][]byte {
		out := make([][]byte, len(words))
		for i, w := range words {
			out[i] = []byte(w)
		}
		return out
	}
	var dup *DuplicatePairError
	var ce *CostError
	if _, err := svc.Group(nil, bs("k", "a", "k"), 1); !errors.Is(err, ErrOddPairs) {
		t.Errorf("odd: %v", err)
	}
	if _, err := svc.Group(nil, bs("k", "a", "k", "a"), 1); !errors.As(err, &dup) || dup.Key != "k" {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := svc.Group(nil, bs("k", "a", "k", "b"), 3); !errors.As(err, &ce) || ce.Rule != "b" {
		t.Errorf("cost over b's capacity: %v", err)
	}
	many := make([]string, 0, 2*(MaxGroup+1))
	for i := range MaxGroup + 1 {
		many = append(many, string(rune('A'+i)), "a")
	}
	if _, err := svc.Group(nil, bs(many...), 1); !errors.Is(err, ErrTooManyPairs) {
		t.Errorf("too many: %v", err)
	}
	ops, err := svc.Group(nil, bs("k", "a", "k", "b"), 2)
	if err != nil {
		t.Fatal(err)
	}
	ss := svc.NewSession()
	if ok, err := svc.AllowAll(ss, ops); !ok || err != nil {
		t.Fatalf("first: %v %v", ok, err)
	}
	ops, _ = svc.Group(ops[:0], bs("k", "a", "k", "b"), 2)
	if ok, _ := svc.AllowAll(ss, ops); ok {
		t.Fatal("b has nothing left, yet the group passed")
	}
	if op := decide(t, svc, Peek, "k", "a", 1); op.Decision.Remaining != 8 {
		t.Fatalf("the refused group charged a: %+v", op.Decision)
	}
}

// TestRuleChangesReachTheKeyspace: a rule change reconciles the keys,
// through whichever handle the caller has — pooled, or a transaction's
// held DB (where a message to the shards would wait forever).
func TestRuleChangesReachTheKeyspace(t *testing.T) {
	svc := newService(t, Config{}, rules.MustParseDef("r", "fixed_window", "10", "1h", ""))
	decide(t, svc, Allow, "k", "r", 4)
	if err := svc.PutRule(svc.NewSession(), rules.MustParseDef("r", "fixed_window", "5", "1h", "")); err != nil {
		t.Fatal(err)
	}
	if st := svc.Stats(svc.NewSession()); st.Keys != 1 {
		t.Fatalf("%d keys after a numbers-only change", st.Keys)
	}
	if op := decide(t, svc, Peek, "k", "r", 1); op.Decision.Remaining != 1 {
		t.Fatalf("spent budget not kept: %+v", op.Decision)
	}
	err := svc.NewSession().Exec(func(db *DB) {
		if ok, err := svc.DeleteRule(db, "r"); !ok || err != nil {
			t.Error("DeleteRule")
		}
		if st := svc.Stats(db); st.Keys != 0 {
			t.Errorf("%d keys left after the rule's deletion, inside the transaction", st.Keys)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := svc.DeleteRule(svc.NewSession(), "r"); ok {
		t.Fatal("deleted twice")
	}
}

func TestReloadRules(t *testing.T) {
	svc := newService(t, Config{}, rules.MustParseDef("r", "fixed_window", "10", "1h", ""))
	if _, err := svc.ReloadRules(); !errors.Is(err, ErrNoRulesFile) {
		t.Fatalf("without a file: %v", err)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	os.WriteFile(path, []byte("rules:\n  - {name: s, algorithm: token_bucket, limit: 3, window: 1s}\n"), 0o644)
	for _, authoritative := range []bool{false, true} {
		svc := newService(t, Config{RulesFile: path, RulesAuthoritative: authoritative}, rules.MustParseDef("r", "fixed_window", "10", "1h", ""))
		decide(t, svc, Allow, "k", "r", 1)
		r, err := svc.ReloadRules()
		if err != nil {
			t.Fatal(err)
		}
		keptR := r.Set.Get([]byte("r")) != nil
		if r.Set.Get([]byte("s")) == nil || keptR == authoritative || (len(r.Deleted) == 1) != authoritative {
			t.Fatalf("authoritative=%v: %v rules, deleted %v", authoritative, r.Set.Len(), r.Deleted)
		}
		if st := svc.Stats(svc.NewSession()); (st.Keys == 1) != keptR {
			t.Fatalf("authoritative=%v: %d keys", authoritative, st.Keys)
		}
	}
	os.WriteFile(path, []byte("rules: [{name: bad}]\n"), 0o644)
	before := svc.Rules().Version
	if _, err := newService(t, Config{RulesFile: path}).ReloadRules(); err == nil {
		t.Fatal("a bad file reloaded")
	}
	if svc.Rules().Version != before {
		t.Fatal("a failed reload published")
	}
}

func TestPersistenceOff(t *testing.T) {
	svc := newService(t, Config{})
	if svc.Persistent() || !errors.Is(svc.Save(), ErrNoPersistence) || !errors.Is(svc.BGSave(), ErrNoPersistence) {
		t.Fatal("saves without persistence")
	}
	if st := svc.SnapshotStatus(); st.LastOKUnix != 0 {
		t.Fatalf("%+v", st)
	}
}
