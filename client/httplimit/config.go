package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/rlserver/rlserver/client"
	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rules"
)

// Config is the middleware's configuration: which rlserver rules apply to
// which endpoints, keyed how, and what to do when the server cannot
// answer. Build it in Go or load it from YAML (Parse, Load); the zero
// values of optional fields take the defaults documented on each.
type Config struct {
	// Endpoints map requests to rules. Each Pattern is a net/http ServeMux
	// pattern ("[METHOD ][HOST]/[PATH]", e.g. "POST /orders" or
	// "GET /items/{id}"), and a request gets the endpoint whose pattern
	// ServeMux would choose for it: the most specific wins, exactly as
	// ServeMux decides (a longer literal path beats a wildcard, a method
	// beats none, a host beats none). Two patterns ServeMux would reject as
	// conflicting are rejected here too.
	Endpoints []Endpoint
	// Default applies to requests no endpoint matches. It is required
	// unless an endpoint has the pattern "/" (which then is the default),
	// so an endpoint added to the API without configuration is never
	// silently unlimited; to let such requests through, say so:
	// Default: &Endpoint{Unlimited: true}.
	Default *Endpoint
	// Rules holds, per rlserver rule name, what the middleware does for
	// that rule: its fail policy and local budget. A rule that endpoints
	// name but Rules does not list fails open and has no local budget.
	Rules map[string]Rule
	// TrustedProxies are the addresses (or prefixes) of the proxies in
	// front of the service. A request whose peer is one of them has its
	// client address taken from ClientIPHeader: the right-most address in
	// it that is not a trusted proxy. A request from any other peer is
	// keyed by the peer's address, whatever headers it sends, so a caller
	// cannot choose its own bucket.
	TrustedProxies []netip.Prefix
	// ClientIPHeader is "X-Forwarded-For" (the default) or "Forwarded"
	// (RFC 7239, its for= parameters).
	ClientIPHeader string
	// IPv6Prefix is how many leading bits of an IPv6 client address key
	// it (default 64: one bucket per /64, the block a single subscriber is
	// usually given; 128 keys every address apart).
	IPv6Prefix int
	// KeyPrefix starts every key sent to the server (default none), e.g.
	// to keep two services' keys apart under shared rules.
	KeyPrefix string
	// Headers selects the rate-limit fields on responses (default: the
	// draft's RateLimit and RateLimit-Policy and the legacy X-RateLimit-*
	// with delta seconds). NoHeaders sends none.
	Headers client.HeaderStyle
	// NoHeaders turns the rate-limit fields off (Retry-After on 429 and
	// 503 responses is always sent).
	NoHeaders bool
	// Timeout bounds the wait for the server per request (default 20ms);
	// past it the rule's fail policy applies.
	Timeout time.Duration
	// ClosedRetryAfter is the Retry-After of a 503 sent by the closed fail
	// policy (default 1s; whole seconds, at least 1).
	ClosedRetryAfter time.Duration
	// Breaker configures the circuit breaker in front of the server (zero
	// fields take client.BreakerSettings' defaults: open after 5
	// consecutive failures, probe after 100ms, doubling to 10s).
	Breaker client.BreakerSettings
	// LogEvery bounds the fail policy's log lines: at most one per rule
	// per interval (default 1m).
	LogEvery time.Duration
}

// maxRules bounds the rules of one endpoint (RL.ALLOWALL takes 32 pairs;
// a request's decisions are kept on its stack).
const maxRules = 8

// Endpoint is one pattern's limits.
type Endpoint struct {
	// Pattern is a ServeMux pattern; empty for Config.Default.
	Pattern string
	// Rules are the rlserver rules a request must pass, all of them (at
	// most 8): with several, the request is decided as one (RL.ALLOWALL),
	// and if any denies, none is charged.
	Rules []string
	// Scope keys the request (default ScopeIP).
	Scope Scope
	// Header is the header holding the API key, for ScopeAPIKey.
	Header string
	// Cost is the units a request spends (default 1); CostFunc, if set,
	// computes it per request instead (a result below 1 counts as 1).
	Cost     int64
	CostFunc func(*http.Request) int64
	// Unlimited lets the endpoint's requests through without a decision,
	// e.g. for health checks. Rules must then be empty.
	Unlimited bool
}

