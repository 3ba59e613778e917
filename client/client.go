// Package client is a typed Go client for rlserver's rate-limiting
// commands, over go-redis: a single node, a sentinel setup or a cluster,
// whatever redis.UniversalClient the caller builds.
//
// Calls return a Decision (or a Group, or a Grant) parsed from RESP2 arrays
// and RESP3 maps alike. A denial is a Decision with Allowed false, never an
// error; errors are classed so a caller can tell a server that cannot be
// reached (ErrUnavailable) from a request that can never succeed
// (ErrMisconfigured: an unknown rule, a cost above capacity) and from
// refused credentials (ErrAuth).
//
// Decision.Headers renders the HTTP response fields a client of the caller's
// API reads: the IETF RateLimit and RateLimit-Policy fields of
// draft-ietf-httpapi-ratelimit-headers-11, the legacy X-RateLimit-* fields
// and Retry-After. Package httplimit builds net/http middleware on this
// package; Budget is the local tier that serves permits from memory in front
// of the server.
//
// Calls take their deadline from the context. go-redis honours it only
// when the redis client is built with ContextTimeoutEnabled: true;
// otherwise a slow server holds a call for go-redis's ReadTimeout (3s by
// default) whatever the context says.
//
// A Client is safe for concurrent use.
package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client calls rlserver's rate-limiting commands.
type Client struct {
	rdb     redis.UniversalClient
	breaker *breaker // nil without WithBreaker
	observe func(command string, took time.Duration, err error)
}

// Option configures a Client.
type Option func(*Client)

// WithBreaker puts a circuit breaker in front of the server: after
// Failures consecutive calls without an answer (no connection, a deadline
// passed) it opens, and calls fail at once with ErrUnavailable instead of
// waiting on a dead server; it lets one probe through after Backoff, and
// doubles the wait after each failed probe up to MaxBackoff. Answers of any
// kind (denials, error replies) count as the server being up.
func WithBreaker(s BreakerSettings) Option {
	return func(c *Client) { c.breaker = newBreaker(s) }
}

// WithObserver has observe called after every round trip to the server
// with the command's name (upper case, e.g. "RL.ALLOW"; a pipeline of
// refunds is "RL.REFUND"), the time it took and its error (nil for any
// answer, denials included), e.g. to feed a latency histogram. Calls the
// breaker refuses make no round trip and are not observed.
func WithObserver(observe func(command string, took time.Duration, err error)) Option {
	return func(c *Client) { c.observe = observe }
}

