package client

import (
	"fmt"
	"time"
)

// Decision is the server's answer for one key under one rule.
type Decision struct {
	// Allowed reports whether the request was admitted (and spent), or
	// for Peek whether it would be.
	Allowed bool
	// Limit is the rule's capacity: its burst for the bucket algorithms
	// (the limit when no burst is set), its limit for the others.
	Limit int64
	// Remaining is the whole units left after this decision, never
	// negative. From a Budget it is a hint (see Budget).
	Remaining int64
	// RetryAfter is, when denied, how long until a request of the same
	// cost would be admitted if nobody else spends meanwhile; 0 when
	// allowed. The server rounds it up to whole milliseconds, so waiting
	// it out is never early.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back at full capacity.
	ResetAfter time.Duration
	// Delay is, for an admitted leaky_bucket request, how long the work
	// queued ahead of it takes to drain; 0 otherwise.
	Delay time.Duration
	// Rule is the rule decided under, as the call named it.
	Rule string
	// Window is the period RateLimit-Policy's w reports: the rule's window
	// for the window algorithms, and for the buckets the time a bucket
	// takes to refill from empty (burst × window / limit), so that
	// Limit per Window is the rule's long-run rate. The server's reply does
	// not carry it: it is 0 unless the caller fills it in (from
	// Client.Rule, as httplimit does), and Headers then leaves w out.
	Window time.Duration
}

// Group is RL.ALLOWALL's answer: Allowed only if every pair admitted, and
// then every pair was charged; otherwise none was.
type Group struct {
	Allowed bool
	// Decisions has one entry per pair, in the order given. When the group
	// was admitted each is the pair's state after the charge; when denied,
	// the pair's state uncharged, and its Allowed says whether that pair
	// alone would have admitted, so the denied ones show which limits bound.
	Decisions []Decision
}

// Pair is one key rule pair of AllowAll.
type Pair struct{ Key, Rule string }

// Grant is RL.ACQUIRE's answer: Granted units, between 0 and the count
// asked for, were spent at once under Rule for Key. Decision.Allowed is
// Granted > 0; when nothing was granted, RetryAfter is the wait until one
// more unit can be.
type Grant struct {
	Decision
	Key     string
	Granted int64
	// At identifies the grant for Refund: the server's instant of the
	// spend, in nanoseconds since the Unix epoch. 0 if the server's reply
	// did not carry it (a server whose RL.ACQUIRE replies with six
	// fields), in which case Refund returns nothing.
	At int64
}

// decisionFields are the names of a decision's six numbers, in the order
// RESP2 arrays give them; RESP3 maps name them.
var decisionFields = [6]string{"allowed", "limit", "remaining", "retry_after_ms", "reset_after_ms", "delay_ms"}

// grantFields are RL.ACQUIRE's reply fields: granted in the first slot,
// and the grant's instant after the six.
var grantFields = [7]string{"granted", "limit", "remaining", "retry_after_ms", "reset_after_ms", "delay_ms", "granted_at_ns"}

// parseDecision reads a six-integer decision from a RESP2 array or a RESP3
// map, as go-redis returns them.
func parseDecision(v any, rule string) (Decision, error) {
	var n [6]int64
	if err := parseFields(v, decisionFields[:], n[:], 6); err != nil {
		return Decision{}, err
	}
	return decisionOf(n[:], rule), nil
}

func decisionOf(n []int64, rule string) Decision {
	return Decision{
		Allowed:    n[0] != 0,
		Limit:      n[1],
		Remaining:  n[2],
		RetryAfter: time.Duration(n[3]) * time.Millisecond,
		ResetAfter: time.Duration(n[4]) * time.Millisecond,
		Delay:      time.Duration(n[5]) * time.Millisecond,
		Rule:       rule,
	}
}

// parseGrant reads RL.ACQUIRE's reply: six or seven integers.
func parseGrant(v any, key, rule string) (Grant, error) {
	var n [7]int64
	if err := parseFields(v, grantFields[:], n[:], 6); err != nil {
		return Grant{}, err
	}
	d := decisionOf(n[:6], rule)
	d.Allowed = n[0] > 0
	return Grant{Decision: d, Key: key, Granted: n[0], At: n[6]}, nil
}

// parseFields fills out from an array of integers (in the order of names)
// or a map from names to integers. At least required fields must be there;
// later ones may be missing (left 0). A map may carry fields not named.
func parseFields(v any, names []string, out []int64, required int) error {
	switch r := v.(type) {
	case []any:
		if len(r) < required || len(r) > len(names) {
			return fmt.Errorf("rlserver client: reply of %d elements, want %d to %d integers", len(r), required, len(names))
		}
		for i, e := range r {
			x, ok := e.(int64)
			if !ok {
				return fmt.Errorf("rlserver client: reply element %d is %T, want an integer", i, e)
			}
			out[i] = x
		}
		return nil
	case map[any]any:
		for i, name := range names {
			e, found := r[name]
			if !found {
				if i < required {
					return fmt.Errorf("rlserver client: reply map has no %q", name)
				}
				continue
			}
			x, ok := e.(int64)
			if !ok {
				return fmt.Errorf("rlserver client: reply field %q is %T, want an integer", name, e)
			}
			out[i] = x
		}
		return nil
	}
	return fmt.Errorf("rlserver client: unexpected reply of type %T", v)
}

