package keyspace

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rules"
)

// Overrides.
//
// An override replaces a rule's numbers (limit, window, burst; never the
// algorithm) for one key until an instant. It lives in the rule's table on
// the shard that owns the key, beside the key's state, so the one goroutine
// deciding the key also knows its numbers. The key's state is kept under
// the numbers in force: setting, replacing or ending an override rescales it
// (algorithms.Rescale, as a rule change does), so the budget already spent
// carries over both ways. A rule change leaves overridden keys alone; a
// rule deleted, or whose algorithm changed, takes its overrides with it.
//
// Expiry is exact: every access checks the instant first, so an override
// is never seen after it ends, and each tick ends those due (a heap by
// instant), so they are not held, or counted, long after.

// MaxOverridesPerShard bounds the overrides one shard holds, so no client
// can make the server hold unbounded memory with them; SetOverride beyond
// it fails with ErrOverrideLimit.
const MaxOverridesPerShard = 1 << 16

// ErrOverrideLimit is the error of an override set on a shard already
// holding MaxOverridesPerShard.
var ErrOverrideLimit = fmt.Errorf("too many overrides: at most %d per shard", MaxOverridesPerShard)

// Override is one key's numbers under a rule until ExpireAt.
type Override struct {
	// Def holds the numbers: its Name is the rule's, its Algorithm the
	// rule's; Limit, Window and Burst are the key's own.
	Def rules.Def
	// ExpireAt is the instant the override ends, ns since the Unix epoch.
	ExpireAt int64
	// Key is the key, for listings.
	Key string
}

// CapacityError refuses a cost above the capacity of the override a key
// is under: such a request could never be admitted.
type CapacityError struct {
	Cost, Capacity int64
	Rule           string
	Override       bool // the capacity is the key's override's, not the rule's
}

// Error describes the refusal.
func (e *CapacityError) Error() string {
	// Worded as the rule's own refusal (service.CostError), which clients
	// recognise, naming the override after it when the key has one.
	if e.Override {
		return fmt.Sprintf("cost %d exceeds the capacity %d of rule '%s'; such a request could never be allowed under this key's override",
			e.Cost, e.Capacity, e.Rule)
	}
	return fmt.Sprintf("cost %d exceeds the capacity %d of rule '%s'; such a request could never be allowed", e.Cost, e.Capacity, e.Rule)
}

// override is an Override as a table holds it.
type override struct {
	Override
	params algorithms.Params
}

// overrideDue is an override's place in its shard's expiry heap. Entries
// are never removed early: one whose override was replaced or deleted is
// recognised (the table no longer holds that override) and skipped.
type overrideDue struct {
	at   int64
	rule uint64
	o    *override
}

type overrideHeap []overrideDue

