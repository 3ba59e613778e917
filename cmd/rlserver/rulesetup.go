package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/service"
	"github.com/rlserver/rlserver/internal/snapshot"
)

// ruleOrigin is the rule set to start with and where each rule came from.
type ruleOrigin struct {
	defs   []rules.Def
	source string // for INFO and logs: "built-in defaults", "snapshot", the file, or "snapshot + file"
	// Rule names by origin.
	fromFile, fromSnapshot, fromDefaults []string
	// deleted are the snapshot's rules that --rules-authoritative dropped.
	deleted []string
}

// startRules picks the rules to start with. A snapshot holds every rule the
// server had (including those made with RL.RULE SET), so after a restart
// the snapshot's rules are the base and a rules file is applied over them;
// with --rules-authoritative the file's rules are all the rules. With no
// snapshot: the file's rules, or the built-in defaults.
// hasSnap says whether a snapshot was found; saved are its rules.
func startRules(cfg *config, hasSnap bool, saved []rules.Def) (ruleOrigin, error) {
	var file []rules.Def
	if cfg.rulesPath != "" {
		var err error
		if file, err = rules.LoadFile(cfg.rulesPath); err != nil {
			return ruleOrigin{}, err
		}
		if managed := managedDefs(cfg, file); len(managed) > 0 {
			name := managed[0].Name
			return ruleOrigin{}, fmt.Errorf("%s: %w", cfg.rulesPath,
				&service.ReservedRuleError{Name: name, Prefix: service.ReservedPrefix(cfg.reservedRulePrefixes(), name)})
		}
	}
	var o ruleOrigin
	switch {
	case !hasSnap && cfg.rulesPath == "":
		o.defs, o.source = rules.Defaults(), "built-in defaults"
		o.fromDefaults = defNames(o.defs)
	case !hasSnap:
		o.defs, o.source = file, cfg.rulesPath
		o.fromFile = defNames(file)
	case cfg.rulesPath == "":
		o.defs, o.source = saved, "snapshot"
		o.fromSnapshot = defNames(saved)
	case cfg.rulesAuthoritative:
		// The file's rules are all the operator's rules; the managed ones
		// the snapshot holds (the Envoy configuration's) stay, with their
		// counters, until their front end publishes its own.
		managed := managedDefs(cfg, saved)
		o.defs, o.source = append(slices.Clip(file), managed...), cfg.rulesPath
		o.fromFile = defNames(file)
		o.fromSnapshot = defNames(managed)
		o.deleted = without(without(defNames(saved), o.fromFile), o.fromSnapshot)
	default:
		o.defs, o.source = snapshot.MergeRules(saved, file), "snapshot + "+cfg.rulesPath
		o.fromFile = defNames(file)
		o.fromSnapshot = without(defNames(saved), o.fromFile)
	}
	return o, nil
}

// logAttrs describes the origin for the start-up log.
func (o ruleOrigin) logAttrs() []any {
	attrs := []any{"source", o.source, "count", len(o.defs)}
	for _, g := range []struct {
		key   string
		names []string
	}{{"from_file", o.fromFile}, {"from_snapshot", o.fromSnapshot}, {"built_in", o.fromDefaults}, {"deleted", o.deleted}} {
		if len(g.names) > 0 {
			attrs = append(attrs, g.key, nameList(g.names))
		}
	}
	if len(o.fromFile) > 0 && len(o.fromSnapshot) > 0 {
		attrs = append(attrs, "note", "rules from the snapshot that the file does not define are kept; --rules-authoritative deletes them")
	}
	return attrs
}

// managedDefs returns the defs whose names a front end manages (see
// config.reservedRulePrefixes).
func managedDefs(cfg *config, defs []rules.Def) []rules.Def {
	var out []rules.Def
	for _, d := range defs {
		if service.ReservedPrefix(cfg.reservedRulePrefixes(), d.Name) != "" {
			out = append(out, d)
		}
	}
	return out
}

func defNames(defs []rules.Def) []string {
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	slices.Sort(names)
	return names
}

// without returns the names in all that are not in drop.
func without(all, drop []string) []string {
	var out []string
	for _, n := range all {
		if !slices.Contains(drop, n) {
			out = append(out, n)
		}
	}
	return out
}

// nameList joins names for a log line, at most 20 of them.
func nameList(names []string) string {
	const most = 20
	if len(names) <= most {
		return strings.Join(names, ",")
	}
	return fmt.Sprintf("%s,… (%d more)", strings.Join(names[:most], ","), len(names)-most)
}

// reloadRules re-reads the rules file and applies it over the current rules
// (or, with --rules-authoritative, makes it the whole set); on any error
// the current rules stay. It serves SIGHUP and RL.RULE RELOAD.
func (n *node) reloadRules() error {
	path := n.cfg.rulesPath
	r, err := n.svc.ReloadRules()
	if err != nil {
		n.log.Error("rules reload failed; keeping the current rules", "path", path, "err", err)
		return err
	}
	attrs := []any{"path", path, "rules", r.Set.Len(), "version", r.Set.Version}
	if len(r.Deleted) > 0 {
		attrs = append(attrs, "deleted", nameList(r.Deleted))
	}
	n.log.Info("rules reloaded", attrs...)
	return nil
}
