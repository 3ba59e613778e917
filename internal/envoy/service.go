package envoy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/envoy/config"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/service"
)

// Defaults of Options.
const (
	DefaultMaxDescriptors    = 64
	DefaultMaxKeyBytes       = 64 << 10
	DefaultMaxOverrides      = 256
	DefaultMaxDetailedSeries = 1000
	// MaxGroup is the most distinct limited descriptors an all_or_nothing
	// domain decides as one (RESP's RL.ALLOWALL bound).
	MaxGroup = service.MaxGroup
)

// Options configure a Service. Only Limiter is required.
type Options struct {
	Limiter Limiter
	// Registerer receives the metrics (registered once, by NewService);
	// nil leaves them unregistered.
	Registerer prometheus.Registerer
	// Logger receives configuration loads and the first call for each
	// unknown domain; nil discards.
	Logger *slog.Logger
	// Now is the clock for the reset times the service computes itself (a
	// descriptor whose limit is 0, a fresh fixed-window key); nil is
	// time.Now.
	Now func() time.Time
	// MaxDescriptors bounds the descriptors of one request; MaxKeyBytes a
	// descriptor's counter key (set it to the keyspace's --max-key-size).
	MaxDescriptors int
	MaxKeyBytes    int
	// MaxOverrides bounds the distinct limit overrides (requests per unit,
	// unit, multiplier) requests may bring, each of which is a rule.
	MaxOverrides int
	// MaxDetailedSeries bounds the metric series whose labels come from
	// request values (detailed_metric, value_to_metric, overrides).
	MaxDetailedSeries int
	// Check, if set, is a rule of the server's own a configuration must
	// also follow (cluster mode's: an all_or_nothing domain's counters in
	// one slot); its error refuses the configuration as a broken one is.
	Check func(cfg *config.Config) error
}

// Service answers ShouldRateLimit from the current configuration. It is
// safe for concurrent use: a request reads the configuration with one
// atomic load; Apply and a new override are serialised by a mutex and never
// block requests.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer

	lim  Limiter
	log  *slog.Logger
	now  func() time.Time
	opts Options
	m    *metrics
	c    counters

	state     atomic.Pointer[state]
	mu        sync.Mutex // held while publishing rules: Apply, a new override
	overrides atomic.Pointer[overrideSet]
	// lingering are the rules of configurations replaced while requests
	// still decide under them (Apply); every publication keeps them until
	// those requests are done. Guarded by mu.
	lingering []rules.Def

	unknownMu     sync.Mutex
	unknownLogged map[string]bool // domains logged since the last Apply, at most maxUnknownLogged
	unknownCapped bool            // more were seen, and that was logged
}

// state is one published configuration with its metric handles.
type state struct {
	cfg      *config.Config
	nodes    []*nodeMetrics // by config.Node.Index
	loadedAt time.Time
	// inUse counts the requests deciding under this configuration
	// (acquire): Apply deletes the rules a new configuration drops only
	// once the requests still using the old one are done.
	inUse atomic.Int64
}

// acquire returns the configuration in force, counted in its inUse until
// the caller's release. It counts first and checks the configuration is
// still in force after, so an Apply that swapped it meanwhile either sees
// the count or is seen here (and the next one is taken).
func (s *Service) acquire() *state {
	for {
		st := s.state.Load()
		st.inUse.Add(1)
		if s.state.Load() == st {
			return st
		}
		st.inUse.Add(-1)
	}
}

func (st *state) release() { st.inUse.Add(-1) }

// drainTimeout bounds how long Apply waits for requests still deciding
// under the configuration it replaces (each has its own deadline, far
// shorter); past it the dropped rules are deleted anyway, and a request
// that loses its rule is decided again (shouldRateLimit).
const drainTimeout = 10 * time.Second

