// Package service holds rlserver's use cases: deciding requests against
// rules, deciding several as one, changing the rules (and bringing the
// keyspace up to date with every change), saving, and reporting. Every
// front end — the Redis protocol's commands, and any other way in — calls
// it; none reaches into the keyspace or repeats a validation.
//
// The keyspace is reached through a Handle: pooled (a Session, which
// batches a goroutine's operations into one message per shard) or held (a
// DB, while the caller has exclusive use of the shards: a transaction, a
// script). A use case that must work both ways takes a Handle.
//
// Errors are typed values (errors.go); the protocol layer words them.
package service

import (
	"bytes"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/snapshot"
)

// The keyspace types front ends work with. They are the keyspace's own
// (aliases), so a front end names them through this package and never
// imports the keyspace.
type (
	// Op is one operation on one key; see keyspace.Op.
	Op = keyspace.Op
	// OpKind is what an Op does.
	OpKind = keyspace.OpKind
	// Task is work on plain keys run by whoever has exclusive use of their
	// shards; see keyspace.Task.
	Task = keyspace.Task
	// DB is exclusive use of some shards' keys at one instant; see
	// keyspace.DB.
	DB = keyspace.DB
	// Handle is the keyspace as one request sees it: pooled or held.
	Handle = keyspace.Handle
	// Session is a pooled handle for one goroutine: it batches
	// operations into one message per shard. See keyspace.Dispatcher.
	Session = keyspace.Dispatcher
	// Stats is a view of the keyspace's counters.
	Stats = keyspace.Stats
	// RuleStats is one rule's counters in Stats.
	RuleStats = keyspace.RuleStats
	// Value is what a plain key holds; String the byte-string kind.
	Value  = keyspace.Value
	String = keyspace.String
)

// The operations.
const (
	Allow = keyspace.Allow
	Peek  = keyspace.Peek
	Reset = keyspace.Reset
	Run   = keyspace.Run
)

// MaxGroup is the most key rule pairs decided as one.
const MaxGroup = keyspace.MaxGroup

// Config is what a Service works with.
type Config struct {
	Rules *rules.Store
	Keys  *keyspace.Map
	// Snapshots takes snapshots; nil when persistence is off.
	Snapshots *snapshot.Manager
	// RulesFile is the rules file that ReloadRules re-reads; "" when the
	// rules did not come from one. RulesAuthoritative makes the file's
	// rules all the rules at every reload (the others are deleted).
	RulesFile          string
	RulesAuthoritative bool
	// ReservedRulePrefixes are the name prefixes of managed rules (see
	// Managed): front ends own them, the operator's rule changes and
	// rules file may not use them.
	ReservedRulePrefixes []string
}

// Service is rlserver's use cases. It is safe for concurrent use.
type Service struct {
	cfg Config
}

// New returns the Service over cfg's parts.
func New(cfg Config) *Service { return &Service{cfg: cfg} }

// NewSession returns a pooled handle for one goroutine (a connection's, or
// an event loop's for all of its connections).
func (s *Service) NewSession() *Session { return s.cfg.Keys.NewDispatcher() }

// Rules returns the current rule set.
func (s *Service) Rules() *rules.Set { return s.cfg.Rules.Load() }

// Shards returns the number of shards.
func (s *Service) Shards() int { return s.cfg.Keys.Len() }

// Decision prepares one decision — Allow, Peek or Reset of key under the
// rule named rule, spending cost units — for a Session to batch or a DB to
// apply: it looks the rule up and checks the cost against it. cost is
// ignored for Reset. key is borrowed until the operation has run.
func (s *Service) Decision(kind OpKind, key, rule []byte, cost int64) (Op, error) {
	r := s.cfg.Rules.Load().Get(rule)
	if r == nil {
		return Op{}, rules.UnknownRule(string(rule))
	}
	if kind == Reset {
		return Op{Kind: Reset, Rule: r, Key: key}, nil
	}
	if err := s.checkCost(cost, r); err != nil {
		return Op{}, err
	}
	return Op{Kind: kind, Rule: r, Key: key, Cost: cost}, nil
}

// checkCost refuses a cost below 1, and one above the rule's capacity: such
// a request could never be admitted, so the caller gets an error it can fix
// rather than a denial it would retry forever. A cost above the rule's
// capacity passes when an override of the rule has that much (RL.OVERRIDE):
// the shard then checks the key's own numbers (keyspace.CapacityError).
func (s *Service) checkCost(cost int64, r *rules.Rule) error {
	if cost < 1 {
		return &CostError{Cost: cost}
	}
	if cost > r.Params.Capacity && cost > s.cfg.Keys.OverrideCapacity(r) {
		return &CostError{Cost: cost, Capacity: r.Params.Capacity, Rule: r.Name}
	}
	return nil
}

// Group prepares AllowAll's operations: pairs holds key, rule, key, rule…
// and every pair spends cost. The operations are appended to dst (reuse
// its memory) and returned. At most MaxGroup pairs, each pair once.
func (s *Service) Group(dst []Op, pairs [][]byte, cost int64) ([]Op, error) {
	if len(pairs)%2 != 0 || len(pairs) == 0 {
		return dst, ErrOddPairs
	}
	if len(pairs)/2 > MaxGroup {
		return dst, ErrTooManyPairs
	}
	set := s.cfg.Rules.Load()
	start := len(dst)
	for i := 0; i < len(pairs); i += 2 {
		key, name := pairs[i], pairs[i+1]
		r := set.Get(name)
		if r == nil {
			return dst, rules.UnknownRule(string(name))
		}
		if err := s.checkCost(cost, r); err != nil {
			return dst, err
		}
		if err := checkDistinct(dst[start:], key, r.Name); err != nil {
			return dst, err
		}
		dst = append(dst, Op{Kind: Allow, Rule: r, Key: key, Cost: cost})
	}
	return dst, nil
}

// checkDistinct refuses a group naming the pair (key, rule) twice: ops
// are the group's so far.
func checkDistinct(ops []Op, key []byte, rule string) error {
	for i := range ops {
		if ops[i].Rule.Name == rule && bytes.Equal(ops[i].Key, key) {
			return &DuplicatePairError{Key: string(key), Rule: rule}
		}
	}
	return nil
}

// AllowAll decides ops (from Group) as one request: all charged, or none.
func (s *Service) AllowAll(h Handle, ops []Op) (bool, error) { return h.AllowAll(ops) }

// Stats gathers the keyspace's counters through h (inside a transaction,
// h is the held DB: asking the shards by message would wait forever).
func (s *Service) Stats(h Handle) Stats { return h.Stats() }

// KeyspaceStats gathers the keyspace's counters by asking every shard; for
// reporting from outside any request (metrics), never inside a transaction.
func (s *Service) KeyspaceStats() Stats { return s.cfg.Keys.Stats() }

// Flush drops every key, limiter state and plain keys alike; the rules
// stay.
func (s *Service) Flush(h Handle) { h.Flush() }
