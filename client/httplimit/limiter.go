// Package httplimit is net/http middleware that rate-limits an HTTP API
// with rlserver: one stage in front of the application's handlers
// (Limiter.Wrap), configured per endpoint.
//
//	cfg, err := httplimit.Load("limits.yaml")
//	lim, err := httplimit.New(rdb, cfg, httplimit.WithRegistry(reg))
//	http.ListenAndServe(":8080", lim.Wrap(mux))
//
// Each request is matched to an endpoint by its method and path, with
// ServeMux's patterns and precedence (see Config.Endpoints); requests that
// match none fall under the default, which the configuration must give, so
// nothing is silently unlimited. The endpoint names the rlserver rules the
// request must pass (several are decided as one RL.ALLOWALL: all or
// nothing), its cost, and what it is keyed by: the user (WithUser), an API
// key header, the client address (through trusted proxies only) or one
// global key.
//
// An admitted request reaches the application with the rate-limit fields
// on its response; a denied one gets 429 Too Many Requests with
// Retry-After (whole seconds, at least 1) and an RFC 9457
// application/problem+json body of the quota-exceeded type. The fields are
// the IETF draft's RateLimit and RateLimit-Policy (one item per rule that
// applied) and the legacy X-RateLimit-*, selectable (Config.Headers). With
// a local budget (Rule.Budget) Remaining is a hint: the node serves units
// it reserved earlier, and other nodes hold and spend units too.
//
// When the server cannot decide (unreachable, slower than Config.Timeout,
// the circuit breaker open, a misconfigured rule), each rule's fail policy
// applies: admit (open), refuse with 503 (closed), or decide with a coarse
// per-node limiter (local). The configuration can be swapped at run time
// (Reload); requests read it with one atomic load, never a lock.
package httplimit

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/client"
)

// Limiter is the middleware. It is safe for concurrent use; Close stops
// its goroutines and gives back the units its budgets hold.
type Limiter struct {
	c     *client.Client
	state atomic.Pointer[compiled]
	opts  options
	m     *metrics

	mu     sync.Mutex            // serialises Reload and Close
	rules  map[string]*ruleState // the rules' states, reused across reloads; under mu
	closed bool                  // under mu

	stop chan struct{}
	kick chan struct{} // asks the rule refresher to run now
	wg   sync.WaitGroup
}

// Option configures New.
type Option func(*options)

type options struct {
	registry    prometheus.Registerer
	logger      *slog.Logger
	user        func(*http.Request) string
	now         func() time.Time
	ruleRefresh time.Duration
}

// WithRegistry registers the middleware's metrics on reg.
func WithRegistry(reg prometheus.Registerer) Option { return func(o *options) { o.registry = reg } }

// WithLogger sets where fail-policy activations are logged (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithUserFunc sets how ScopeUser finds a request's user (default: the
// value WithUser put in its context). "" means anonymous.
func WithUserFunc(f func(*http.Request) string) Option { return func(o *options) { o.user = f } }

// withClock sets the clock (tests).
func withClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

type userKey struct{}

// WithUser returns a context carrying user, for ScopeUser: the
// authentication stage in front of the middleware calls it.
func WithUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

// User returns the user WithUser put in ctx, or "".
func User(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

// New returns the middleware for cfg, talking to rlserver through rdb
// (single node, sentinel or cluster; the caller closes it after Close).
// rdb must be built with ContextTimeoutEnabled: true: go-redis otherwise
// waits for its own ReadTimeout (3s by default) rather than the
// middleware's deadline, and New refuses it. The circuit breaker's settings
// are cfg's at New; Reload does not change them.
func New(rdb redis.UniversalClient, cfg Config, opts ...Option) (*Limiter, error) {
	if !contextTimeoutsEnabled(rdb) {
		return nil, errors.New("httplimit: the redis client must be built with ContextTimeoutEnabled: true, " +
			"or requests wait for its read timeout instead of the configured deadline")
	}
	o := options{logger: slog.Default(), now: time.Now, ruleRefresh: time.Minute}
	for _, f := range opts {
		f(&o)
	}
	if o.user == nil {
		o.user = func(r *http.Request) string { return User(r.Context()) }
	}
	m, err := newMetrics(o.registry)
	if err != nil {
		return nil, err
	}
	br := cfg.Breaker
	userHook := br.OnStateChange
	br.OnStateChange = func(from, to string) {
		m.breakerChanged(from, to)
		if userHook != nil {
			userHook(from, to)
		}
	}
	l := &Limiter{
		c:     client.New(rdb, client.WithBreaker(br), client.WithObserver(m.observe)),
		opts:  o,
		m:     m,
		rules: map[string]*ruleState{},
		stop:  make(chan struct{}),
		kick:  make(chan struct{}, 1),
	}
	if err := l.Reload(cfg); err != nil {
		m.unregister(o.registry) // so a corrected New can register them
		return nil, err
	}
	l.wg.Add(1)
	go l.refreshRules()
	return l, nil
}

// contextTimeoutsEnabled reports whether rdb honours context deadlines
// (true for client types it cannot inspect).
func contextTimeoutsEnabled(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// Client is the rlserver client the middleware uses (with its breaker).
func (l *Limiter) Client() *client.Client { return l.c }

// Wrap is the middleware: next runs for admitted requests.
func (l *Limiter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { l.serve(w, r, next) })
}

// Close stops the middleware's goroutines and gives back the units its
// local budgets hold, waiting as long as ctx allows. Stop serving requests
// first: after Close, budgeted rules fail (and their fail policy applies).
func (l *Limiter) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	states := l.rules
	l.rules = nil
	l.mu.Unlock()
	close(l.stop)
	l.wg.Wait()
	var errs []error
	for _, rs := range states {
		if rs.budget != nil {
			errs = append(errs, rs.budget.Close(ctx))
		}
	}
	return errors.Join(errs...)
}