// waitUnused waits until no request decides under st any more, or
// drainTimeout has passed. Publishing is rare (a reload), so it polls.
func waitUnused(st *state) bool {
	for deadline := time.Now().Add(drainTimeout); st.inUse.Load() != 0; {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// overrideSet is the limit overrides seen so far and their rules. It only
// grows (a reload keeps it: the overrides come from Envoy, not the files).
type overrideSet struct {
	names map[config.Override]string
	defs  []rules.Def
}

const maxUnknownLogged = 100

// NewService returns a service with an empty configuration (every domain
// unknown) until Apply publishes one, and registers its metrics.
func NewService(opts Options) (*Service, error) {
	if opts.Limiter == nil {
		return nil, errors.New("envoy: Options.Limiter is required")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&opts.MaxDescriptors, DefaultMaxDescriptors)
	def(&opts.MaxKeyBytes, DefaultMaxKeyBytes)
	def(&opts.MaxOverrides, DefaultMaxOverrides)
	def(&opts.MaxDetailedSeries, DefaultMaxDetailedSeries)
	s := &Service{
		lim:           opts.Limiter,
		log:           opts.Logger,
		now:           opts.Now,
		opts:          opts,
		m:             newMetrics(opts.Registerer, opts.MaxDetailedSeries),
		unknownLogged: map[string]bool{},
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.state.Store(&state{cfg: &config.Config{Domains: map[string]*config.Domain{}}})
	s.overrides.Store(&overrideSet{names: map[config.Override]string{}})
	return s, nil
}

// Apply publishes cfg. Requests already matched against the configuration
// in force must still find their rules, and requests matched against cfg
// must find cfg's, so the rules change in two steps around the switch:
// first cfg's rules plus the current ones cfg drops (a changed rule takes
// its new numbers at once), then, once requests match against cfg, cfg's
// alone. A request that still loses its rule in the second step is decided
// again under cfg (see shouldRateLimit); Apply waits for the requests
// deciding under the old configuration (acquire) before the second step, so
// that happens only past drainTimeout. On error the current configuration
// stays.
func (s *Service) Apply(cfg *config.Config) error {
	if s.opts.Check != nil {
		if err := s.opts.Check(cfg); err != nil {
			s.loadFailed()
			return err
		}
	}
	s.mu.Lock()
	final := append(slices.Clip(cfg.Defs), s.overrides.Load().defs...)
	both := final
	keep := make(map[string]bool, len(final))
	for _, d := range final {
		keep[d.Name] = true
	}
	for _, d := range slices.Concat(s.state.Load().cfg.Defs, s.lingering) {
		if !keep[d.Name] {
			keep[d.Name] = true
			both = append(slices.Clip(both), d)
		}
	}
	if err := s.lim.SetRules(both); err != nil {
		s.mu.Unlock()
		s.loadFailed()
		return fmt.Errorf("publishing the Envoy configuration's rules: %w", err)
	}
	next := &state{cfg: cfg, nodes: make([]*nodeMetrics, cfg.Nodes), loadedAt: s.now()}
	live := map[[2]string]bool{}
	for _, dom := range cfg.Domains {
		dom.Walk(func(n *config.Node) {
			if n.Limit != nil {
				next.nodes[n.Index] = s.m.forNode(dom.Name, n.StatsKey)
				live[[2]string{dom.Name, n.StatsKey}] = true
			}
		})
	}
	prev := s.state.Swap(next)
	s.lingering = both[len(final):]
	s.mu.Unlock()
	if len(both) != len(final) {
		// Outside mu: a request deciding under prev may need it to
		// publish a limit override.
		if !waitUnused(prev) {
			s.log.Warn("Envoy configuration: requests still deciding under the previous configuration; deleting the rules it dropped anyway", "after", drainTimeout)
		}
		s.dropLingering(next)
	}
	var gone []*nodeMetrics
	for _, nm := range prev.nodes {
		if !live[[2]string{nm.domain, nm.descriptor}] {
			gone = append(gone, nm)
		}
	}
	s.m.forget(gone)
	s.m.loads.Inc()
	s.c.loads.Add(1)
	s.unknownMu.Lock()
	clear(s.unknownLogged)
	s.unknownCapped = false
	s.unknownMu.Unlock()
	return nil
}

// dropLingering deletes the rules configurations before next dropped, if
// next is still in force (a newer Apply deletes them in its turn).
func (s *Service) dropLingering(next *state) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state.Load() != next || len(s.lingering) == 0 {
		return
	}
	if err := s.lim.SetRules(append(slices.Clip(next.cfg.Defs), s.overrides.Load().defs...)); err != nil {
		// next is in force; the dropped rules stay (unused) until the
		// next successful publication.
		s.log.Warn("Envoy configuration: could not delete the rules it no longer uses", "err", err)
		return
	}
	s.lingering = nil
}

func (s *Service) loadFailed() {
	s.m.loadErrs.Inc()
	s.c.loadErrors.Add(1)
}

// Config returns the configuration in force and when it was published.
func (s *Service) Config() (*config.Config, time.Time) {
	st := s.state.Load()
	return st.cfg, st.loadedAt
}

// Stats are the service's totals, for RL.INFO.
type Stats struct {
	// Requests is every ShouldRateLimit call; Invalid those answered
	// InvalidArgument; Failed those answered another error; OverLimit those
	// answered OVER_LIMIT; UnknownDomain those naming a domain the
	// configuration lacks.
	Requests, Invalid, Failed, OverLimit, UnknownDomain uint64
	// ShadowDenied counts descriptors over their limit answered OK
	// because of shadow_mode.
	ShadowDenied uint64
	// ConfigLoads and ConfigLoadErrors count configurations published and
	// refused; ConfigLoadedAt is when the current one was published (zero
	// before the first).
	ConfigLoads, ConfigLoadErrors uint64
	ConfigLoadedAt                time.Time
	// Domains and Rules describe the configuration in force; Overrides
	// is the distinct limit overrides requests have brought.
	Domains, Rules, Overrides int
}

// Stats returns the totals so far.
func (s *Service) Stats() Stats {
	st := s.state.Load()
	return Stats{
		Requests: s.c.requests.Load(), Invalid: s.c.invalid.Load(), Failed: s.c.failed.Load(),
		OverLimit: s.c.overLimit.Load(), UnknownDomain: s.c.unknownDomain.Load(), ShadowDenied: s.c.shadowDenied.Load(),
		ConfigLoads: s.c.loads.Load(), ConfigLoadErrors: s.c.loadErrors.Load(), ConfigLoadedAt: st.loadedAt,
		Domains: len(st.cfg.Domains), Rules: len(st.cfg.Defs), Overrides: len(s.overrides.Load().defs),
	}
}

// ShouldRateLimit answers one call. A malformed request is answered
// InvalidArgument; a failure of the limiter Unavailable (Envoy then applies
// its failure_mode_deny).
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	start := time.Now()
	resp, err := s.shouldRateLimit(ctx, req)
	s.m.duration.Observe(time.Since(start).Seconds())
	code := status.Code(err)
	if code == codes.OK {
		s.m.ok.Inc()
	} else {
		s.m.requests.WithLabelValues(code.String()).Inc()
	}
	s.c.requests.Add(1)
	switch {
	case code == codes.InvalidArgument:
		s.c.invalid.Add(1)
	case err != nil:
		s.c.failed.Add(1)
	case resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT:
		s.c.overLimit.Add(1)
	}
	return resp, err
}

func (s *Service) shouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	// envoyproxy/ratelimit's own words for these two (it answers them
	// with the gRPC code Unknown).
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	}
	n := len(req.GetDescriptors())
	if n == 0 {
		return nil, status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	}
	if n > s.opts.MaxDescriptors {
		return nil, status.Errorf(codes.InvalidArgument, "%d descriptors in one request; at most %d are allowed", n, s.opts.MaxDescriptors)
	}
	for attempt := 0; ; attempt++ {
		st := s.acquire()
		dom := st.cfg.Domains[req.GetDomain()]
		if dom == nil {
			st.release()
			s.unknownDomain(req.GetDomain())
			return allOK(n), nil
		}
		resp, err := s.decide(ctx, st, dom, req)
		st.release()
		// A reload between matching and deciding can delete a rule the
		// request matched: decide again, once, under the new configuration.
		if err != nil && attempt == 0 && status.Code(err) == codes.Unavailable && s.state.Load() != st {
			continue
		}
		return resp, err
	}
}