// parseGroup reads RL.ALLOWALL's reply: RESP2 [allowed, decision...],
// RESP3 {allowed: 0|1, decisions: [map...]}.
func parseGroup(v any, pairs []Pair) (Group, error) {
	var allowed any
	var items []any
	switch r := v.(type) {
	case []any:
		if len(r) == 0 {
			return Group{}, fmt.Errorf("rlserver client: empty RL.ALLOWALL reply")
		}
		allowed, items = r[0], r[1:]
	case map[any]any:
		list, ok := r["decisions"].([]any)
		if !ok {
			return Group{}, fmt.Errorf("rlserver client: RL.ALLOWALL reply map without a decisions list")
		}
		allowed, items = r["allowed"], list
	default:
		return Group{}, fmt.Errorf("rlserver client: unexpected RL.ALLOWALL reply of type %T", v)
	}
	a, ok := allowed.(int64)
	if !ok {
		return Group{}, fmt.Errorf("rlserver client: RL.ALLOWALL's allowed is %T, want an integer", allowed)
	}
	if len(items) != len(pairs) {
		return Group{}, fmt.Errorf("rlserver client: RL.ALLOWALL answered %d decisions for %d pairs", len(items), len(pairs))
	}
	g := Group{Allowed: a != 0, Decisions: make([]Decision, len(items))}
	for i, item := range items {
		d, err := parseDecision(item, pairs[i].Rule)
		if err != nil {
			return Group{}, fmt.Errorf("pair %d: %w", i+1, err)
		}
		g.Decisions[i] = d
	}
	return g, nil
}

// RuleInfo is a rule as RL.RULE GET reports it.
type RuleInfo struct {
	Name      string
	Algorithm string // token_bucket, leaky_bucket, fixed_window, sliding_log, sliding_counter
	Limit     int64
	Window    time.Duration
	Burst     int64 // 0 when not set
}

// IsBucket reports whether the rule is one of the two bucket algorithms.
func (r RuleInfo) IsBucket() bool {
	return r.Algorithm == "token_bucket" || r.Algorithm == "leaky_bucket"
}

// Capacity is the most units a key can hold: Burst (or Limit when unset)
// for buckets, Limit otherwise. It is what Decision.Limit reports.
func (r RuleInfo) Capacity() int64 {
	if r.IsBucket() && r.Burst > 0 {
		return r.Burst
	}
	return r.Limit
}

// PolicyWindow is the period over which Capacity units are the rule's
// long-run rate: the window, or for a bucket the time it takes to refill
// from empty (capacity × window / limit). Decision.Window takes it.
func (r RuleInfo) PolicyWindow() time.Duration {
	c := r.Capacity()
	if c == r.Limit || r.Limit <= 0 {
		return r.Window
	}
	// capacity × window can exceed 64 bits (10^9 × 366 days in ns); the
	// figure is for display in whole seconds, so float64 is exact enough.
	return time.Duration(float64(r.Window) * float64(c) / float64(r.Limit))
}

// parseRule reads RL.RULE GET's reply: a RESP3 map or a RESP2 flat array
// of field, value pairs.
func parseRule(v any) (RuleInfo, error) {
	fields := map[string]any{}
	switch r := v.(type) {
	case []any:
		for i := 0; i+1 < len(r); i += 2 {
			k, _ := r[i].(string)
			fields[k] = r[i+1]
		}
	case map[any]any:
		for k, x := range r {
			if s, ok := k.(string); ok {
				fields[s] = x
			}
		}
	default:
		return RuleInfo{}, fmt.Errorf("rlserver client: unexpected RL.RULE GET reply of type %T", v)
	}
	var info RuleInfo
	var ok [5]bool
	info.Name, ok[0] = fields["name"].(string)
	info.Algorithm, ok[1] = fields["algorithm"].(string)
	info.Limit, ok[2] = fields["limit"].(int64)
	window, okw := fields["window"].(string)
	info.Burst, ok[4] = fields["burst"].(int64)
	var err error
	if okw {
		info.Window, err = time.ParseDuration(window)
		ok[3] = err == nil
	}
	for i, name := range []string{"name", "algorithm", "limit", "window", "burst"} {
		if !ok[i] {
			return RuleInfo{}, fmt.Errorf("rlserver client: RL.RULE GET reply has no valid %s", name)
		}
	}
	return info, nil
}
