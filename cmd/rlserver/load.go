package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rlserver/rlserver/internal/yamldoc"
)

// errHelp is returned by loadConfig for --help (or -h).
var errHelp = errors.New("help requested")

// usageError is a mistake on the command line; main adds a pointer to
// --help.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// assignment is one setting given on the command line.
type assignment struct {
	s    *setting
	text string
}

// loadConfig reads the settings: the defaults, then the --config file, then
// the environment (env, as os.Environ returns it), then the command line,
// each overriding the one before; then checks them together. --help wins
// over everything, and --version is answered without reading the
// environment or the file, so neither can break it.
func loadConfig(args, env []string) (*config, error) {
	c := &config{}
	c.set = newSettings(c)
	for _, s := range c.set {
		if s.from == 0 {
			s.from = fromAnywhere
		}
		if err := s.set(s.def, source{}); err != nil {
			panic(err) // a default that does not parse is a programming error
		}
	}
	given, err := parseArgs(c.set, args)
	if err != nil {
		return nil, err
	}
	for _, a := range given {
		if a.s.name == "version" {
			if err := a.s.set(a.text, source{kind: fromFlag}); err != nil {
				return nil, err
			}
		}
	}
	if c.version {
		return c, nil
	}
	c.configPath = configPath(given, env)
	if c.configPath != "" {
		if err := applyFile(c.set, c.configPath); err != nil {
			return nil, err
		}
	}
	if err := applyEnv(c, env); err != nil {
		return nil, err
	}
	for _, a := range given {
		if err := a.s.set(a.text, source{kind: fromFlag}); err != nil {
			return nil, err
		}
	}
	return c, c.validate()
}

// configPath is the --config file named on the command line, or else in
// the environment.
func configPath(given []assignment, env []string) string {
	for _, a := range slices.Backward(given) {
		if a.s.name == "config" {
			return a.text
		}
	}
	for _, kv := range env {
		if text, ok := strings.CutPrefix(kv, envName("config")+"="); ok {
			return text // the first wins, as with os.Getenv
		}
	}
	return ""
}

// parseArgs reads the command line: --name=value, --name value, and bare
// --name for booleans (one or two dashes). It returns the assignments in
// order without applying them.
func parseArgs(set settings, args []string) ([]assignment, error) {
	var out []assignment
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			if i+1 < len(args) {
				return nil, &usageError{fmt.Sprintf("unexpected argument %q (rlserver takes only flags)", args[i+1])}
			}
			break
		}
		name, hasDash := strings.CutPrefix(arg, "-")
		if !hasDash || name == "" {
			return nil, unexpectedArg(args, i, set)
		}
		name = strings.TrimPrefix(name, "-")
		name, text, hasText := strings.Cut(name, "=")
		if name == "help" || name == "h" {
			return nil, errHelp
		}
		s := set.lookup(name)
		if s == nil || s.from&fromFlag == 0 {
			msg := "unknown flag --" + name
			if near := set.closest(name, fromFlag); near != "" {
				msg += fmt.Sprintf(" (did you mean --%s?)", near)
			}
			return nil, &usageError{msg}
		}
		if _, isBool := s.value.(boolFlag); isBool && !hasText {
			text = "true"
		} else if !hasText {
			if i+1 == len(args) {
				return nil, &usageError{fmt.Sprintf("--%s needs a value (%s)", name, s.arg)}
			}
			i++
			text = args[i]
		}
		out = append(out, assignment{s, text})
	}
	return out, nil
}

// unexpectedArg explains a word that is not a flag: most often the value
// of a boolean flag given as a separate word.
func unexpectedArg(args []string, i int, set settings) error {
	if i > 0 {
		prev := strings.TrimLeft(args[i-1], "-")
		if s := set.lookup(prev); s != nil && !strings.Contains(args[i-1], "=") {
			if _, isBool := s.value.(boolFlag); isBool {
				return &usageError{fmt.Sprintf("unexpected argument %q: a true/false flag takes its value with =, as --%s=%s", args[i], prev, args[i])}
			}
		}
	}
	return &usageError{fmt.Sprintf("unexpected argument %q (flags start with --)", args[i])}
}

// applyEnv applies every RLSERVER_ variable that names a setting, and
// notes (as a warning) those that name none: a platform may set variables
// with the prefix (Kubernetes does for a service named rlserver), so they
// cannot be errors.
func applyEnv(c *config, env []string) error {
	vars := map[string]string{}
	for _, kv := range env {
		key, text, _ := strings.Cut(kv, "=")
		if _, dup := vars[key]; !dup && strings.HasPrefix(key, "RLSERVER_") {
			vars[key] = text // the first wins, as with os.Getenv
		}
	}
	for _, s := range c.set {
		text, ok := vars[envName(s.name)]
		if !ok || s.from&fromEnv == 0 {
			continue
		}
		delete(vars, envName(s.name))
		if err := s.set(text, source{kind: fromEnv}); err != nil {
			return err
		}
	}
	for _, key := range slices.Sorted(maps.Keys(vars)) {
		w := fmt.Sprintf("environment variable %s is not a setting; ignored", key)
		name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(key, "RLSERVER_"), "_", "-"))
		if s := c.set.lookup(name); s != nil {
			w = fmt.Sprintf("environment variable %s ignored: --%s is taken from the command line only", key, name)
		} else if near := c.set.closest(name, fromEnv); near != "" {
			w += fmt.Sprintf(" (did you mean %s?)", envName(near))
		}
		c.warnings = append(c.warnings, w)
	}
	return nil
}

// applyFile applies the configuration file at path: a YAML mapping of
// setting names to values. Unknown names, repeated names and values that
// are not single scalars are errors naming the file and line.
func applyFile(set settings, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	top, err := yamldoc.Parse(data)
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if top == nil {
		return nil // an empty file sets nothing
	}
	at := func(n *yaml.Node) string { return fmt.Sprintf("config file %s line %d", path, n.Line) }
	if top.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: expected settings as name: value lines (data-dir: /data)", at(top))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		s := set.lookup(k.Value)
		switch {
		case s == nil:
			msg := fmt.Sprintf("%s: unknown setting '%s'", at(k), k.Value)
			if near := set.closest(k.Value, fromFile); near != "" {
				msg += fmt.Sprintf(" (did you mean '%s'?)", near)
			}
			return errors.New(msg)
		case s.from&fromFile == 0:
			return fmt.Errorf("%s: '%s' cannot be set in the configuration file (only as --%s)", at(k), k.Value, k.Value)
		case seen[k.Value] != 0:
			return fmt.Errorf("%s: '%s' given twice (first on line %d)", at(k), k.Value, seen[k.Value])
		case v.Kind != yaml.ScalarNode:
			return fmt.Errorf("%s: '%s' takes a single value", at(v), k.Value)
		}
		seen[k.Value] = k.Line
		text := v.Value
		if v.Tag == "!!null" {
			text = ""
		}
		if err := s.set(text, source{kind: fromFile, file: at(k)}); err != nil {
			return err
		}
	}
	return nil
}
