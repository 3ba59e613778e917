package service

import (
	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

// The local-budget operations; see Grant and GiveBack.
const (
	Acquire = keyspace.Acquire
	Refund  = keyspace.Refund
)

// Grant prepares an Acquire of up to n units of key under the rule named
// rule, for a Session to batch or a DB to apply: the shard grants as many
// as the key can give at once (between 0 and n; never more than the rule's
// capacity, so n may be any positive count) and spends them, and reports
// the grant's instant in Op.At for GiveBack. key is borrowed until the
// operation has run.
func (s *Service) Grant(key, rule []byte, n int64) (Op, error) {
	r := s.cfg.Rules.Load().Get(rule)
	if r == nil {
		return Op{}, rules.UnknownRule(string(rule))
	}
	if n < 1 {
		return Op{}, &CountError{What: "count", Value: n}
	}
	return Op{Kind: Acquire, Rule: r, Key: key, Cost: n}, nil
}

// GiveBack prepares a Refund of up to n units of key under rule, granted
// at the instant at (a Grant's Op.At, ns since the Unix epoch) and not
// used. The shard takes back only what is still counted against the key
// from that grant (algorithms.Refund), so a refund never lets the key
// admit more than its limit for the units actually used.
func (s *Service) GiveBack(key, rule []byte, n, at int64) (Op, error) {
	r := s.cfg.Rules.Load().Get(rule)
	if r == nil {
		return Op{}, rules.UnknownRule(string(rule))
	}
	if n < 1 {
		return Op{}, &CountError{What: "count", Value: n}
	}
	if at < 1 {
		return Op{}, &CountError{What: "granted_at_ns", Value: at}
	}
	return Op{Kind: Refund, Rule: r, Key: key, Cost: n, At: at}, nil
}