// Scope says what a request is keyed by.
type Scope string

const (
	// ScopeUser keys by the user the authentication stage put in the
	// request's context (WithUser, or Options.User). A request without a
	// user is keyed by its client address instead, never by one bucket
	// shared by every anonymous caller.
	ScopeUser Scope = "user"
	// ScopeAPIKey keys by the value of the endpoint's Header (hashed; the
	// key itself never leaves the process). A request without it is keyed
	// by its client address. Put the middleware after the stage that
	// checks API keys, or a caller can spread over many buckets by
	// inventing keys.
	ScopeAPIKey Scope = "apikey"
	// ScopeIP keys by the client address (see Config.TrustedProxies).
	ScopeIP Scope = "ip"
	// ScopeGlobal is one key for all requests.
	ScopeGlobal Scope = "global"
)

// Rule is what the middleware does for one rlserver rule.
type Rule struct {
	// Fail is what happens when the server cannot decide: it cannot be
	// reached, is slower than Config.Timeout, the breaker is open, or it
	// refuses the request as misconfigured. Default FailOpen.
	Fail FailPolicy
	// Local is the per-node limit FailLocal applies; required with it.
	Local *LocalLimit
	// Budget, if set, serves the rule from a local budget (see
	// client.Budget): reservations of Chunk units, served from memory.
	Budget *Budget
}

// FailPolicy is what a rule does without the server's decision.
type FailPolicy string

const (
	// FailOpen admits the request, counts it
	// (httplimit_fail_policy_total) and logs at most once per
	// Config.LogEvery.
	FailOpen FailPolicy = "open"
	// FailClosed refuses it: 503 Service Unavailable with Retry-After
	// (Config.ClosedRetryAfter).
	FailClosed FailPolicy = "closed"
	// FailLocal decides it with an in-process limiter under Rule.Local,
	// a coarse per-node limit, so degradation keeps a ceiling.
	FailLocal FailPolicy = "local"
)

// LocalLimit is a rule as rlserver defines one (algorithm, limit, window,
// burst), applied by each node on its own.
type LocalLimit struct {
	Algorithm string // token_bucket, leaky_bucket, fixed_window, sliding_log, sliding_counter
	Limit     int64
	Window    time.Duration
	Burst     int64 // buckets only; 0: none
	// MaxKeys bounds the keys the local limiter holds (default 10000);
	// when full, its state starts over, which errs on the side of
	// admitting (it is a coarse fallback).
	MaxKeys int
}

// Budget configures a rule's local budget; zero fields take
// client.BudgetOptions' defaults (chunk 20, low water chunk/4, hold 1s).
type Budget struct {
	Chunk    int64
	LowWater int64
	MaxHold  time.Duration
	MaxKeys  int
}

func (c *Config) setDefaults() {
	if c.ClientIPHeader == "" {
		c.ClientIPHeader = "X-Forwarded-For"
	}
	if c.IPv6Prefix == 0 {
		c.IPv6Prefix = 64
	}
	if c.Headers == 0 {
		c.Headers = client.DraftHeaders | client.LegacyHeaders
	}
	if c.Timeout == 0 {
		c.Timeout = 20 * time.Millisecond
	}
	if c.ClosedRetryAfter == 0 {
		c.ClosedRetryAfter = time.Second
	}
	if c.LogEvery == 0 {
		c.LogEvery = time.Minute
	}
}

