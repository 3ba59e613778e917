package snapshot

import (
	"path/filepath"
	"testing"

	"github.com/rlserver/rlserver/internal/rules"
)

// TestShadowModeIsSaved: a rule's mode is part of the rule as saved.
func TestShadowModeIsSaved(t *testing.T) {
	shadow := rules.MustParseDef("trial", "fixed_window", "5", "1m", "")
	shadow.Shadow = true
	w := newWorld(t, []rules.Def{shadow, rules.MustParseDef("api", "fixed_window", "5", "1m", "")})
	dir := t.TempDir()
	if err := w.manager(t, dir).Save(); err != nil {
		t.Fatal(err)
	}
	snap, err := ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]bool{}
	for _, d := range snap.Rules {
		modes[d.Name] = d.Shadow
	}
	if len(modes) != 2 || !modes["trial"] || modes["api"] {
		t.Fatalf("saved rules: %+v", snap.Rules)
	}
}

// TestUnknownRuleFlagsAreRefused: flags this version does not know are
// corruption (or a later rlserver's file), never silently dropped.
func TestUnknownRuleFlagsAreRefused(t *testing.T) {
	d := rules.MustParseDef("a", "fixed_window", "5", "1m", "")
	if err := setRuleFlags(&d, 2); err == nil {
		t.Fatal("flags 2 accepted")
	}
	if err := setRuleFlags(&d, flagShadow); err != nil || !d.Shadow {
		t.Fatalf("shadow flag: %v, %+v", err, d)
	}
}
