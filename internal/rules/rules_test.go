package rules

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/algorithms"
)

func TestParseDefErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name, alg, limit, window, burst string
		field                           string // "" = valid
	}{
		{"api", "token_bucket", "10", "1s", "", ""},
		{"a.b:c-d_e", "leaky_bucket", "10", "1s", "20", ""},
		{"", "token_bucket", "10", "1s", "", "name"},
		{"has space", "token_bucket", "10", "1s", "", "name"},
		{strings.Repeat("x", 65), "token_bucket", "10", "1s", "", "name"},
		{"api", "tokenbucket", "10", "1s", "", "algorithm"},
		{"api", "token_bucket", "0", "1s", "", "limit"},
		{"api", "token_bucket", "1000000001", "1s", "", "limit"},
		{"api", "token_bucket", "1.5", "1s", "", "limit"},
		{"api", "sliding_log", "100001", "1s", "", "limit"},
		{"api", "sliding_log", "100000", "1s", "", ""},
		{"api", "token_bucket", "10", "999us", "", "window"},
		{"api", "token_bucket", "10", "8785h", "", "window"},
		{"api", "token_bucket", "10", "8784h", "", ""},
		{"api", "token_bucket", "10", "soon", "", "window"},
		{"api", "fixed_window", "10", "1s", "5", "burst"},
		{"api", "token_bucket", "10", "1s", "0", "burst"},
		{"api", "token_bucket", "1", "8784h", "1000000000", "burst"}, // 10^9 years to refill
	}
	for _, tt := range tests {
		_, err := ParseDef(tt.name, tt.alg, tt.limit, tt.window, tt.burst)
		var fe *FieldError
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%v: unexpected error %v", tt, err)
		case tt.field != "" && !errors.As(err, &fe):
			t.Errorf("%v: got %v, want a field error", tt, err)
		case tt.field != "" && fe.Field != tt.field:
			t.Errorf("%v: error names field %q, want %q (%v)", tt, fe.Field, tt.field, err)
		}
	}
}

func TestDefaultsAreValid(t *testing.T) {
	defs := Defaults()
	if len(defs) == 0 {
		t.Fatal("no default rules")
	}
	seen := map[algorithms.Algorithm]bool{}
	for _, d := range defs {
		seen[d.Algorithm] = true
	}
	if len(seen) != 5 {
		t.Errorf("defaults cover %d algorithms, want all 5", len(seen))
	}
}

func TestLoadFile(t *testing.T) {
	defs, err := LoadFile("../../testdata/rules/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 3 || defs[1].Burst != 10 || defs[2].Window != 15*time.Minute {
		t.Fatalf("parsed %+v", defs)
	}
	bad := []struct{ file, want string }{
		{"bad_limit.yaml", "rule 2 (login): field limit: invalid limit 'lots'"},
		{"bad_field.yaml", "rule 1 (api): unknown field 'colour'"},
		{"duplicate.yaml", "rule 2 (api): name already used by the rule on line 2"},
		{"missing.yaml", "no such file"},
	}
	for _, b := range bad {
		path := "../../testdata/rules/" + b.file
		_, err := LoadFile(path)
		if err == nil || !strings.Contains(err.Error(), b.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming the file and containing %q", b.file, err, b.want)
		}
	}
	for _, src := range []string{"", "rules: 3", "other: []", "rules:\n  - [1, 2]", "rules:\n  - {name: x, algorithm: token_bucket, limit: 1}"} {
		if _, err := Parse("inline", []byte(src)); err == nil {
			t.Errorf("%q: accepted", src)
		}
	}
}

