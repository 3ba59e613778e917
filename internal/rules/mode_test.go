package rules

import (
	"strings"
	"testing"
)

func TestParseMode(t *testing.T) {
	defs, err := Parse("test", []byte("rules:\n"+
		"  - {name: a, algorithm: fixed_window, limit: 5, window: 1m, mode: shadow}\n"+
		"  - {name: b, algorithm: fixed_window, limit: 5, window: 1m, mode: enforce}\n"+
		"  - {name: c, algorithm: fixed_window, limit: 5, window: 1m}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !defs[0].Shadow || defs[1].Shadow || defs[2].Shadow || defs[0].Mode() != "shadow" || defs[2].Mode() != "enforce" {
		t.Fatalf("modes: %+v", defs)
	}
	_, err = Parse("test", []byte("rules:\n  - {name: a, algorithm: fixed_window, limit: 5, window: 1m, mode: loud}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2: rule 1 (a): field mode: invalid mode 'loud': must be enforce or shadow") {
		t.Fatalf("bad mode: %v", err)
	}
}

// TestModeChangeKeepsIdentity: switching a rule between shadow and enforce
// keeps its ID, so its keys keep their spent budget.
func TestModeChangeKeepsIdentity(t *testing.T) {
	st, err := NewStore([]Def{MustParseDef("a", "fixed_window", "5", "1m", "")})
	if err != nil {
		t.Fatal(err)
	}
	before := st.Load().Get([]byte("a"))
	d := before.Def
	d.Shadow = true
	set, err := st.Put(d)
	if err != nil {
		t.Fatal(err)
	}
	if after := set.Get([]byte("a")); after.ID != before.ID || !after.Shadow {
		t.Fatalf("before %+v, after %+v", before, after)
	}
}