// allOK is the answer for an unknown domain, as envoyproxy/ratelimit gives
// it: one OK status per descriptor.
func allOK(n int) *rlsv3.RateLimitResponse {
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)}
	for i := range resp.Statuses {
		resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	}
	return resp
}

func (s *Service) unknownDomain(domain string) {
	s.m.unknown.Inc()
	s.c.unknownDomain.Add(1)
	s.unknownMu.Lock()
	defer s.unknownMu.Unlock()
	switch {
	case s.unknownLogged[domain] || s.unknownCapped:
		return
	case len(s.unknownLogged) == maxUnknownLogged:
		s.unknownCapped = true
		s.log.Warn("ShouldRateLimit: more unknown domains; not logging them until a new configuration is published", "logged", maxUnknownLogged)
		return
	}
	s.unknownLogged[domain] = true
	if len(domain) > 200 {
		domain = domain[:200] + "…"
	}
	s.log.Warn("ShouldRateLimit for a domain the Envoy configuration does not have; answering OK (logged once per domain)", "domain", domain)
}

// itemKind is what a request descriptor turned out to be.
type itemKind uint8

const (
	kindNone      itemKind = iota // no limit applies: OK
	kindReplaced                  // its limit was replaced by another's in the request: OK
	kindUnlimited                 // unlimited: OK with the largest remaining
	kindBanned                    // requests_per_unit 0: OVER_LIMIT without a decision
	kindLimited                   // decided by the limiter
)

