// Package envoytest provides an in-memory envoy.Limiter for tests and
// benchmarks of the Envoy front end without the rest of rlserver: exact (one
// mutex around a map of algorithms.State), with an injectable clock. It
// follows the Limiter contract the real server implements — rules replaced
// as one change with spent budget kept or started fresh, all-or-nothing
// groups, peeks — so tests written against it hold against the server.
package envoytest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/envoy"
	"github.com/rlserver/rlserver/internal/rules"
)

// Limiter is an envoy.Limiter over a map. It is safe for concurrent use; one
// mutex serialises every call, which makes each call one instant.
type Limiter struct {
	mu    sync.Mutex
	now   func() time.Time
	rules map[string]*rule
	keys  map[stateKey]algorithms.State
	ids   uint64 // last rule identity given
	calls int    // Decide calls, for tests
}

type rule struct {
	def    rules.Def
	params algorithms.Params
	id     uint64 // changes with the algorithm: the keys start fresh
}

type stateKey struct {
	rule uint64
	key  string
}

// NewLimiter returns an empty limiter reading the clock now (time.Now when
// nil).
func NewLimiter(now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{now: now, rules: map[string]*rule{}, keys: map[stateKey]algorithms.State{}}
}

// SetRules replaces every rule with defs, as the Limiter contract says.
func (l *Limiter) SetRules(defs []rules.Def) error {
	seen := map[string]bool{}
	for _, d := range defs {
		if err := d.Validate(); err != nil {
			return fmt.Errorf("rule '%s': %w", d.Name, err)
		}
		if seen[d.Name] {
			return fmt.Errorf("rule '%s': defined twice", d.Name)
		}
		seen[d.Name] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now().UnixNano()
	next := make(map[string]*rule, len(defs))
	rescale := map[uint64][2]algorithms.Params{}
	for _, d := range defs {
		r := &rule{def: d, params: d.Params()}
		old := l.rules[d.Name]
		switch {
		case old != nil && old.def.Algorithm == d.Algorithm:
			r.id = old.id
			if old.params != r.params {
				rescale[r.id] = [2]algorithms.Params{old.params, r.params}
			}
		default:
			l.ids++
			r.id = l.ids
		}
		next[d.Name] = r
	}
	live := map[uint64]bool{}
	for _, r := range next {
		live[r.id] = true
	}
	for k, s := range l.keys {
		switch p, ok := rescale[k.rule]; {
		case !live[k.rule]:
			delete(l.keys, k)
		case ok:
			l.keys[k] = algorithms.Rescale(p[0], p[1], s, now)
		}
	}
	l.rules = next
	return nil
}

// ErrUnknownRule is Decide's error for a rule SetRules did not publish.
var ErrUnknownRule = errors.New("unknown rule")

// Decide decides requests at one instant, as the Limiter contract says.
func (l *Limiter) Decide(ctx context.Context, requests []envoy.Request, allOrNothing bool) ([]algorithms.Decision, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	now := l.now().UnixNano()
	rs := make([]*rule, len(requests))
	for i, r := range requests {
		rs[i] = l.rules[r.Rule]
		if rs[i] == nil {
			return nil, fmt.Errorf("%w '%s'", ErrUnknownRule, r.Rule)
		}
		if r.Cost < 1 || r.Cost > rs[i].params.Capacity {
			return nil, fmt.Errorf("cost %d outside 1..%d of rule '%s'", r.Cost, rs[i].params.Capacity, r.Rule)
		}
		if allOrNothing && r.Peek {
			return nil, errors.New("a peek in an all-or-nothing group")
		}
	}
	if allOrNothing && len(requests) > envoy.MaxGroup {
		return nil, fmt.Errorf("%d requests in an all-or-nothing group", len(requests))
	}
	out := make([]algorithms.Decision, len(requests))
	if allOrNothing {
		all := true
		for i, r := range requests {
			out[i] = algorithms.Peek(rs[i].params, l.keys[stateKey{rs[i].id, r.Key}], now, r.Cost)
			all = all && out[i].Allowed
		}
		if !all {
			return out, nil
		}
	}
	for i, r := range requests {
		k := stateKey{rs[i].id, r.Key}
		if r.Peek {
			out[i] = algorithms.Peek(rs[i].params, l.keys[k], now, r.Cost)
			continue
		}
		var s algorithms.State
		s, out[i] = algorithms.Decide(rs[i].params, l.keys[k], now, r.Cost)
		l.keys[k] = s
	}
	return out, nil
}

// Peek reads one key's state under a rule, as RESP's RL.PEEK key rule
// does.
func (l *Limiter) Peek(key, ruleName string) (algorithms.Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rules[ruleName]
	if r == nil {
		return algorithms.Decision{}, fmt.Errorf("%w '%s'", ErrUnknownRule, ruleName)
	}
	return algorithms.Peek(r.params, l.keys[stateKey{r.id, key}], l.now().UnixNano(), 1), nil
}

// Rules returns the published rules' definitions by name.
func (l *Limiter) Rules() map[string]rules.Def {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]rules.Def, len(l.rules))
	for name, r := range l.rules {
		out[name] = r.def
	}
	return out
}

// Calls returns how many times Decide was called.
func (l *Limiter) Calls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

// Clock is a settable clock for tests: Now returns the instant last set.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the current instant.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t; Add moves it by d.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Add moves the clock forward by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
