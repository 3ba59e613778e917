package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/client"
)

// serve is the middleware's request path: match, key, decide, respond.
func (l *Limiter) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	c := l.state.Load()
	ep := c.match(r)
	if ep.unlimited {
		next.ServeHTTP(w, r)
		return
	}
	key := c.key(ep, r, l.opts.user)
	var out outcome
	l.decide(r.Context(), c, ep, key, ep.costOf(r), &out)
	h := w.Header()
	if c.headers != 0 && out.n > 0 {
		var now time.Time // read only for a Unix-time reset
		if c.headers&client.UnixReset != 0 {
			now = l.opts.now()
		}
		client.SetHeaders(h, c.headers, now, out.decisions()...)
	}
	switch {
	case out.costErr != nil:
		writeProblem(w, costProblem(out.costErr))
	case len(out.closed) > 0:
		wait := client.RetryAfterSeconds(c.closed)
		h.Set("Retry-After", strconv.FormatInt(wait, 10))
		writeProblem(w, unavailableProblem(out.closed, wait))
	case out.denied:
		p := client.QuotaExceeded(out.decisions()...)
		h.Set("Retry-After", strconv.FormatInt(p.RetryAfter, 10))
		writeProblem(w, p)
	default:
		next.ServeHTTP(w, r)
	}
}

// outcome is what a request's rules decided. It lives on the request
// path's stack: arrays with counts rather than slices, since a struct
// holding slices of its own arrays would be moved to the heap.
type outcome struct {
	// ds[:n] has a decision per rule that gave one (the server's, the
	// budget's or the local limiter's); a rule that failed open has none.
	ds [maxRules]client.Decision
	n  int
	// undo[:nundo] are the spends to give back if the request is refused.
	undo    [maxRules]spent
	nundo   int
	denied  bool
	closed  []string          // rules that failed closed
	costErr *client.CostError // a cost no rule could ever admit
}

func (o *outcome) decisions() []client.Decision { return o.ds[:o.n] }

func (o *outcome) add(d client.Decision) {
	o.ds[o.n] = d
	o.n++
}

func (o *outcome) spend(s spent) {
	o.undo[o.nundo] = s
	o.nundo++
}

// spent is a spend to undo if the request is refused after all: from the
// rule's budget, or (local) from its fail policy's local limiter at at.
type spent struct {
	rs    *ruleState
	local bool
	at    int64
}

// decide decides cost units for key under every rule of ep, all or
// nothing: rules with a local budget first (from memory, mostly), then the
// others in one round trip (RL.ALLOW, or RL.ALLOWALL for several), each
// rule's fail policy standing in for a decision the server cannot give. If
// the request is refused, what budgets and local limiters spent on it goes
// back.
func (l *Limiter) decide(ctx context.Context, c *compiled, ep *endpoint, key string, cost int64, out *outcome) {
	var direct [maxRules]*ruleState
	nd := 0
	for _, rs := range ep.rules {
		if rs.budget == nil {
			direct[nd] = rs
			nd++
			continue
		}
		if out.refused() {
			continue // charge nothing more once refused
		}
		d, err := rs.budget.Take(ctx, key, cost)
		if errors.Is(err, client.ErrClosed) {
			// A reload retired this budget while the request was on
			// its way under the old configuration: ask the server.
			direct[nd] = rs
			nd++
			continue
		}
		if err != nil {
			l.failed(c, rs, err, key, cost, out)
			continue
		}
		l.record(rs, d, out)
		if d.Allowed {
			out.spend(spent{rs: rs})
		}
	}
	if nd > 0 && !out.refused() {
		l.ask(ctx, c, direct[:nd], key, cost, out)
	}
	if out.refused() {
		for _, s := range out.undo[:out.nundo] {
			if s.local {
				s.rs.local.refund(key, s.at, cost)
			} else {
				s.rs.budget.PutBack(key, cost)
			}
		}
	}
}

func (o *outcome) refused() bool { return o.denied || len(o.closed) > 0 || o.costErr != nil }