func mustDef(t *testing.T, name, alg, limit, window, burst string) Def {
	t.Helper()
	d, err := ParseDef(name, alg, limit, window, burst)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestStoreIdentity(t *testing.T) {
	st, err := NewStore([]Def{mustDef(t, "api", "token_bucket", "10", "1s", "")})
	if err != nil {
		t.Fatal(err)
	}
	v1 := st.Load()
	api := v1.Get([]byte("api"))
	if api == nil || v1.Version != 1 {
		t.Fatalf("initial set: %+v", v1)
	}

	// Changing only the numbers keeps the ID (state carries over) and
	// bumps the revision.
	v2, _ := st.Put(mustDef(t, "api", "token_bucket", "20", "1s", "5"))
	api2 := v2.Get([]byte("api"))
	if api2.ID != api.ID || api2.Rev <= api.Rev || v2.Version != 2 {
		t.Fatalf("limit change: %+v -> %+v", api, api2)
	}
	// The old set is untouched: readers holding it see a whole version.
	if v1.Get([]byte("api")).Limit != 10 {
		t.Fatal("published set was mutated")
	}
	// Re-putting the same definition changes nothing about identity.
	v3, _ := st.Put(mustDef(t, "api", "token_bucket", "20", "1s", "5"))
	if r := v3.Get([]byte("api")); r.ID != api2.ID || r.Rev != api2.Rev {
		t.Fatal("identical put changed identity")
	}
	// A new algorithm is a new identity.
	v4, _ := st.Put(mustDef(t, "api", "sliding_counter", "20", "1s", ""))
	api4 := v4.Get([]byte("api"))
	if api4.ID == api.ID || v4.ByID(api.ID) != nil || v4.ByID(api4.ID) != api4 {
		t.Fatal("algorithm change kept the old identity")
	}
	// Delete, then re-create: never the old identity.
	v5, ok := st.Delete("api")
	if !ok || v5.Get([]byte("api")) != nil || v5.Len() != 0 {
		t.Fatal("delete failed")
	}
	if _, ok := st.Delete("api"); ok {
		t.Fatal("second delete reported success")
	}
	v6, _ := st.Put(mustDef(t, "api", "sliding_counter", "20", "1s", ""))
	if v6.Get([]byte("api")).ID == api4.ID {
		t.Fatal("re-created rule reused a deleted rule's ID")
	}
}

func TestReplaceIsAllOrNothing(t *testing.T) {
	st, _ := NewStore(Defaults())
	before := st.Load()
	_, err := st.Replace([]Def{mustDef(t, "a", "token_bucket", "1", "1s", ""), {Name: "bad name"}})
	if err == nil || st.Load() != before {
		t.Fatalf("invalid replace published something: %v", err)
	}
	_, err = st.Replace([]Def{mustDef(t, "a", "token_bucket", "1", "1s", ""), mustDef(t, "a", "token_bucket", "2", "1s", "")})
	if err == nil || st.Load() != before {
		t.Fatalf("duplicate names published something: %v", err)
	}
}

// ReplaceOwned replaces one owner's rules and leaves every other rule, and
// its identity, alone.
func TestReplaceOwnedTouchesOnlyItsPart(t *testing.T) {
	mine := func(name string) bool { return strings.HasPrefix(name, "fe:") }
	st, _ := NewStore([]Def{mustDef(t, "user", "token_bucket", "5", "1s", ""), mustDef(t, "fe:a", "fixed_window", "3", "1m", ""),
		mustDef(t, "fe:b", "fixed_window", "3", "1m", "")})
	before := st.Load()
	user, a := before.Get([]byte("user")), before.Get([]byte("fe:a"))

	after, err := st.ReplaceOwned([]Def{mustDef(t, "fe:a", "fixed_window", "4", "1m", ""), mustDef(t, "fe:c", "sliding_log", "1", "1s", "")}, mine)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.Get([]byte("user")); got != user {
		t.Errorf("the user's rule changed: %+v -> %+v", user, got)
	}
	if got := after.Get([]byte("fe:a")); got == nil || got.ID != a.ID || got.Limit != 4 {
		t.Errorf("fe:a: %+v, want the same identity with limit 4", got)
	}
	if after.Get([]byte("fe:b")) != nil || after.Get([]byte("fe:c")) == nil || after.Len() != 3 {
		t.Errorf("owned rules after the replace: %v", after.Rules())
	}

	// A def outside the owner's part, or an invalid one, publishes nothing.
	for _, defs := range [][]Def{{mustDef(t, "user", "token_bucket", "1", "1s", "")}, {{Name: "fe:bad name"}}} {
		if _, err := st.ReplaceOwned(defs, mine); err == nil || st.Load() != after {
			t.Errorf("%v: published (err %v)", defs, err)
		}
	}
}

func TestSetGetDoesNotAllocate(t *testing.T) {
	st, _ := NewStore(Defaults())
	name := []byte("api")
	if n := testing.AllocsPerRun(100, func() { _ = st.Load().Get(name) }); n != 0 {
		t.Fatalf("Get allocates %v times", n)
	}
}

// An error echoes the value as the operator wrote it, not as Go formats
// the parsed value (9000h is not 9000h0m0s, 500us is not 500µs).
func TestFieldErrorsEchoTheValueAsWritten(t *testing.T) {
	for _, tt := range []struct{ limit, window, burst, want string }{
		{"10", "9000h", "", "invalid window '9000h'"},
		{"10", "500us", "", "invalid window '500us'"},
		{"10", "0.5ms", "", "invalid window '0.5ms'"},
		{"010", "1s", "", ""},
		{"1", "8784h", "01000000000", "invalid burst '01000000000'"},
	} {
		_, err := ParseDef("api", "token_bucket", tt.limit, tt.window, tt.burst)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%v: %v", tt, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want it to contain %q", tt, err, tt.want)
		}
	}
}

// A YAML syntax error names the line at fault, not the line where the
// enclosing list began.
func TestSyntaxErrorsNameTheLine(t *testing.T) {
	rule := func(name string) string { return "{name: " + name + ", algorithm: token_bucket, limit: 1, window: 1s}" }
	for _, tt := range []struct{ src, want string }{
		{"rules:\n  - " + rule("a") + "\n  - " + rule("b") + "\n - " + rule("c") + "\n", "line 4: "},
		{"rules:\n  - name: a\n    algorithm: token_bucket\n   limit: 1\n", "line 4: "},
		{"rules:\n  - {name: a, limit: 1\n  - {name: b}\n", "line 2: "},
		{"rules:\n\t- " + rule("a") + "\n", "line 2: "},
	} {
		_, err := Parse("f.yaml", []byte(tt.src))
		if err == nil || !strings.Contains(err.Error(), "rules file f.yaml: "+tt.want) {
			t.Errorf("%q: error %v, want %q", tt.src, err, tt.want)
		}
	}
}