// ruleState is what the middleware keeps per rlserver rule. It is reused
// across reloads while the rule's settings are unchanged, so budgets and
// local limiters keep their state.
type ruleState struct {
	name    string
	cfg     Rule
	timeout time.Duration // the budget's wait, part of its settings
	fail    FailPolicy
	budget  *client.Budget // nil without a local budget
	local   *localLimiter  // FailLocal's limiter
	window  atomic.Int64   // policy window in ns from RL.RULE GET; 0 until known
	lastLog atomic.Int64   // Unix ns of the last fail-policy log line
	logged  atomic.Int64   // activations since that line
	// The rule's series of httplimit_decisions_total and
	// httplimit_fail_policy_total, looked up once rather than per request.
	allowed, denied, failed, fellBack prometheus.Counter
}

func (rs *ruleState) sameSettings(r Rule, timeout time.Duration) bool {
	if (rs.cfg.Budget == nil) != (r.Budget == nil) || (rs.cfg.Local == nil) != (r.Local == nil) || rs.cfg.Fail != r.Fail {
		return false
	}
	if r.Budget != nil && (*rs.cfg.Budget != *r.Budget || rs.timeout != timeout) {
		return false
	}
	return r.Local == nil || *rs.cfg.Local == *r.Local
}

// Reload validates cfg and swaps it in atomically: each request sees the
// old configuration or the new one, never a mix. Rules whose settings did
// not change keep their budgets and local limiters; a budget whose
// settings changed is closed (its units given back) and started afresh. On
// error nothing changes.
func (l *Limiter) Reload(cfg Config) error {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("httplimit: reload after Close")
	}
	states := map[string]*ruleState{}
	var retired []*ruleState
	for _, name := range cfg.ruleNames() {
		r := cfg.Rules[name]
		if old := l.rules[name]; old != nil && old.sameSettings(r, cfg.Timeout) {
			states[name] = old
			continue
		}
		states[name] = l.newRuleState(name, r, cfg.Timeout)
	}
	c, err := compile(&cfg, states)
	if err != nil {
		for name, rs := range states {
			if l.rules[name] != rs {
				retired = append(retired, rs)
			}
		}
		l.retire(retired)
		return err
	}
	for name, rs := range l.rules {
		if states[name] != rs {
			retired = append(retired, rs)
		}
	}
	l.state.Store(c)
	l.rules = states
	l.retire(retired)
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return nil
}

func (l *Limiter) newRuleState(name string, r Rule, timeout time.Duration) *ruleState {
	rs := &ruleState{
		name: name, cfg: r, timeout: timeout, fail: r.failPolicy(),
		allowed:  l.m.decisions.WithLabelValues(name, "allowed"),
		denied:   l.m.decisions.WithLabelValues(name, "denied"),
		failed:   l.m.decisions.WithLabelValues(name, "failed"),
		fellBack: l.m.failPolicy.WithLabelValues(name, string(r.failPolicy())),
	}
	if r.Budget != nil {
		rs.cfg.Budget = new(Budget)
		*rs.cfg.Budget = *r.Budget
		rs.budget = client.NewBudget(l.c, name, client.BudgetOptions{
			Chunk: r.Budget.Chunk, LowWater: r.Budget.LowWater, MaxHold: r.Budget.MaxHold,
			MaxKeys: r.Budget.MaxKeys, Wait: timeout, Now: l.opts.now,
		})
	}
	if r.Local != nil {
		rs.cfg.Local = new(LocalLimit)
		*rs.cfg.Local = *r.Local
		rs.local = newLocalLimiter(name, r.Local, l.opts.now)
	}
	return rs
}

// retire closes the budgets of rule states no configuration uses any more,
// in the background (their refunds wait on the server).
func (l *Limiter) retire(states []*ruleState) {
	for _, rs := range states {
		if rs.budget == nil {
			continue
		}
		l.wg.Add(1)
		go func(b *client.Budget) {
			defer l.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			b.Close(ctx)
		}(rs.budget)
	}
}

