package snapshot

import "github.com/rlserver/rlserver/internal/rules"

// A rule's flags, saved after its numbers from version 3 on.
const (
	flagShadow   = 1 << iota // the rule is in shadow mode
	allRuleFlags = flagShadow
)

// ruleFlags returns d's flags as saved.
func ruleFlags(d Rule) uint64 {
	if d.Shadow {
		return flagShadow
	}
	return 0
}

// setRuleFlags sets d's mode from its saved flags, refusing flags this
// version does not know (a file from a later rlserver, or corruption).
func setRuleFlags(d *rules.Def, flags uint64) error {
	if flags&^allRuleFlags != 0 {
		return corrupt("rule %q: unknown flags %#x", d.Name, flags)
	}
	d.Shadow = flags&flagShadow != 0
	return nil
}