// ask decides the rules without a budget at the server in one round trip,
// bounded by the configured timeout.
func (l *Limiter) ask(ctx context.Context, c *compiled, rules []*ruleState, key string, cost int64, out *outcome) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if len(rules) == 1 {
		rs := rules[0]
		d, err := l.c.Allow(ctx, key, rs.name, cost)
		if err != nil {
			l.failed(c, rs, err, key, cost, out)
			return
		}
		l.record(rs, d, out)
		return
	}
	pairs := make([]client.Pair, len(rules))
	for i, rs := range rules {
		pairs[i] = client.Pair{Key: key, Rule: rs.name}
	}
	g, err := l.c.AllowAllN(ctx, cost, pairs...)
	if err != nil {
		for _, rs := range rules {
			l.failed(c, rs, err, key, cost, out)
		}
		return
	}
	for i, d := range g.Decisions {
		l.record(rules[i], d, out)
	}
	out.denied = out.denied || !g.Allowed
}

// record adds a rule's decision to out.
func (l *Limiter) record(rs *ruleState, d client.Decision, out *outcome) {
	if d.Window == 0 {
		d.Window = time.Duration(rs.window.Load())
	}
	out.add(d)
	if d.Allowed {
		rs.allowed.Inc()
	} else {
		rs.denied.Inc()
		out.denied = true
	}
}

// failed applies rs's fail policy for a decision the server could not
// give. A cost above the rule's capacity is no failure: the request can
// never be admitted, and is refused.
func (l *Limiter) failed(c *compiled, rs *ruleState, err error, key string, cost int64, out *outcome) {
	var ce *client.CostError
	if errors.As(err, &ce) {
		rs.denied.Inc()
		out.costErr = ce
		return
	}
	rs.failed.Inc()
	rs.fellBack.Inc()
	l.logFailure(c, rs, err)
	switch rs.fail {
	case FailClosed:
		out.closed = append(out.closed, rs.name)
	case FailLocal:
		d, at := rs.local.decide(key, cost)
		out.add(d)
		if d.Allowed {
			out.spend(spent{rs: rs, local: true, at: at})
		} else {
			out.denied = true
		}
	}
}

// logFailure logs a fail-policy activation, at most once per rule per
// interval, with the count since the last line.
func (l *Limiter) logFailure(c *compiled, rs *ruleState, err error) {
	n := rs.logged.Add(1)
	now := l.opts.now().UnixNano()
	last := rs.lastLog.Load()
	if last != 0 && now-last < int64(c.every) || !rs.lastLog.CompareAndSwap(last, now) {
		return
	}
	rs.logged.Add(-n)
	l.opts.logger.Warn("httplimit: rlserver could not decide; fail policy applied",
		"rule", rs.name, "policy", string(rs.fail), "requests", n, "err", err)
}

// Problem types of draft-ietf-httpapi-ratelimit-headers-11 (RFC 9457).
const (
	quotaExceeded            = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	temporaryReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
)

func writeProblem(w http.ResponseWriter, p client.Problem) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Del("Content-Length")
	w.WriteHeader(p.Status)
	w.Write(p.JSON())
}

// costProblem refuses a request whose cost exceeds a rule's capacity: no
// wait would let it pass, so there is no Retry-After.
func costProblem(e *client.CostError) client.Problem {
	return client.Problem{
		Type: quotaExceeded, Title: "Quota Exceeded", Status: http.StatusTooManyRequests,
		Detail:           fmt.Sprintf("the request costs %d units, more than rule %s ever allows at once (%d); it can never be admitted", e.Cost, e.Rule, e.Capacity),
		ViolatedPolicies: []string{e.Rule},
	}
}

// unavailableProblem refuses a request because the limiter cannot decide
// and a rule fails closed.
func unavailableProblem(rules []string, wait int64) client.Problem {
	return client.Problem{
		Type: temporaryReducedCapacity, Title: "Temporary Reduced Capacity", Status: http.StatusServiceUnavailable,
		Detail:           fmt.Sprintf("the rate limiter cannot decide and %s fails closed; retry after %d s", strings.Join(rules, ", "), wait),
		ViolatedPolicies: rules,
		RetryAfter:       wait,
	}
}