// item is one request descriptor on its way to a status.
type item struct {
	kind  itemKind
	limit *config.Limit
	node  *config.Node // nil for a request's own limit
	key   string
	cost  uint64
	// check: the descriptor's hits_addend is 0 (or it asks for a refund,
	// which rlserver does not do through this API): report, charge
	// nothing.
	check bool
	// tooCostly: cost is above the limit's capacity, so it can never pass.
	tooCostly bool
	// grouped: decided in the domain's all-or-nothing group.
	grouped bool
	req     int // index of its Request in its batch
	m       *nodeMetrics
}

func (it *item) shadow() bool { return it.node != nil && it.node.ShadowMode }
func (it *item) quota() bool  { return it.node != nil && it.node.QuotaMode }

// cost is the descriptor's hits: its own hits_addend when set, 0 included
// (a check that charges nothing), else the request's, at least 1 — as
// envoyproxy/ratelimit counts.
func cost(req *rlsv3.RateLimitRequest, d *rlv3.RateLimitDescriptor) uint64 {
	if h := d.GetHitsAddend(); h != nil {
		return h.GetValue()
	}
	return uint64(max(1, req.GetHitsAddend()))
}

func (s *Service) decide(ctx context.Context, st *state, dom *config.Domain, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	descs := req.GetDescriptors()
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	sc.items = slices.Grow(sc.items[:0], len(descs))[:len(descs)]
	items := sc.items
	var replacing []string
	path := sc.path[:0]
	defer func() { sc.path = path }()
	key := sc.key[:0]
	defer func() { sc.key = key }()
	for i, d := range descs {
		it := &items[i]
		it.cost = cost(req, d)
		it.check = it.cost == 0 || d.GetIsNegativeHits()
		var keyPath []*config.Node // the matched levels, for share_threshold; none for an override
		if o := d.GetLimit(); o != nil {
			if err := s.planOverride(it, dom, d, o, i); err != nil {
				return nil, err
			}
		} else {
			s.plan(it, st, dom, d, &path)
			keyPath = path
			if it.kind != kindNone {
				replacing = append(replacing, it.limit.Replaces...)
			}
		}
		if it.kind != kindLimited {
			continue
		}
		key = config.AppendKey(key[:0], dom.Name, d.GetEntries(), keyPath)
		if len(key) > s.opts.MaxKeyBytes {
			return nil, status.Errorf(codes.InvalidArgument, "descriptor %d: its counter key would be %d bytes; at most %d are allowed", i, len(key), s.opts.MaxKeyBytes)
		}
		it.key = string(key)
		it.tooCostly = !it.check && it.cost > uint64(it.limit.Capacity())
	}
	// replaces: a named limit is dropped when another limit matched by the
	// same request replaces it (an unlimited one cannot be dropped).
	if len(replacing) > 0 {
		for i := range items {
			it := &items[i]
			if (it.kind == kindLimited || it.kind == kindBanned) && it.limit.Name != "" && slices.Contains(replacing, it.limit.Name) {
				it.kind = kindReplaced
			}
		}
	}
	dec, err := s.run(ctx, dom, items, sc)
	if err != nil {
		return nil, err
	}
	return s.respond(dom, items, dec), nil
}