// refreshRules learns each rule's window (RL.RULE GET) for the
// RateLimit-Policy field, after every reload and every ruleRefresh (rules
// can change on the server at any time).
func (l *Limiter) refreshRules() {
	defer l.wg.Done()
	t := time.NewTicker(l.opts.ruleRefresh)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.kick:
		case <-t.C:
		}
		for _, rs := range l.state.Load().rules {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			info, err := l.c.Rule(ctx, rs.name)
			cancel()
			if err == nil {
				rs.window.Store(int64(info.PolicyWindow()))
			}
		}
	}
}

// compiled is one configuration, ready for requests: immutable once
// published.
type compiled struct {
	mux     *http.ServeMux // patterns → *endpoint
	def     *endpoint
	rules   []*ruleState
	ip      ipConfig
	prefix  string
	headers client.HeaderStyle // 0: none
	timeout time.Duration
	closed  time.Duration // Retry-After of a closed fail policy
	every   time.Duration // between fail-policy log lines
}

// endpoint is one Endpoint, compiled. It is the handler registered for its
// pattern on the matching mux, but never serves: the mux only finds it.
type endpoint struct {
	pattern   string
	unlimited bool
	rules     []*ruleState
	scope     Scope
	header    string // canonical
	cost      int64
	costFunc  func(*http.Request) int64
}

func (*endpoint) ServeHTTP(http.ResponseWriter, *http.Request) {}

// ruleNames lists every rule the configuration mentions, sorted.
func (c *Config) ruleNames() []string {
	set := map[string]bool{}
	for name := range c.Rules {
		set[name] = true
	}
	for _, e := range c.Endpoints {
		for _, r := range e.Rules {
			set[r] = true
		}
	}
	if c.Default != nil {
		for _, r := range c.Default.Rules {
			set[r] = true
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func compile(cfg *Config, states map[string]*ruleState) (*compiled, error) {
	c := &compiled{
		mux: http.NewServeMux(), prefix: cfg.KeyPrefix, timeout: cfg.Timeout,
		closed: cfg.ClosedRetryAfter, every: cfg.LogEvery,
		ip: ipConfig{
			trusted: cfg.TrustedProxies, header: http.CanonicalHeaderKey(cfg.ClientIPHeader),
			forwarded: http.CanonicalHeaderKey(cfg.ClientIPHeader) == "Forwarded", v6bits: cfg.IPv6Prefix,
		},
	}
	if !cfg.NoHeaders {
		c.headers = cfg.Headers
	}
	for _, name := range cfg.ruleNames() {
		c.rules = append(c.rules, states[name])
	}
	build := func(e *Endpoint) *endpoint {
		ep := &endpoint{
			pattern: e.Pattern, unlimited: e.Unlimited, scope: e.scope(),
			header: http.CanonicalHeaderKey(e.Header), cost: max(e.Cost, 1), costFunc: e.CostFunc,
		}
		for _, r := range e.Rules {
			ep.rules = append(ep.rules, states[r])
		}
		return ep
	}
	for i := range cfg.Endpoints {
		e := &cfg.Endpoints[i]
		ep := build(e)
		if err := register(c.mux, e.Pattern, ep); err != nil {
			return nil, errors.New("endpoint " + strconv.Itoa(i+1) + " (" + e.Pattern + "): " + err.Error())
		}
		if e.Pattern == "/" {
			c.def = ep
		}
	}
	if c.def == nil {
		c.def = build(cfg.Default)
		if err := register(c.mux, "/", c.def); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// key is the server key r is counted under at ep.
func (c *compiled) key(ep *endpoint, r *http.Request, user func(*http.Request) string) string {
	switch ep.scope {
	case ScopeGlobal:
		return c.prefix + "global"
	case ScopeUser:
		if u := user(r); u != "" {
			if len(u) > 200 {
				return c.prefix + "u#" + hash(u)
			}
			return c.prefix + "u:" + u
		}
	case ScopeAPIKey:
		if k := headerValue(r, ep.header); k != "" {
			return c.prefix + "k:" + hash(k)
		}
	}
	if a, ok := c.ip.clientIP(r); ok {
		var stack [80]byte
		b := append(append(stack[:0], c.prefix...), "ip:"...)
		return string(a.AppendTo(b))
	}
	return c.prefix + "ip:" + r.RemoteAddr
}

func headerValue(r *http.Request, canonical string) string {
	if v := r.Header[canonical]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// hash is a secret's (an API key's) stand-in in server keys: 16 hex
// digits of xxhash64, so the secret never leaves the process.
func hash(s string) string {
	var b [16]byte
	const digits = "0123456789abcdef"
	h := xxhash.Sum64String(s)
	for i := 15; i >= 0; i-- {
		b[i] = digits[h&15]
		h >>= 4
	}
	return string(b[:])
}

func (ep *endpoint) costOf(r *http.Request) int64 {
	if ep.costFunc != nil {
		return max(ep.costFunc(r), 1)
	}
	return ep.cost
}
