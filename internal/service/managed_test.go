package service

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rlserver/rlserver/internal/rules"
)

const fe = "fe:"

func newManaged(t *testing.T, cfg Config, defs ...rules.Def) (*Service, *Managed) {
	t.Helper()
	cfg.ReservedRulePrefixes = []string{fe}
	svc := newService(t, cfg, defs...)
	m, err := svc.Managed(fe)
	if err != nil {
		t.Fatal(err)
	}
	return svc, m
}

func check(t *testing.T, m *Managed, allOrNothing bool, checks ...Check) []bool {
	t.Helper()
	dec, err := m.Decide(context.Background(), checks, allOrNothing)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]bool, len(dec))
	for i, d := range dec {
		out[i] = d.Allowed
	}
	return out
}

func TestManagedRulesLeaveTheOperatorsAlone(t *testing.T) {
	user := rules.MustParseDef("user", "token_bucket", "5", "1s", "")
	svc, m := newManaged(t, Config{}, user)
	a := rules.MustParseDef(fe+"a", "fixed_window", "2", "1h", "")
	b := rules.MustParseDef(fe+"b", "fixed_window", "2", "1h", "")
	if err := m.SetRules([]rules.Def{a, b}); err != nil {
		t.Fatal(err)
	}
	decide(t, svc, Allow, "k", "user", 1)
	check(t, m, false, Check{Key: "k", Rule: fe + "a", Cost: 1}, Check{Key: "k", Rule: fe + "b", Cost: 1})

	// A reload with a's limit raised and b gone: a keeps its spent unit,
	// b's key goes with it, the operator's rule and key stay.
	a.Limit = 3
	if err := m.SetRules([]rules.Def{a}); err != nil {
		t.Fatal(err)
	}
	set := svc.Rules()
	if set.Get([]byte("user")) == nil || set.Get([]byte(fe+"b")) != nil || set.Len() != 2 {
		t.Fatalf("rules after the reload: %v", set.Rules())
	}
	if st := svc.Stats(svc.NewSession()); st.Keys != 2 {
		t.Fatalf("%d keys, want the user's and a's", st.Keys)
	}
	dec, err := m.Decide(context.Background(), []Check{{Key: "k", Rule: fe + "a", Cost: 1, Peek: true}}, false)
	if err != nil || dec[0].Remaining != 2 {
		t.Fatalf("a after its limit went 2 -> 3 with 1 spent: %+v %v", dec, err)
	}

	// A managed replace cannot name the operator's rules, nor decide them.
	if err := m.SetRules([]rules.Def{user}); err == nil {
		t.Fatal("a managed replace took the operator's rule")
	}
	if _, err := m.Decide(context.Background(), []Check{{Key: "k", Rule: "user", Cost: 1}}, false); !errors.Is(err, ErrUnknownRule) {
		t.Fatalf("deciding the operator's rule: %v", err)
	}
}

func TestReservedNamesAreRefusedToTheOperator(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	os.WriteFile(path, []byte("rules:\n  - {name: s, algorithm: token_bucket, limit: 3, window: 1s}\n"), 0o644)
	svc, m := newManaged(t, Config{RulesFile: path, RulesAuthoritative: true}, rules.MustParseDef("r", "fixed_window", "10", "1h", ""))
	if err := m.SetRules([]rules.Def{rules.MustParseDef(fe+"a", "fixed_window", "2", "1h", "")}); err != nil {
		t.Fatal(err)
	}
	var reserved *ReservedRuleError
	if err := svc.PutRule(svc.NewSession(), rules.MustParseDef(fe+"a", "fixed_window", "9", "1h", "")); !errors.As(err, &reserved) {
		t.Errorf("RL.RULE SET of a managed rule: %v", err)
	}
	if ok, err := svc.DeleteRule(svc.NewSession(), fe+"a"); ok || !errors.As(err, &reserved) {
		t.Errorf("RL.RULE DEL of a managed rule: %v %v", ok, err)
	}
	// An authoritative reload makes the file every rule but the managed.
	r, err := svc.ReloadRules()
	if err != nil {
		t.Fatal(err)
	}
	if r.Set.Get([]byte(fe+"a")) == nil || r.Set.Get([]byte("r")) != nil || r.Set.Len() != 2 {
		t.Fatalf("after an authoritative reload: %v", r.Set.Rules())
	}
	os.WriteFile(path, []byte("rules:\n  - {name: \"fe:a\", algorithm: token_bucket, limit: 3, window: 1s}\n"), 0o644)
	if _, err := svc.ReloadRules(); !errors.As(err, &reserved) {
		t.Fatalf("a rules file naming a managed rule: %v", err)
	}
	if _, err := svc.Managed("other:"); err == nil {
		t.Fatal("an unreserved prefix was managed")
	}
}

