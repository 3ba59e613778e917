package shards

import (
	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rules"
)

// shard owns the state of the keys routed to it. Every field below inbox is
// touched only by the goroutine running s.run.
type shard struct {
	inbox  chan message
	exited chan struct{}
	clock  func() int64
	rules  *rules.Store

	tables          map[uint64]*table // by rule ID
	allowed, denied uint64            // decisions since start, all rules
}

// table holds one rule's keys on one shard.
type table struct {
	// rule is the newest revision of the rule this shard has applied to
	// states: every state in the table is kept under rule.Params.
	rule            *rules.Rule
	states          map[string]*algorithms.State
	allowed, denied uint64
}

func (s *shard) run() {
	defer close(s.exited)
	for msg := range s.inbox {
		switch {
		case msg.batch != nil:
			now := s.clock()
			for i := range msg.batch.Ops {
				s.apply(&msg.batch.Ops[i], now)
			}
			msg.batch.reply <- msg.batch
		case msg.group != nil:
			g := msg.group
			g.allowed = decideAll(g.ops, g.owners, s.clock())
			g.done <- struct{}{}
		case msg.hold != nil:
			// Lend this shard's state to the coordinator: it reads and
			// writes it from its own goroutine until it releases us.
			// The channel operations order its accesses after ours and
			// ours after its.
			msg.hold.held <- struct{}{}
			<-msg.hold.release
		default:
			msg.fn(s)
			msg.ack <- struct{}{}
		}
	}
}

func (s *shard) apply(op *Op, now int64) {
	t := s.table(op.Rule, now)
	p := op.Rule.Params
	var st *algorithms.State
	if t != nil {
		p = t.rule.Params
		st = t.states[string(op.Key)] // no allocation: the compiler converts in place for lookups
	}
	switch op.Kind {
	case Allow:
		var cur algorithms.State
		if st != nil {
			cur = *st
		}
		next, d := algorithms.Decide(p, cur, now, op.Cost)
		op.Decision = d
		switch {
		case st != nil:
			*st = next
		case t != nil && d.Allowed:
			stored := new(algorithms.State) // a new key: the one allocation a decision may make
			*stored = next
			t.states[string(op.Key)] = stored
		}
		if t == nil {
			return // the rule was deleted while this request was in flight
		}
		if d.Allowed {
			s.allowed++
			t.allowed++
		} else {
			s.denied++
			t.denied++
		}
	case Peek:
		var cur algorithms.State
		if st != nil {
			cur = *st
		}
		op.Decision = algorithms.Peek(p, cur, now, op.Cost)
	case Reset:
		op.Existed = st != nil
		if st != nil {
			delete(t.states, string(op.Key))
		}
	}
}

// table returns the table for rule, creating it if the rule is still live
// and rescaling it if the rule's numbers changed since the shard last saw it.
// It returns nil when the rule was deleted (or its algorithm changed) after
// the request resolved it: the request is then answered as if it came just
// before the change, against a fresh key, and nothing is stored.
func (s *shard) table(rule *rules.Rule, now int64) *table {
	t := s.tables[rule.ID]
	if t == nil {
		live := s.rules.Load().ByID(rule.ID)
		if live == nil {
			return nil
		}
		t = &table{rule: live, states: make(map[string]*algorithms.State)}
		s.tables[rule.ID] = t
	}
	if rule.Rev > t.rule.Rev {
		t.rescale(rule, now)
	}
	return t
}

// reconcile drops tables whose rule is gone and rescales those whose rule
// changed, against the newest published rule set.
func (s *shard) reconcile() {
	set := s.rules.Load()
	now := s.clock()
	for id, t := range s.tables {
		live := set.ByID(id)
		switch {
		case live == nil:
			delete(s.tables, id)
		case live.Rev > t.rule.Rev:
			t.rescale(live, now)
		}
	}
}

// rescale converts every state in t to rule's new numbers.
func (t *table) rescale(rule *rules.Rule, now int64) {
	for _, st := range t.states {
		*st = algorithms.Rescale(t.rule.Params, rule.Params, *st, now)
	}
	t.rule = rule
}
