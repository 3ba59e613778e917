package service

import (
	"context"
	"strings"
	"sync"
	"unsafe"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rules"
)

// Managed rules are a front end's own part of the rule store: every rule
// whose name starts with a reserved prefix (Config.ReservedRulePrefixes),
// published and replaced as a whole by that front end from its own
// configuration — the Envoy configuration's descriptors, say. They are
// ordinary rules to the keyspace, so their keys live in the same shards and
// are read and reset through RESP like any other; what is reserved is who
// writes them: the operator's RL.RULE SET, RL.RULE DEL and rules file
// refuse a reserved name, and a managed replace never touches a rule
// outside its prefix. So a reload of either side can never delete or change
// the other's rules, nor race with it (the store applies each replace under
// its lock).
type Managed struct {
	svc    *Service
	prefix string
	// sessions are pooled handles: a Session belongs to one goroutine at a
	// time, and the front end decides on many goroutines at once.
	sessions sync.Pool
}

// Managed returns the managed rules under prefix, which must be one of
// Config.ReservedRulePrefixes.
func (s *Service) Managed(prefix string) (*Managed, error) {
	if prefix == "" || s.reservedPrefix(prefix) != prefix {
		return nil, &ReservedRuleError{Name: prefix}
	}
	m := &Managed{svc: s, prefix: prefix}
	m.sessions.New = func() any { return s.NewSession() }
	return m, nil
}

// reservedPrefix returns the reserved prefix name starts with, or "".
func (s *Service) reservedPrefix(name string) string {
	return ReservedPrefix(s.cfg.ReservedRulePrefixes, name)
}

// ReservedPrefix returns the prefix among reserved that the rule name
// starts with, or "": the one test of whether a rule is managed, for the
// service and for the program's start-up (before the service exists).
func ReservedPrefix(reserved []string, name string) string {
	for _, p := range reserved {
		if strings.HasPrefix(name, p) {
			return p
		}
	}
	return ""
}

// checkUnreserved refuses a rule the operator may not write: one whose name
// has a reserved prefix.
func (s *Service) checkUnreserved(name string) error {
	if p := s.reservedPrefix(name); p != "" {
		return &ReservedRuleError{Name: name, Prefix: p}
	}
	return nil
}

// unreserved reports whether the operator owns the rule named name.
func (s *Service) unreserved(name string) bool { return s.reservedPrefix(name) == "" }

// SetRules publishes defs as every rule under the prefix, replacing those
// published before as one change, and brings the keyspace up to date: a
// changed limit, window or burst keeps the budget keys have spent
// (rescaled); a changed algorithm starts the rule's keys fresh; a rule no
// longer in defs is deleted with its keys. Every name must have the prefix.
// On error nothing changes. It messages every shard, so it must not be
// called while holding shards.
func (m *Managed) SetRules(defs []rules.Def) error {
	if _, err := m.svc.cfg.Rules.ReplaceOwned(defs, m.owns); err != nil {
		return err
	}
	m.svc.cfg.Keys.Reconcile()
	return nil
}

func (m *Managed) owns(name string) bool { return strings.HasPrefix(name, m.prefix) }

// Check is one decision for Managed.Decide: spend Cost units of the rule
// named Rule (a managed one) on Key, or with Peek only look.
type Check struct {
	Key, Rule string
	// Cost is 1 to the rule's capacity (a larger one could never pass, and
	// is refused with a *CostError).
	Cost int64
	// Peek decides without charging or creating state, as RL.PEEK does.
	Peek bool
}

// Decide decides checks at one instant per shard and returns one Decision
// per check, in order. With allOrNothing the checks are one group, as
// RL.ALLOWALL decides it: if every check admits, all are charged; if any
// denies, none is, and each Decision describes its key uncharged, Allowed
// saying whether that check alone would have been admitted. A group holds
// at most MaxGroup checks, none a Peek, no (Key, Rule) twice. Without
// allOrNothing each check is decided and charged on its own, checks on one
// key in order. An error fails the whole call: nothing was charged by a
// group; some checks of another call may have been.
func (m *Managed) Decide(ctx context.Context, checks []Check, allOrNothing bool) ([]algorithms.Decision, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sess := m.sessions.Get().(*Session)
	defer m.sessions.Put(sess)
	defer sess.Reset()
	if allOrNothing {
		return m.decideGroup(sess, checks)
	}
	for _, c := range checks {
		kind := Allow
		if c.Peek {
			kind = Peek
		}
		op, err := m.op(kind, c)
		if err != nil {
			return nil, err
		}
		sess.Add(op)
	}
	sess.Run()
	out := make([]algorithms.Decision, len(checks))
	for i := range checks {
		op := sess.Op(i) // tickets are 0… in the order added, after Reset
		if op.Err != nil {
			return nil, op.Err
		}
		out[i] = op.Decision
	}
	return out, nil
}

func (m *Managed) decideGroup(sess *Session, checks []Check) ([]algorithms.Decision, error) {
	if len(checks) > MaxGroup {
		return nil, ErrTooManyPairs
	}
	ops := make([]Op, 0, len(checks))
	for _, c := range checks {
		if c.Peek {
			return nil, ErrPeekInGroup
		}
		op, err := m.op(Allow, c)
		if err != nil {
			return nil, err
		}
		if err := checkDistinct(ops, op.Key, op.Rule.Name); err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	if _, err := m.svc.AllowAll(sess, ops); err != nil {
		return nil, err
	}
	out := make([]algorithms.Decision, len(ops))
	for i := range ops {
		out[i] = ops[i].Decision
	}
	return out, nil
}

// op prepares one check as Decision does, refusing a rule outside the
// prefix as unknown: a front end decides only its own rules.
func (m *Managed) op(kind OpKind, c Check) (Op, error) {
	if !m.owns(c.Rule) {
		return Op{}, rules.UnknownRule(c.Rule)
	}
	// Both are only read: the key until the operation has run (the shard
	// copies what it keeps), the rule's name to look it up; c outlives the
	// call. Viewing the strings as bytes saves two copies per check.
	return m.svc.Decision(kind, bytesOf(c.Key), bytesOf(c.Rule), c.Cost)
}

// bytesOf views s as a byte slice, which must never be written.
func bytesOf(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
