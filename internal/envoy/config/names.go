package config

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rules"
)

// RulePrefix begins the name of every rule the Envoy configuration
// compiles to, so they are told apart from the operator's own rules (RESP's
// RL.RULE LIST shows them all).
const RulePrefix = "envoy:"

// OverridePrefix starts the names of the rules of limit overrides (see
// OverrideDef).
const OverridePrefix = RulePrefix + "override:"

// Rule names. A rule's name depends only on where its descriptor sits in
// the configuration — the domain and the (key, value) of each level, values
// as written ("" for key-only, "prefix*" for wildcards) — never on its
// numbers. So a reload that changes a limit, a window or a burst keeps the
// rule, and the budget every key has spent carries over (rescaled, as
// RL.RULE SET does); a changed algorithm starts the keys fresh; a
// descriptor moved elsewhere in the tree is a new rule.
//
// The name is RulePrefix, a readable part (the domain and the descriptor's
// StatsKey with every byte outside A-Z a-z 0-9 _ . : - turned into '_', cut
// to 41 bytes), a colon, and 16 hex digits of the 64-bit FNV-1a hash of the
// exact path (each string length-prefixed, so no two paths encode alike):
//
//	envoy:rl.remote_address:7c4cb8580f66e84a
//	envoy:rl.path__api__.method_GET:22cdf919bd769ca2
//
// which is at most 64 bytes from rules' alphabet. The readable part is for
// people; the hash makes the name unique, and Build refuses the (2^-64-
// unlikely) collision rather than let two descriptors share a rule.

// ruleName returns the rule name of the descriptor at path (outermost
// first) in domain; statsKey is the descriptor's Node.StatsKey.
func ruleName(domain string, path []entryKey, statsKey string) string {
	h := fnv.New64a()
	var n [binary.MaxVarintLen64]byte
	write := func(s string) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	write(domain)
	for _, e := range path {
		write(e.key)
		write(e.value)
	}
	const readableMax = 64 - len(RulePrefix) - 1 - 16
	readable := []byte(domain + "." + statsKey)
	if len(readable) > readableMax {
		readable = readable[:readableMax]
	}
	for i, c := range readable {
		if !nameByte(c) {
			readable[i] = '_'
		}
	}
	return fmt.Sprintf("%s%s:%016x", RulePrefix, readable, h.Sum64())
}

func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-'
}

// Override is a request's own limit (RateLimitDescriptor.limit), which
// replaces the configuration's for that descriptor.
type Override struct {
	RequestsPerUnit uint32
	Unit            Unit   // UnitSecond … UnitYear (the request's unit type has no week)
	Multiplier      uint32 // ≥ 1
}

// Window is the override's window.
func (o Override) Window() time.Duration { return o.Unit.Duration() * time.Duration(o.Multiplier) }

// OverrideDef returns the rule an override is decided under: a fixed window
// (envoyproxy/ratelimit's only algorithm) of the override's numbers, named
// after them — "envoy:override:<requests>:<unit>", or with a multiplier
// "envoy:override:<requests>:<multiplier>x<unit>" — so every descriptor that
// asks for the same override shares the rule (each key still has its own
// counter). It refuses what no rule can hold, including requests_per_unit 0
// (the caller denies such a descriptor without a rule).
func OverrideDef(o Override) (rules.Def, error) {
	if o.Unit < UnitSecond || o.Unit > UnitYear {
		return rules.Def{}, fmt.Errorf("limit override: unit %d is not one of SECOND, MINUTE, HOUR, DAY, MONTH, YEAR", o.Unit)
	}
	if o.Multiplier < 1 {
		return rules.Def{}, fmt.Errorf("limit override: unit_multiplier must be at least 1")
	}
	name := OverridePrefix + strconv.FormatUint(uint64(o.RequestsPerUnit), 10) + ":"
	if o.Multiplier > 1 {
		name += strconv.FormatUint(uint64(o.Multiplier), 10) + "x"
	}
	name += unitName(o.Unit)
	if uint64(o.Multiplier) > uint64(rules.MaxWindow/o.Unit.Duration()) {
		return rules.Def{}, fmt.Errorf("limit override: window %d × %s is longer than 366 days", o.Multiplier, unitName(o.Unit))
	}
	if o.RequestsPerUnit < 1 || o.RequestsPerUnit > rules.MaxLimit {
		return rules.Def{}, fmt.Errorf("limit override: requests_per_unit %d is not from 1 to %d", o.RequestsPerUnit, rules.MaxLimit)
	}
	return rules.Def{Name: name, Algorithm: algorithms.FixedWindow, Limit: int64(o.RequestsPerUnit), Window: o.Window()}, nil
}

// ParseOverrideName returns the override whose rule OverrideDef names
// name, and false for any other name (not in OverrideDef's canonical form,
// or naming numbers no rule can hold). A node that owns a key decides an
// override another node received by this name alone (cluster mode).
func ParseOverrideName(name string) (Override, bool) {
	rest, ok := strings.CutPrefix(name, OverridePrefix)
	if !ok {
		return Override{}, false
	}
	requests, unitPart, ok := strings.Cut(rest, ":")
	if !ok {
		return Override{}, false
	}
	n, err := strconv.ParseUint(requests, 10, 32)
	if err != nil {
		return Override{}, false
	}
	o := Override{RequestsPerUnit: uint32(n), Multiplier: 1}
	if m, unit, ok := strings.Cut(unitPart, "x"); ok {
		v, err := strconv.ParseUint(m, 10, 32)
		if err != nil {
			return Override{}, false
		}
		o.Multiplier, unitPart = uint32(v), unit
	}
	if o.Unit, ok = unitNames[unitPart]; !ok {
		return Override{}, false
	}
	// Only the canonical spelling: one override, one rule name.
	if def, err := OverrideDef(o); err != nil || def.Name != name {
		return Override{}, false
	}
	return o, true
}

func unitName(u Unit) string {
	for name, v := range unitNames {
		if v == u {
			return name
		}
	}
	return "UNKNOWN"
}
