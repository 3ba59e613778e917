package yamldoc

import (
	"strings"
	"testing"
)

func TestSyntaxErrorNamesTheLineAtFault(t *testing.T) {
	for _, tt := range []struct {
		src  string
		line int
	}{
		{"a: 1\nb: [1\nc: 2\n", 2},
		{"list:\n  - x: 1\n    y: 2\n   z: 3\n", 4},
		{"a: 1\n\tb: 2\n", 2},
		{"a: 1\nb: 2\nc: {d\n", 3},
	} {
		_, err := Parse([]byte(tt.src))
		se, ok := err.(*SyntaxError)
		if !ok || se.Line != tt.line {
			t.Errorf("%q: %v, want line %d", tt.src, err, tt.line)
		}
	}
	if n, err := Parse([]byte("# only a comment\n")); n != nil || err != nil {
		t.Errorf("empty document: %v %v", n, err)
	}
	if n, err := Parse([]byte("a: 1\n")); err != nil || n == nil || !strings.Contains(n.Content[0].Value, "a") {
		t.Errorf("a mapping: %v %v", n, err)
	}
}