// plan matches a descriptor against the domain's tree; *path receives the
// descriptors matched at each level.
func (s *Service) plan(it *item, st *state, dom *config.Domain, d *rlv3.RateLimitDescriptor, path *[]*config.Node) {
	var leaf *config.Node
	leaf, *path = dom.Match(d.GetEntries(), *path)
	if leaf == nil {
		return
	}
	it.node, it.limit = leaf, leaf.Limit
	it.m = st.nodes[leaf.Index]
	if label := dynamicDescriptor(d.GetEntries(), *path); label != "" {
		it.m = s.m.forDynamic(dom.Name, label, it.m)
	}
	switch {
	case it.limit.Unlimited:
		it.kind = kindUnlimited
	case it.limit.RequestsPerUnit == 0:
		it.kind = kindBanned
	default:
		it.kind = kindLimited
	}
}

// planOverride makes a request's own limit the descriptor's, under a rule
// named after its numbers (published on first sight). Unlike
// envoyproxy/ratelimit (which exits on an override without a unit), a
// malformed override is InvalidArgument.
func (s *Service) planOverride(it *item, dom *config.Domain, d *rlv3.RateLimitDescriptor, o *rlv3.RateLimitDescriptor_RateLimitOverride, i int) error {
	ov := config.Override{
		RequestsPerUnit: o.GetRequestsPerUnit(),
		Unit:            config.Unit(o.GetUnit()),
		Multiplier:      max(1, o.GetUnitMultiplier().GetValue()),
	}
	if ov.Unit < config.UnitSecond || ov.Unit > config.UnitYear {
		return status.Errorf(codes.InvalidArgument, "descriptor %d: limit override unit %s is not one of SECOND, MINUTE, HOUR, DAY, MONTH, YEAR", i, o.GetUnit())
	}
	if uint64(ov.Multiplier) > uint64(rules.MaxWindow/ov.Unit.Duration()) {
		return status.Errorf(codes.InvalidArgument, "descriptor %d: limit override window %d × %s is longer than 366 days", i, ov.Multiplier, o.GetUnit())
	}
	it.limit = &config.Limit{
		RequestsPerUnit: ov.RequestsPerUnit, Unit: ov.Unit, Multiplier: ov.Multiplier,
		Window: ov.Window(), Algorithm: algorithms.FixedWindow,
	}
	it.m = s.overrideMetrics(dom.Name, d.GetEntries())
	if ov.RequestsPerUnit == 0 {
		it.kind = kindBanned
		return nil
	}
	name, err := s.override(ov)
	if err != nil {
		return err
	}
	it.limit.Rule = name
	it.kind = kindLimited
	return nil
}