func (h overrideHeap) Len() int           { return len(h) }
func (h overrideHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h overrideHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *overrideHeap) Push(x any)        { *h = append(*h, x.(overrideDue)) }
func (h *overrideHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// keyOverride returns key's live override in t, ending it first if it has
// expired at now; nil when the key has none.
func (s *shard) keyOverride(t *table, key []byte, now int64) *override {
	if len(t.overrides) == 0 {
		return nil
	}
	o := t.overrides[string(key)]
	if o != nil && o.ExpireAt <= now {
		s.endOverride(t, o, now)
		return nil
	}
	return o
}

// moveState rescales key's state in t, if it has one, from the numbers old
// to new at now, and reschedules its eviction.
func (s *shard) moveState(t *table, key string, old, new algorithms.Params, now int64) {
	k := t.findString(key)
	if !k.held {
		return
	}
	st := algorithms.Rescale(old, new, t.state(k), now)
	t.setState(k, st)
	s.schedule(t, k, s.dropAt(new, st))
	s.changes++
}

// endOverride removes o from t, the key falling back to the rule's numbers
// with its spent budget kept.
func (s *shard) endOverride(t *table, o *override, now int64) {
	if s.dirty != nil {
		s.dirty.add([]byte(o.Key))
	}
	delete(t.overrides, o.Key)
	s.overrides--
	s.moveState(t, o.Key, o.params, t.rule.Params, now)
}

// expireOverrides ends every override due at now; the shard's tick runs it.
func (s *shard) expireOverrides(now int64) {
	for len(s.overrideQ) > 0 && s.overrideQ[0].at <= now {
		due := heap.Pop(&s.overrideQ).(overrideDue)
		if t := s.tables[due.rule]; t != nil && t.overrides[due.o.Key] == due.o {
			s.endOverride(t, due.o, now)
		}
	}
}

// setOverride performs SetOverride: o replaces op.Key's numbers under
// t's rule until o.ExpireAt.
func (s *shard) setOverride(t *table, op *Op, now int64) {
	if t == nil {
		op.Err = rules.UnknownRule(op.Rule.Name)
		return
	}
	if len(op.Key) > s.limits.maxKey {
		op.Err = &TooLargeError{What: "key", Size: len(op.Key), Limit: s.limits.maxKey}
		return
	}
	key := string(op.Key)
	old := s.keyOverride(t, op.Key, now)
	if old == nil && s.overrides >= MaxOverridesPerShard {
		op.Err = ErrOverrideLimit
		return
	}
	from := t.rule.Params
	if old != nil {
		from = old.params
	} else {
		s.overrides++
	}
	o := &override{Override: *op.Override, params: op.Override.Def.Params()}
	s.m.noteOverrideCapacity(t.rule.ID, o.params.Capacity)
	o.Key = key
	o.Def.Name, o.Def.Algorithm = t.rule.Name, t.rule.Algorithm
	if t.overrides == nil {
		t.overrides = make(map[string]*override)
	}
	t.overrides[key] = o
	s.pushOverrideDue(overrideDue{at: o.ExpireAt, rule: t.rule.ID, o: o})
	at := now
	if op.At != 0 {
		// A restore: the state was saved under the rule's numbers as of
		// its own stamp; the time since then passes under the override.
		at = 0
	}
	s.moveState(t, key, from, o.params, at)
	op.Existed = old != nil
}

// pushOverrideDue adds due to the expiry heap. Entries of replaced or
// deleted overrides stay in it until their instant; so that a client
// replacing overrides in a loop cannot grow it without bound, it is rebuilt
// from the live overrides once it holds more than twice as many entries.
func (s *shard) pushOverrideDue(due overrideDue) {
	heap.Push(&s.overrideQ, due)
	if len(s.overrideQ) <= 2*s.overrides+64 {
		return
	}
	live := s.overrideQ[:0]
	for _, d := range s.overrideQ {
		if t := s.tables[d.rule]; t != nil && t.overrides[d.o.Key] == d.o {
			live = append(live, d)
		}
	}
	clear(s.overrideQ[len(live):])
	s.overrideQ = live
	heap.Init(&s.overrideQ)
}

// overrideOp performs GetOverride and DelOverride on op.Key under t's rule.
func (s *shard) overrideOp(t *table, op *Op, now int64) {
	if t == nil {
		return
	}
	o := s.keyOverride(t, op.Key, now)
	if o == nil {
		return
	}
	op.Existed = true
	if op.Kind == GetOverride {
		c := o.Override
		op.Override = &c
		return
	}
	s.endOverride(t, o, now)
}

// listOverrides appends the live overrides of the rule with ID id (0:
// every rule) to out.
func (s *shard) listOverrides(id uint64, now int64, out []Override) []Override {
	for tid, t := range s.tables {
		if id != 0 && tid != id {
			continue
		}
		for _, o := range t.overrides {
			if o.ExpireAt > now {
				out = append(out, o.Override)
			}
		}
	}
	return out
}

// Overrides lists the live overrides of rule (nil: every rule), sorted by
// rule and key. It messages every shard.
func (m *Map) Overrides(rule *rules.Rule) []Override {
	var id uint64
	if rule != nil {
		id = rule.ID
	}
	var out []Override
	ch := make(chan []Override, len(m.shards))
	m.each(func(s *shard) { ch <- s.listOverrides(id, s.clock(), nil) })
	close(ch)
	for part := range ch {
		out = append(out, part...)
	}
	slices.SortFunc(out, func(a, b Override) int {
		if c := strings.Compare(a.Def.Name, b.Def.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}

// exportState returns the state to export for held key k of t: its own,
// or, under an override, its state rescaled to the rule's numbers, so that
// every exported state is kept under its rule (snapshots save overrides
// apart, and setting them again on restore rescales back). A rescaled or
// decoded copy is the shard's scratch: valid until the next call.
func (s *shard) exportState(t *table, k lkey) *algorithms.State {
	var o *override
	if len(t.overrides) != 0 {
		o = t.overrides[t.keyString(k)]
	}
	switch {
	case o != nil:
		st := t.state(k)
		s.exported = algorithms.Rescale(o.params, t.rule.Params, st, max(st.Stamp, s.clock()))
	case k.e != nil:
		return &k.e.state
	default:
		s.exported = t.state(k)
	}
	return &s.exported
}

// RestoreOverride is an override to set again at start-up.
type RestoreOverride struct {
	Rule *rules.Rule
	Override
}

// RestoreOverrides sets saved overrides again, after the keys are loaded
// (their states, saved under the rules' numbers, are rescaled to the
// overrides'), and returns how many it set. Overrides expired by now are
// skipped; so are those a shard has no room for (ErrOverrideLimit is then
// returned after the rest are set).
func (m *Map) RestoreOverrides(list []RestoreOverride, now int64) (int, error) {
	d := m.NewDispatcher()
	set, firstErr := 0, error(nil)
	for i := range list {
		o := &list[i]
		if o.ExpireAt <= now {
			continue
		}
		op := Op{Kind: SetOverride, Rule: o.Rule, Key: []byte(o.Key), Override: &o.Override, At: 1}
		d.Apply(&op)
		if op.Err != nil {
			if firstErr == nil {
				firstErr = op.Err
			}
			continue
		}
		set++
	}
	return set, firstErr
}
