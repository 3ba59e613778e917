package main

import (
	"fmt"
	"strings"
)

// A setting is one thing an operator configures. It is set, by one rule,
// from the flag --NAME, the environment variable RLSERVER_NAME (upper case,
// dashes as underscores) or the key NAME of the --config file; the command
// line wins over the environment, the environment over the file, the file
// over the default.
type setting struct {
	name  string
	group string // --help's heading
	arg   string // --help's placeholder for the value ("" for booleans)
	usage string
	// def is the default as one would write it (60s, 512mb); it is parsed
	// like any other value and shown as written by --help and the docs.
	def string
	// defNote is shown by --help instead of def when the default is
	// computed at start (the number of shards).
	defNote string
	// secret values are never shown: not in errors, logs, or
	// /debug/pprof/cmdline.
	secret bool
	// from limits where the setting may come from: one-shot modes (--ping,
	// --version) only from the command line, --config not from the file.
	from  sourceKind
	value value

	raw string // the text that set it, as given (or def)
	src source // where raw came from; zero: the default
}

// sourceKind is a bit set of the places a setting can come from.
type sourceKind uint8

const (
	fromFlag sourceKind = 1 << iota
	fromEnv
	fromFile
	fromAnywhere = fromFlag | fromEnv | fromFile
)

// source says where a setting's text came from, for messages.
type source struct {
	kind sourceKind // 0: the default
	file string     // fromFile: the file and line, "rlserver.yaml line 3"
}

// envName is the environment variable that sets the setting called name.
func envName(name string) string {
	return "RLSERVER_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// shown is the setting's text as it may appear in messages.
func (s *setting) shown() string {
	if s.secret && s.raw != "" {
		return "***"
	}
	return s.raw
}

// where names the setting and its text as the operator gave them:
// "--timeout 5x", "RLSERVER_TIMEOUT=5x", "rlserver.yaml line 3: timeout: 5x",
// or "--timeout (default 0)".
func (s *setting) where() string {
	switch s.src.kind {
	case fromFlag:
		return fmt.Sprintf("--%s %s", s.name, s.shown())
	case fromEnv:
		return fmt.Sprintf("%s=%s", envName(s.name), s.shown())
	case fromFile:
		return fmt.Sprintf("%s: %s: %s", s.src.file, s.name, s.shown())
	}
	return fmt.Sprintf("--%s (default %s)", s.name, s.shown())
}

// set parses text into the setting, from src; an error names the setting
// and echoes the text as given.
func (s *setting) set(text string, src source) error {
	if src.kind != 0 && s.from&src.kind == 0 {
		// A guard: each caller checks first, to say what to do instead.
		return fmt.Errorf("%s cannot be set there", s.name)
	}
	s.raw, s.src = text, src
	if err := s.value.Set(text); err != nil {
		return fmt.Errorf("%s: %v", s.where(), err)
	}
	return nil
}

// settings is every setting, in --help's order.
type settings []*setting

func (ss settings) lookup(name string) *setting {
	for _, s := range ss {
		if s.name == name {
			return s
		}
	}
	return nil
}

// closest returns the name among ss nearest to name (allowing about one
// typo in three letters, or a unique prefix), or "".
func (ss settings) closest(name string, allowed sourceKind) string {
	best, bestDist := "", max(1, len(name)/3)+1
	var prefixed []string
	for _, s := range ss {
		if s.from&allowed == 0 {
			continue
		}
		if d := editDistance(name, s.name); d < bestDist {
			best, bestDist = s.name, d
		}
		if len(name) >= 3 && strings.HasPrefix(s.name, name) {
			prefixed = append(prefixed, s.name)
		}
	}
	if best == "" && len(prefixed) == 1 {
		return prefixed[0]
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
