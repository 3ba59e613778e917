package commands

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/scripting"
)

// TestLibraryScriptsAreConfined: every rate-limiter library's script
// (internal/scripting/testdata/libraries) is proven, by the command table,
// to reach only its declared keys, so it is queued with the pipeline's
// other work; limits' reset, which runs KEYS, is not.
func TestLibraryScriptsAreConfined(t *testing.T) {
	files, err := filepath.Glob("../scripting/testdata/libraries/*.lua")
	if err != nil || len(files) < 10 {
		t.Fatalf("library scripts: %v, %v", files, err)
	}
	cache := scripting.NewCache(scripting.CacheLimits{})
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s, err := cache.Load(src)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		wantReach := strings.HasSuffix(f, "limits_clear_keys.lua")
		if got := s.MayReachUndeclared(keyWords); got != wantReach {
			t.Errorf("%s: may reach undeclared keys = %v, want %v", filepath.Base(f), got, wantReach)
		}
	}
}

// TestKeyWords checks the command table as the reading of scripts sees it.
func TestKeyWords(t *testing.T) {
	for _, tc := range []struct {
		name   string
		words  int
		want   []int
		wantOK bool
	}{
		{"get", 2, []int{1}, true},
		{"get", -1, []int{1}, true},
		{"mset", 5, []int{1, 3}, true},
		{"mset", -1, nil, false},
		{"del", 4, []int{1, 2, 3}, true},
		{"time", 1, nil, true},
		{"nosuchcommand", 2, nil, true},
		{"keys", 2, nil, false},
		{"dbsize", 1, nil, false},
		{"rl.allow", 3, nil, false},
		{"rl.rule", 3, nil, false},
		{"eval", 3, nil, false},
	} {
		got, ok := keyWords(tc.name, tc.words)
		if ok != tc.wantOK || !equalInts(got, tc.want) {
			t.Errorf("keyWords(%q, %d) = %v, %v; want %v, %v", tc.name, tc.words, got, ok, tc.want, tc.wantOK)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
