package service

import (
	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

// Override is one key's own numbers under a rule until an instant; see
// keyspace.Override.
type Override = keyspace.Override

// The overrides' operations.
const (
	SetOverride = keyspace.SetOverride
	GetOverride = keyspace.GetOverride
	DelOverride = keyspace.DelOverride
)

// Errors of overrides.
var (
	// ErrOverrideLimit: a shard holds as many overrides as it may.
	ErrOverrideLimit = keyspace.ErrOverrideLimit
)

// CapacityError refuses a cost above the capacity of a key's override.
type CapacityError = keyspace.CapacityError

// PutOverride gives key the numbers limit, window and burst (as an
// operator writes them, like a rule's; burst "" when not set) under the
// rule named rule until expireAt (ns since the Unix epoch), through h: the
// key's spent budget carries over, rescaled, and carries back when the
// override ends. The numbers are validated as a rule's with the rule's
// algorithm. It reports whether an override was replaced.
func (s *Service) PutOverride(h Handle, rule, key []byte, limit, window, burst string, expireAt int64) (bool, error) {
	r := s.cfg.Rules.Load().Get(rule)
	if r == nil {
		return false, rules.UnknownRule(string(rule))
	}
	def, err := rules.ParseDef(r.Name, r.Algorithm.String(), limit, window, burst)
	if err != nil {
		return false, err
	}
	op := Op{Kind: SetOverride, Rule: r, Key: key, Override: &Override{Def: def, ExpireAt: expireAt}}
	h.Apply(&op)
	return op.Existed, op.Err
}

// OverrideOf returns key's live override under rule, or nil.
func (s *Service) OverrideOf(h Handle, rule, key []byte) (*Override, error) {
	r := s.cfg.Rules.Load().Get(rule)
	if r == nil {
		return nil, rules.UnknownRule(string(rule))
	}
	op := Op{Kind: GetOverride, Rule: r, Key: key}
	h.Apply(&op)
	return op.Override, op.Err
}

// DeleteOverride ends key's override under rule at once (the key falls back
// to the rule's numbers, its spent budget kept) and reports whether it had
// one.
func (s *Service) DeleteOverride(h Handle, rule, key []byte) (bool, error) {
	r := s.cfg.Rules.Load().Get(rule)
	if r == nil {
		return false, rules.UnknownRule(string(rule))
	}
	op := Op{Kind: DelOverride, Rule: r, Key: key}
	h.Apply(&op)
	return op.Existed, op.Err
}

// Overrides lists the live overrides of the rule named rule (nil: of every
// rule), sorted by rule and key. It messages every shard, so it must not
// be called while holding shards.
func (s *Service) Overrides(rule []byte) ([]Override, error) {
	var r *rules.Rule
	if rule != nil {
		if r = s.cfg.Rules.Load().Get(rule); r == nil {
			return nil, rules.UnknownRule(string(rule))
		}
	}
	return s.cfg.Keys.Overrides(r), nil
}
