package resp

import (
	"strconv"
	"testing"
)

// FuzzParseInt checks the argument parser against strconv: it accepts
// exactly the canonical decimal forms Redis accepts, with the same value.
func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"0", "1", "-1", "007", "+1", " 1", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "", "-", "1e3", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := ParseInt([]byte(s))
		want, err := strconv.ParseInt(s, 10, 64)
		canonical := err == nil && strconv.FormatInt(want, 10) == s
		if ok != canonical || (ok && got != want) {
			t.Fatalf("ParseInt(%q) = %d, %v; strconv says %d, %v (canonical %v)", s, got, ok, want, err, canonical)
		}
	})
}