// New returns a Client over rdb. The caller keeps ownership of rdb (and
// closes it).
func New(rdb redis.UniversalClient, opts ...Option) *Client {
	c := &Client{rdb: rdb}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BreakerState is the circuit breaker's state: "closed" (calls go
// through), "open" (calls fail at once), "half-open" (a probe is let
// through), or "" without a breaker.
func (c *Client) BreakerState() string {
	if c.breaker == nil {
		return ""
	}
	return c.breaker.state()
}

// do sends one command whose first key is args[1] and returns its reply,
// or a classified error.
func (c *Client) do(ctx context.Context, args ...any) (any, error) {
	return c.send(ctx, 1, args...)
}

// send sends one command with its first key at args[keyPos] (0: keyless),
// set explicitly so a cluster client routes it to the key's node whether or
// not the server lists the command in COMMAND INFO.
func (c *Client) send(ctx context.Context, keyPos int8, args ...any) (any, error) {
	call := func() (any, error) {
		cmd := redis.NewCmd(ctx, args...)
		if keyPos > 0 {
			cmd.SetFirstKeyPos(keyPos)
		}
		start := time.Now()
		_ = c.rdb.Process(ctx, cmd)
		v, err := cmd.Result()
		if c.observe != nil {
			name, _ := args[0].(string)
			c.observe(name, time.Since(start), answered(err))
		}
		return v, err
	}
	var v any
	var err error
	if c.breaker != nil {
		v, err = c.breaker.run(call)
	} else {
		v, err = call()
	}
	return v, classify(err)
}

// Allow decides whether cost units (at least 1) may pass for key under
// rule, and spends them if so (RL.ALLOW).
func (c *Client) Allow(ctx context.Context, key, rule string, cost int64) (Decision, error) {
	v, err := c.do(ctx, "RL.ALLOW", key, rule, cost)
	if err != nil {
		return Decision{}, err
	}
	return parseDecision(v, rule)
}

// Peek reports what Allow would decide for cost, spending nothing and
// creating no state (RL.PEEK).
func (c *Client) Peek(ctx context.Context, key, rule string, cost int64) (Decision, error) {
	v, err := c.do(ctx, "RL.PEEK", key, rule, cost)
	if err != nil {
		return Decision{}, err
	}
	return parseDecision(v, rule)
}

// Reset forgets key's state under rule; it reports whether there was any
// (RL.RESET).
func (c *Client) Reset(ctx context.Context, key, rule string) (bool, error) {
	v, err := c.do(ctx, "RL.RESET", key, rule)
	if err != nil {
		return false, err
	}
	n, ok := v.(int64)
	if !ok {
		return false, fmt.Errorf("rlserver client: RL.RESET replied %T, want an integer", v)
	}
	return n == 1, nil
}

// AllowAll decides the pairs as one request of cost 1 (RL.ALLOWALL): it is
// admitted only if every pair admits, and if any denies none is charged.
func (c *Client) AllowAll(ctx context.Context, pairs ...Pair) (Group, error) {
	return c.AllowAllN(ctx, 1, pairs...)
}

// AllowAllN is AllowAll charging cost to every pair.
func (c *Client) AllowAllN(ctx context.Context, cost int64, pairs ...Pair) (Group, error) {
	if len(pairs) == 0 {
		return Group{}, errors.New("rlserver client: AllowAll needs at least one pair")
	}
	args := make([]any, 0, 3+2*len(pairs))
	args = append(args, "RL.ALLOWALL")
	for _, p := range pairs {
		args = append(args, p.Key, p.Rule)
	}
	// COST is always given, so a last key spelt "COST" is never read as
	// the option.
	args = append(args, "COST", cost)
	v, err := c.do(ctx, args...)
	if err != nil {
		return Group{}, err
	}
	return parseGroup(v, pairs)
}

// Acquire reserves up to n units (at least 1) of key under rule in one
// call (RL.ACQUIRE): the server grants as many as the key can give now,
// between 0 and n, and spends them. Give back what goes unused with Refund.
func (c *Client) Acquire(ctx context.Context, key, rule string, n int64) (Grant, error) {
	v, err := c.do(ctx, "RL.ACQUIRE", key, rule, n)
	if err != nil {
		return Grant{}, err
	}
	return parseGrant(v, key, rule)
}

// Refund gives back up to n unused units of g (RL.REFUND) and returns how
// many the server took back: fewer than n when some can no longer be
// returned (the grant's window is over, its units drained or aged out),
// never more than the key holds. A grant without an instant (from a server
// whose RL.ACQUIRE does not report one) cannot be identified, and nothing
// is sent.
func (c *Client) Refund(ctx context.Context, g Grant, n int64) (int64, error) {
	if n < 1 || g.At == 0 {
		return 0, nil
	}
	v, err := c.do(ctx, "RL.REFUND", g.Key, g.Rule, n, g.At)
	if err != nil {
		return 0, err
	}
	back, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("rlserver client: RL.REFUND replied %T, want an integer", v)
	}
	return back, nil
}

// Rule returns a rule's definition (RL.RULE GET).
func (c *Client) Rule(ctx context.Context, name string) (RuleInfo, error) {
	v, err := c.send(ctx, 0, "RL.RULE", "GET", name)
	if err != nil {
		return RuleInfo{}, err
	}
	return parseRule(v)
}
