package snapshot

import (
	"encoding/binary"
	"time"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

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

// kindOverrides is the record of per-key overrides (format version 3):
//
//	OVERRIDES: count (uvarint), then per override: rule (uvarint index into
//	           RULES), key (string), limit, window (ns), burst (uvarints),
//	           expiry (varint, unix ns)
//
// Overrides are saved apart from the keys' states, which are saved under
// their rules' numbers (keyspace.Map.Export rescales an overridden key's
// state): Restore loads the keys, then sets the overrides again, which
// rescales each key back. Any number of OVERRIDES records may come among the
// KEYS and PLAIN records.
const kindOverrides = 20

// SavedOverride is one override as saved.
type SavedOverride struct {
	Rule     int // index into Snapshot.Rules
	Key      string
	Limit    int64
	Window   int64 // ns
	Burst    int64
	ExpireAt int64 // unix ns
}

// def returns the override's numbers as a rule definition under saved.
func (o SavedOverride) def(saved Rule) rules.Def {
	return rules.Def{Name: saved.Name, Algorithm: saved.Algorithm, Limit: o.Limit, Window: time.Duration(o.Window), Burst: o.Burst}
}

// addOverrides writes the overrides in list (rules named by their position
// in the saved set; those of rules not saved are left out) as OVERRIDES
// records, each within maxEntries.
func (e *encoder) addOverrides(index map[string]int, list []keyspace.Override) {
	var buf []byte
	n := 0
	flush := func() {
		if n > 0 {
			e.record(kindOverrides, append(binary.AppendUvarint(nil, uint64(n)), buf...))
		}
		buf, n = buf[:0], 0
	}
	for _, o := range list {
		i, ok := index[o.Def.Name]
		if !ok || e.rules[i].Algorithm != o.Def.Algorithm {
			continue
		}
		entry := appendOverride(nil, SavedOverride{Rule: i, Key: o.Key, Limit: o.Def.Limit, Window: int64(o.Def.Window),
			Burst: o.Def.Burst, ExpireAt: o.ExpireAt})
		if len(buf)+len(entry) > maxEntries {
			flush()
		}
		buf = append(buf, entry...)
		n++
	}
	flush()
}

// appendOverride appends one override's entry of an OVERRIDES record.
func appendOverride(b []byte, o SavedOverride) []byte {
	b = binary.AppendUvarint(b, uint64(o.Rule))
	b = appendString(b, o.Key)
	b = binary.AppendUvarint(b, uint64(o.Limit))
	b = binary.AppendUvarint(b, uint64(o.Window))
	b = binary.AppendUvarint(b, uint64(o.Burst))
	return binary.AppendVarint(b, o.ExpireAt)
}

// decodeOverrides decodes an OVERRIDES record, checking each override's
// numbers as a rule's under its saved rule's algorithm, and hands each to
// v.override.
func decodeOverrides(r *reader, h *header, v visitor) error {
	n := r.count(6) // an override takes at least 6 bytes
	for range n {
		ri := r.uvarint()
		if r.err == nil && ri >= uint64(len(h.rules)) {
			return corrupt("override refers to rule %d of %d", ri, len(h.rules))
		}
		o := SavedOverride{Rule: int(ri), Key: string(r.bytes()), Limit: r.int63(), Window: r.int63(), Burst: r.int63(), ExpireAt: r.varint()}
		if r.err != nil {
			break
		}
		if err := o.def(h.rules[ri]).Validate(); err != nil {
			return corrupt("override of key %q under rule %q: %v", o.Key, h.rules[ri].Name, err)
		}
		if o.ExpireAt <= 0 {
			return corrupt("override of key %q under rule %q expires at %d", o.Key, h.rules[ri].Name, o.ExpireAt)
		}
		if v.override != nil {
			v.override(o)
		}
	}
	return r.err
}

// restoreOverrides sets the saved overrides again under the live rules
// (those whose rule is gone or changed algorithm are dropped, as their
// keys are), after the keys are loaded.
func restoreOverrides(saved []Rule, list []SavedOverride, store *rules.Store, keys *keyspace.Map, now int64) (int, error) {
	set := store.Load()
	var out []keyspace.RestoreOverride
	for _, o := range list {
		d := saved[o.Rule]
		live := set.Get([]byte(d.Name))
		if live == nil || live.Algorithm != d.Algorithm {
			continue
		}
		out = append(out, keyspace.RestoreOverride{Rule: live, Override: keyspace.Override{Def: o.def(d), ExpireAt: o.ExpireAt, Key: o.Key}})
	}
	return keys.RestoreOverrides(out, now)
}
