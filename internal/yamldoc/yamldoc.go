// Package yamldoc parses the YAML files an operator writes (the rules file,
// the configuration file) and reports syntax errors at the line at fault.
//
// go.yaml.in/yaml/v3 reports a syntax error at the line where the enclosing
// block began, not where parsing failed: a list whose fourth line is
// mis-indented is reported as "line 1". Parse finds the line itself, as the
// shortest prefix of the document (in whole lines) that fails with the same
// problem, and reports that.
package yamldoc

import (
	"bytes"
	"fmt"
	"regexp"

	"go.yaml.in/yaml/v3"
)

// Parse parses data as one YAML document and returns its root node (nil
// for an empty document). A syntax error is returned as "line N: problem",
// with N the 1-based line at fault.
func Parse(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	err := yaml.Unmarshal(data, &doc)
	if err == nil {
		if len(doc.Content) == 0 {
			return nil, nil
		}
		return doc.Content[0], nil
	}
	problem := problemOf(err)
	if line := failingLine(data, problem); line > 0 {
		return nil, &SyntaxError{Line: line, Problem: problem}
	}
	return nil, &SyntaxError{Problem: problem}
}

// SyntaxError is a YAML syntax error at a line.
type SyntaxError struct {
	Line    int // 1-based; 0 when unknown
	Problem string
}

// Error reads "line N: problem".
func (e *SyntaxError) Error() string {
	if e.Line == 0 {
		return "YAML syntax: " + e.Problem
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Problem)
}

var yamlPrefix = regexp.MustCompile(`^yaml: (line \d+: )?`)

// problemOf strips the library's prefix and its line from err's text.
func problemOf(err error) string {
	return yamlPrefix.ReplaceAllString(err.Error(), "")
}

// failingLine returns the smallest number of leading lines of data that
// fails to parse with the given problem, or 0 if none does. It
// binary-searches, assuming that once a prefix fails with the problem every
// longer one does (true of the syntax errors the library reports, which
// depend only on the text before them); a file of n lines costs log2(n)
// parses.
func failingLine(data []byte, problem string) int {
	starts := []int{0}
	for i, b := range data {
		if b == '\n' && i+1 < len(data) {
			starts = append(starts, i+1)
		}
	}
	failsAt := func(lines int) bool {
		end := len(data)
		if lines < len(starts) {
			end = starts[lines]
		}
		var n yaml.Node
		err := yaml.Unmarshal(bytes.Clone(data[:end]), &n)
		return err != nil && problemOf(err) == problem
	}
	lo, hi := 1, len(starts)
	if !failsAt(hi) {
		return 0
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if failsAt(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}