// validate checks everything but the patterns (compile does those, with
// ServeMux itself).
func (c *Config) validate() error {
	switch {
	case !strings.EqualFold(c.ClientIPHeader, "X-Forwarded-For") && !strings.EqualFold(c.ClientIPHeader, "Forwarded"):
		return fmt.Errorf("client IP header %q: must be X-Forwarded-For or Forwarded", c.ClientIPHeader)
	case c.IPv6Prefix < 1 || c.IPv6Prefix > 128:
		return fmt.Errorf("IPv6 prefix %d: must be from 1 to 128", c.IPv6Prefix)
	case c.Timeout < 0:
		return fmt.Errorf("timeout %v: must be positive", c.Timeout)
	case c.ClosedRetryAfter < 0:
		return fmt.Errorf("closed retry-after %v: must be positive", c.ClosedRetryAfter)
	}
	hasRoot := false
	for i := range c.Endpoints {
		e := &c.Endpoints[i]
		if e.Pattern == "" {
			return fmt.Errorf("endpoint %d: no pattern", i+1)
		}
		if e.Pattern == "/" {
			hasRoot = true
		}
		if err := e.validate(); err != nil {
			return fmt.Errorf("endpoint %d (%s): %w", i+1, e.Pattern, err)
		}
	}
	if c.Default == nil && !hasRoot {
		return errors.New("no default: requests that match no endpoint would be unlimited; " +
			"set a default (or a \"/\" endpoint), or make that explicit with an unlimited default")
	}
	if c.Default != nil {
		if c.Default.Pattern != "" {
			return fmt.Errorf("default: has a pattern %q (it applies to requests no endpoint matches)", c.Default.Pattern)
		}
		if err := c.Default.validate(); err != nil {
			return fmt.Errorf("default: %w", err)
		}
	}
	for name, r := range c.Rules {
		if err := r.validate(); err != nil {
			return fmt.Errorf("rule %s: %w", name, err)
		}
	}
	return nil
}

func (e *Endpoint) validate() error {
	if e.Unlimited {
		if len(e.Rules) > 0 {
			return errors.New("unlimited, yet names rules")
		}
		return nil
	}
	if len(e.Rules) == 0 {
		return errors.New("no rules (say unlimited to let its requests through)")
	}
	if len(e.Rules) > maxRules {
		return fmt.Errorf("%d rules: at most %d", len(e.Rules), maxRules)
	}
	seen := map[string]bool{}
	for _, r := range e.Rules {
		if r == "" || seen[r] {
			return fmt.Errorf("rule %q empty or named twice", r)
		}
		seen[r] = true
	}
	switch e.Scope {
	case "", ScopeUser, ScopeIP, ScopeGlobal:
		if e.Header != "" {
			return fmt.Errorf("header %q given for scope %s (only apikey takes one)", e.Header, e.scope())
		}
	case ScopeAPIKey:
		if e.Header == "" {
			return errors.New("scope apikey needs the header that holds the key")
		}
	default:
		return fmt.Errorf("scope %q: must be user, apikey, ip or global", e.Scope)
	}
	if e.Cost < 0 {
		return fmt.Errorf("cost %d: must be at least 1", e.Cost)
	}
	return nil
}

func (e *Endpoint) scope() Scope {
	if e.Scope == "" {
		return ScopeIP
	}
	return e.Scope
}

func (r Rule) validate() error {
	switch r.Fail {
	case "", FailOpen, FailClosed:
		if r.Local != nil {
			return fmt.Errorf("a local limit is given, but the fail policy is %s (local uses it)", r.failPolicy())
		}
	case FailLocal:
		if r.Local == nil {
			return errors.New("fail policy local needs a local limit")
		}
		if _, err := r.Local.params(); err != nil {
			return fmt.Errorf("local limit: %w", err)
		}
	default:
		return fmt.Errorf("fail policy %q: must be open, closed or local", r.Fail)
	}
	if b := r.Budget; b != nil && (b.Chunk < 0 || b.MaxHold < 0 || b.MaxKeys < 0) {
		return errors.New("budget: chunk, max hold and max keys must not be negative")
	}
	return nil
}

func (r Rule) failPolicy() FailPolicy {
	if r.Fail == "" {
		return FailOpen
	}
	return r.Fail
}

// params validates the limit as rlserver validates a rule, and returns its
// numbers.
func (l *LocalLimit) params() (algorithms.Params, error) {
	burst := ""
	if l.Burst != 0 {
		burst = fmt.Sprint(l.Burst)
	}
	def, err := rules.ParseDef("local", l.Algorithm, fmt.Sprint(l.Limit), l.Window.String(), burst)
	if err != nil {
		return algorithms.Params{}, err
	}
	return def.Params(), nil
}
