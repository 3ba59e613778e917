package rules

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rlserver/rlserver/internal/yamldoc"
)

// defaultsYAML holds the rules that apply when no --rules file is given.
// README.md lists them; keep the two in step.
//
//go:embed defaults.yaml
var defaultsYAML []byte

// Defaults returns the built-in rules.
func Defaults() []Def {
	defs, err := Parse("built-in defaults", defaultsYAML)
	if err != nil {
		panic(err) // the embedded file is tested; failing here is a build defect
	}
	return defs
}

// LoadFile reads and validates a rules file. Errors name the file and, where
// one is at fault, the rule (by position and name) and the field.
func LoadFile(path string) ([]Def, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules file %s: %w", path, err)
	}
	return Parse(path, data)
}

var ruleFields = []string{"name", "algorithm", "limit", "window", "burst", "mode"}

// Parse reads rules in the file format:
//
//	rules:
//	  - {name: api, algorithm: sliding_counter, limit: 1000, window: 1m}
//	  - {name: burst, algorithm: token_bucket, limit: 60, window: 1m, burst: 10}
//	  - {name: trial, algorithm: fixed_window, limit: 5, window: 1m, mode: shadow}
//
// source names the data in errors. Unknown keys, missing fields, duplicate
// names and invalid values are all errors; nothing is returned on error.
func Parse(source string, data []byte) ([]Def, error) {
	fail := func(line int, format string, args ...any) error {
		return fmt.Errorf("rules file %s: line %d: %s", source, line, fmt.Sprintf(format, args...))
	}
	top, err := yamldoc.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("rules file %s: %w", source, err)
	}
	if top == nil {
		return nil, fmt.Errorf("rules file %s: empty; expected a top-level 'rules:' list", source)
	}
	if top.Kind != yaml.MappingNode {
		return nil, fail(top.Line, "expected a mapping with a 'rules:' list")
	}
	var list *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		k := top.Content[i]
		if k.Value != "rules" {
			return nil, fail(k.Line, "unknown top-level key '%s' (only 'rules' is allowed)", k.Value)
		}
		list = top.Content[i+1]
	}
	if list == nil || list.Kind != yaml.SequenceNode {
		return nil, fail(top.Line, "expected 'rules:' to be a list of rules")
	}
	defs := make([]Def, 0, len(list.Content))
	lines := make(map[string]int, len(list.Content))
	for i, node := range list.Content {
		at := fmt.Sprintf("rule %d", i+1)
		if node.Kind != yaml.MappingNode {
			return nil, fail(node.Line, "%s: expected a mapping like {name: api, algorithm: token_bucket, limit: 10, window: 1s}", at)
		}
		for j := 0; j+1 < len(node.Content); j += 2 {
			if node.Content[j].Value == "name" {
				at = fmt.Sprintf("rule %d (%s)", i+1, node.Content[j+1].Value)
			}
		}
		fields := map[string]string{}
		for j := 0; j+1 < len(node.Content); j += 2 {
			k, v := node.Content[j], node.Content[j+1]
			if !slices.Contains(ruleFields, k.Value) {
				return nil, fail(k.Line, "%s: unknown field '%s' (fields are %s)", at, k.Value, strings.Join(ruleFields, ", "))
			}
			if v.Kind != yaml.ScalarNode {
				return nil, fail(v.Line, "%s: field %s: expected a single value", at, k.Value)
			}
			if _, dup := fields[k.Value]; dup {
				return nil, fail(k.Line, "%s: field %s given twice", at, k.Value)
			}
			fields[k.Value] = v.Value
		}
		for _, f := range ruleFields[:4] {
			if _, ok := fields[f]; !ok {
				return nil, fail(node.Line, "%s: field %s is missing", at, f)
			}
		}
		d, err := ParseDef(fields["name"], fields["algorithm"], fields["limit"], fields["window"], fields["burst"])
		if mode, ok := fields["mode"]; ok && err == nil {
			d.Shadow, err = ParseMode(mode)
		}
		if err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				return nil, fail(node.Line, "%s: field %s: %v", at, fe.Field, err)
			}
			return nil, fail(node.Line, "%s: %v", at, err)
		}
		if first, dup := lines[d.Name]; dup {
			return nil, fail(node.Line, "%s: name already used by the rule on line %d", at, first)
		}
		lines[d.Name] = node.Line
		defs = append(defs, d)
	}
	return defs, nil
}