func TestManagedGroupIsAllOrNothing(t *testing.T) {
	_, m := newManaged(t, Config{})
	if err := m.SetRules([]rules.Def{rules.MustParseDef(fe+"few", "fixed_window", "1", "1h", ""),
		rules.MustParseDef(fe+"many", "fixed_window", "10", "1h", "")}); err != nil {
		t.Fatal(err)
	}
	few, many := Check{Key: "k", Rule: fe + "few", Cost: 1}, Check{Key: "k", Rule: fe + "many", Cost: 1}
	if got := check(t, m, true, few, many); !got[0] || !got[1] {
		t.Fatalf("first group: %v", got)
	}
	// few is spent: the group is refused and many is not charged.
	if got := check(t, m, true, few, many); got[0] || !got[1] {
		t.Fatalf("second group: %v, want few denied and many admissible alone", got)
	}
	dec, err := m.Decide(context.Background(), []Check{{Key: "k", Rule: fe + "many", Cost: 1, Peek: true}}, false)
	if err != nil || dec[0].Remaining != 9 {
		t.Fatalf("many after a refused group: %+v %v, want 9 left", dec, err)
	}
	// Without a group every check is charged on its own.
	if got := check(t, m, false, few, many); got[0] || !got[1] {
		t.Fatalf("ungrouped: %v", got)
	}
	for _, bad := range [][]Check{{few, few}, {few, {Key: "k", Rule: fe + "many", Cost: 1, Peek: true}}} {
		if _, err := m.Decide(context.Background(), bad, true); err == nil {
			t.Errorf("group %v accepted", bad)
		}
	}
}

// Exactly the limit is admitted however many goroutines ask at once,
// grouped or not, and the sessions they share come back clean.
func TestManagedDecideIsExactUnderConcurrency(t *testing.T) {
	_, m := newManaged(t, Config{})
	const limit, workers, each = 100, 64, 5
	if err := m.SetRules([]rules.Def{rules.MustParseDef(fe+"day", "fixed_window", "100", "24h", ""),
		rules.MustParseDef(fe+"wide", "fixed_window", "1000000", "24h", "")}); err != nil {
		t.Fatal(err)
	}
	for _, group := range []bool{false, true} {
		key := "solo"
		if group {
			key = "group"
		}
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range each {
					checks := []Check{{Key: key, Rule: fe + "day", Cost: 1}, {Key: key, Rule: fe + "wide", Cost: 1}}
					dec, err := m.Decide(context.Background(), checks, group)
					if err != nil {
						t.Error(err)
						return
					}
					if dec[0].Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if admitted.Load() != limit {
			t.Errorf("group=%v: %d admitted, want %d", group, admitted.Load(), limit)
		}
		dec, _ := m.Decide(context.Background(), []Check{{Key: key, Rule: fe + "wide", Cost: 1, Peek: true}}, false)
		wantWide := int64(1000000 - workers*each)
		if group {
			wantWide = 1000000 - limit // a refused group charges nothing
		}
		if dec[0].Remaining != wantWide {
			t.Errorf("group=%v: wide has %d left, want %d", group, dec[0].Remaining, wantWide)
		}
	}
}
