package main

import (
	"fmt"
	"io"
	"strings"
)

// printHelp writes --help: every setting by group, each default once and as
// one would write it.
func printHelp(w io.Writer, set settings) {
	fmt.Fprintf(w, `rlserver %s: a rate-limiter server that speaks the Redis protocol.

Usage: rlserver [flags]

Every flag can also be set by the environment variable RLSERVER_<NAME>
(--data-dir: RLSERVER_DATA_DIR) or in the YAML file given by --config
(data-dir: /data). The command line wins over the environment, and the
environment over the file. Durations are whole seconds (60) or Go durations
(1m, 500ms); sizes are bytes, or with a unit (64kb, 512mb, 1gb).
`, version)
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g)
		for _, s := range set {
			if s.group == g {
				fmt.Fprintf(w, "  %s\n", flagColumn(s))
				for _, line := range wrap(s.usage+defaultText(s), helpWidth-helpIndent) {
					fmt.Fprintf(w, "%*s%s\n", helpIndent, "", line)
				}
			}
		}
	}
}

// --help's layout: each flag on its line, its description under it,
// indented and wrapped.
const (
	helpWidth  = 80
	helpIndent = 8
)

// wrap breaks text into lines of at most width bytes at spaces (a longer
// word gets a line of its own).
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) > width:
			lines = append(lines, line)
			line = word
		default:
			line += " " + word
		}
	}
	return append(lines, line)
}

func flagColumn(s *setting) string {
	if s.arg == "" {
		return "--" + s.name
	}
	return "--" + s.name + " " + s.arg
}

// defaultText is " (default X)" for --help, or "" when there is nothing to
// say (no default, or false).
func defaultText(s *setting) string {
	switch {
	case s.defNote != "":
		return fmt.Sprintf(" (default: %s; here %s)", s.defNote, s.def)
	case s.def == "" || s.def == "false" || strings.Contains(s.usage, "(default"):
		return ""
	}
	return fmt.Sprintf(" (default %s)", s.def)
}
