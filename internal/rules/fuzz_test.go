package rules

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the rules file loader: it must never
// panic, and whatever it accepts must be valid rules a Store publishes.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../../testdata/rules/*.yaml")
	for _, file := range files {
		data, _ := os.ReadFile(file)
		f.Add(data)
	}
	f.Add(defaultsYAML)
	f.Add([]byte("rules: [{name: a, algorithm: token_bucket, limit: 1, window: 1ms, burst: 1000000000}]"))
	f.Add([]byte("rules:\n  - &a {name: a}\n  - *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		defs, err := Parse("fuzz", data)
		if err != nil {
			return
		}
		for _, d := range defs {
			if err := d.Validate(); err != nil {
				t.Fatalf("accepted an invalid rule %+v: %v", d, err)
			}
		}
		if _, err := NewStore(defs); err != nil {
			t.Fatalf("accepted rules a store refuses: %v", err)
		}
	})
}