// override returns the rule of an override, publishing it on first use.
func (s *Service) override(o config.Override) (string, error) {
	if name, ok := s.overrides.Load().names[o]; ok {
		return name, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.overrides.Load()
	if name, ok := cur.names[o]; ok {
		return name, nil
	}
	if len(cur.defs) >= s.opts.MaxOverrides {
		return "", status.Errorf(codes.ResourceExhausted, "requests have brought %d distinct limit overrides; at most %d are kept", len(cur.defs), s.opts.MaxOverrides)
	}
	def, err := config.OverrideDef(o)
	if err != nil {
		return "", status.Error(codes.InvalidArgument, err.Error())
	}
	next := &overrideSet{names: make(map[config.Override]string, len(cur.names)+1), defs: append(slices.Clip(cur.defs), def)}
	for k, v := range cur.names {
		next.names[k] = v
	}
	next.names[o] = def.Name
	defs := slices.Concat(s.state.Load().cfg.Defs, s.lingering, next.defs)
	if err := s.lim.SetRules(defs); err != nil {
		return "", status.Errorf(codes.Unavailable, "publishing the rule of a limit override: %v", err)
	}
	s.overrides.Store(next)
	return def.Name, nil
}

// OverrideRule publishes the rule of the limit override name names (see
// config.ParseOverrideName), as a request carrying that limit would, and
// reports whether the rule is there now. In cluster mode the node owning a
// key is asked to decide an override another node's front end received,
// by the rule's name alone.
func (s *Service) OverrideRule(name string) bool {
	o, ok := config.ParseOverrideName(name)
	if !ok {
		return false
	}
	_, err := s.override(o)
	return err == nil
}

// overrideMetrics labels a request's own limit by its entries' keys (values
// would be unbounded).
func (s *Service) overrideMetrics(domain string, entries []*rlv3.RateLimitDescriptor_Entry) *nodeMetrics {
	label := "limit_override"
	fallback := s.m.forNode(domain, label)
	for _, e := range entries {
		label += "." + e.GetKey()
	}
	return s.m.forDynamic(domain, label, fallback)
}

// run asks the limiter for the limited items' decisions. In an
// all_or_nothing domain the items that can deny (not checks, not shadow or
// quota mode) are one group, charged together or not at all; the group
// fails without asking when one of them can never pass (a cost above its
// capacity, or a limit of 0), and its members are then only peeked. It
// returns one decision per item (zero for items not decided).
func (s *Service) run(ctx context.Context, dom *config.Domain, items []item, sc *scratch) ([]algorithms.Decision, error) {
	group, single := sc.group[:0], sc.single[:0]
	defer func() { sc.group, sc.single = group, single }()
	blocked := false
	for i := range items {
		it := &items[i]
		canDeny := !it.check && !it.shadow() && !it.quota()
		if dom.AllOrNothing && canDeny && (it.tooCostly || it.kind == kindBanned) {
			blocked = true
		}
		if it.kind != kindLimited {
			continue
		}
		if !dom.AllOrNothing || !canDeny || it.tooCostly {
			it.req = len(single)
			single = append(single, s.request(it))
			continue
		}
		it.grouped = true
		// The same (key, rule) twice is one pair spending both costs.
		merged := false
		for j := range group {
			if group[j].Key == it.key && group[j].Rule == it.limit.Rule {
				group[j].Cost += int64(it.cost)
				it.req, merged = j, true
				break
			}
		}
		if !merged {
			it.req = len(group)
			group = append(group, Request{Key: it.key, Rule: it.limit.Rule, Cost: int64(it.cost)})
		}
	}
	// A merged pair may now cost more than its capacity: it can never
	// pass, so the group fails, and the pair is only peeked at one unit.
	for i := range items {
		it := &items[i]
		if it.grouped && group[it.req].Cost > it.limit.Capacity() {
			it.tooCostly, blocked = true, true
		}
	}
	if len(group) > MaxGroup {
		return nil, status.Errorf(codes.InvalidArgument, "all_or_nothing domain '%s': %d limited descriptors in one request; at most %d are decided as one", dom.Name, len(group), MaxGroup)
	}
	var groupDec, singleDec []algorithms.Decision
	var err error
	if blocked {
		for i := range items {
			if it := &items[i]; it.grouped {
				group[it.req].Peek = true
				if it.tooCostly {
					group[it.req].Cost = 1
				}
			}
		}
		groupDec, err = s.call(ctx, group, false)
	} else {
		groupDec, err = s.call(ctx, group, true)
	}
	if err != nil {
		return nil, err
	}
	if singleDec, err = s.call(ctx, single, false); err != nil {
		return nil, err
	}
	sc.dec = slices.Grow(sc.dec[:0], len(items))[:len(items)]
	out := sc.dec
	for i := range items {
		it := &items[i]
		switch {
		case it.kind != kindLimited:
		case it.grouped:
			out[i] = groupDec[it.req]
		default:
			out[i] = singleDec[it.req]
		}
	}
	return out, nil
}

// scratch is one call's working memory, taken from scratchPool and given
// back when the call is answered, so that a call allocates little beyond
// its response. Nothing in it outlives the call: the limiter keeps no
// request after Decide returns (Limiter's contract), and the response
// copies what it needs.
type scratch struct {
	items         []item
	path          []*config.Node
	key           []byte
	group, single []Request
	dec           []algorithms.Decision
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooledItems bounds the items a pooled scratch keeps, so one request
// with many descriptors does not pin its memory in the pool.
const maxPooledItems = 64

// release clears the references sc holds (keys, nodes, limits) and returns
// it to the pool.
func (sc *scratch) release() {
	if cap(sc.items) > maxPooledItems {
		return
	}
	clear(sc.items[:cap(sc.items)])
	clear(sc.path[:cap(sc.path)])
	clear(sc.group[:cap(sc.group)])
	clear(sc.single[:cap(sc.single)])
	scratchPool.Put(sc)
}

// request is an item's Request outside a group: a check, or a cost that can
// never pass, only peeks (at one unit, to read the key's state).
func (s *Service) request(it *item) Request {
	r := Request{Key: it.key, Rule: it.limit.Rule, Cost: int64(it.cost)}
	if it.check || it.tooCostly {
		r.Cost, r.Peek = 1, true
	}
	return r
}

func (s *Service) call(ctx context.Context, reqs []Request, allOrNothing bool) ([]algorithms.Decision, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	dec, err := s.lim.Decide(ctx, reqs, allOrNothing)
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, status.Errorf(codes.Unavailable, "rate limit decision failed: %v", err)
	}
	if len(dec) != len(reqs) {
		return nil, status.Errorf(codes.Internal, "the limiter answered %d decisions for %d requests", len(dec), len(reqs))
	}
	return dec, nil
}

// respond turns the items and their decisions into the response.
func (s *Service) respond(dom *config.Domain, items []item, dec []algorithms.Decision) *rlsv3.RateLimitResponse {
	now := s.now()
	resp, parts := newResponse(len(items))
	var retryAfter time.Duration // the longest wait among denials
	for i := range items {
		it := &items[i]
		p := &parts[i]
		st := &p.status
		over := false
		var reset, retry time.Duration
		switch it.kind {
		case kindNone, kindReplaced:
			continue
		case kindUnlimited:
			st.LimitRemaining = math.MaxUint32
			continue
		case kindBanned:
			// envoyproxy/ratelimit counts hits against a limit of 0: any
			// hit is over it, a check (0 hits) is not.
			reset = windowLeft(now, it.limit.Window)
			over = !it.check
		case kindLimited:
			// A grouped item's decision says whether it alone would pass
			// when the group failed, so one rule covers every case.
			d := dec[i]
			reset = time.Duration(d.ResetAfter)
			if reset == 0 && it.limit.Algorithm == algorithms.FixedWindow {
				reset = windowLeft(now, it.limit.Window) // a fresh key's window still ends
			}
			switch {
			case it.tooCostly:
				over = true
			case it.check || d.Allowed:
				st.LimitRemaining = clampUint32(d.Remaining)
			default:
				over, retry = true, time.Duration(d.RetryAfter)
			}
		}
		st.CurrentLimit = p.currentLimit(it.limit)
		st.DurationUntilReset = &p.reset
		p.reset.Seconds = wholeSeconds(reset) // Envoy reads only the seconds; a client told to wait must never be early
		if over {
			it.m.over.Inc()
		} else {
			it.m.ok.Inc()
		}
		switch {
		case !over:
		case it.shadow():
			// Answered OK; the would-be denial is counted.
			it.m.shadow.Inc()
			s.c.shadowDenied.Add(1)
		case it.quota():
			// envoyproxy/ratelimit 3fb7025: OK, keeping the limit and
			// remaining, without a reset.
			st.DurationUntilReset = nil
		default:
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
			if retry == 0 { // it can never pass within this window
				retry = reset
			}
			retryAfter = max(retryAfter, retry)
		}
	}
	resp.ResponseHeadersToAdd = headers(dom.Headers, items, resp, retryAfter)
	return resp
}
