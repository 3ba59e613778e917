package envoy

import (
	"strings"
	"sync"
	"sync/atomic"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/rlserver/rlserver/internal/envoy/config"
)

// Metrics. Label values are bounded: domain and descriptor come from the
// configuration (a descriptor is named by its StatsKey, "key1_value1.subkey1",
// as envoyproxy/ratelimit names its stats), except where the configuration
// asks for request values (detailed_metric, value_to_metric) and for
// requests' own limits (named by their entry keys); those labels are
// admitted up to Options.MaxDetailedSeries distinct (domain, descriptor)
// pairs, after which the configuration's name is used instead.
type metrics struct {
	requests  *prometheus.CounterVec // by gRPC code
	ok        prometheus.Counter     // requests' OK series, resolved once: nearly every call counts there
	duration  prometheus.Histogram
	decisions *prometheus.CounterVec // by domain, descriptor, result
	shadow    *prometheus.CounterVec // by domain, descriptor
	unknown   prometheus.Counter
	loads     prometheus.Counter
	loadErrs  prometheus.Counter

	dynamic labelCap
}

// The result label of rl_envoy_decisions_total.
const (
	resultOK        = "ok"
	resultOverLimit = "over_limit"
)

func newMetrics(reg prometheus.Registerer, maxDynamic int) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rl_grpc_requests_total",
			Help: "ShouldRateLimit calls answered, by gRPC status code.",
		}, []string{"code"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rl_grpc_request_duration_seconds",
			Help: "Time to answer a ShouldRateLimit call, from the decoded request to the response being ready.",
			// 10 µs to ~2.6 s: a decision takes microseconds; Envoy's
			// default timeout for the call is 20 ms.
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 10),
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rl_envoy_decisions_total",
			Help: "Limited descriptors decided, by domain, descriptor and result (ok or over_limit; over_limit includes shadow_mode and quota_mode denials, which were answered OK).",
		}, []string{"domain", "descriptor", "result"}),
		shadow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rl_envoy_shadow_denied_total",
			Help: "Descriptors in shadow_mode that were over their limit and answered OK, by domain and descriptor.",
		}, []string{"domain", "descriptor"}),
		unknown: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rl_envoy_unknown_domain_total",
			Help: "ShouldRateLimit calls naming a domain the configuration does not have (answered OK).",
		}),
		loads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rl_envoy_config_loads_total",
			Help: "Envoy configurations loaded and published.",
		}),
		loadErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rl_envoy_config_load_errors_total",
			Help: "Envoy configuration loads that failed (the previous configuration stayed in force).",
		}),
		dynamic: labelCap{max: maxDynamic, seen: map[string]struct{}{}},
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.decisions, m.shadow, m.unknown, m.loads, m.loadErrs)
	}
	m.ok = m.requests.WithLabelValues(codes.OK.String())
	return m
}

// nodeMetrics are one limited descriptor's counters, looked up once per
// configuration load.
type nodeMetrics struct {
	domain, descriptor string
	ok, over, shadow   prometheus.Counter
}

func (m *metrics) forNode(domain, descriptor string) *nodeMetrics {
	return &nodeMetrics{
		domain: domain, descriptor: descriptor,
		ok:     m.decisions.WithLabelValues(domain, descriptor, resultOK),
		over:   m.decisions.WithLabelValues(domain, descriptor, resultOverLimit),
		shadow: m.shadow.WithLabelValues(domain, descriptor),
	}
}

// forDynamic returns the counters of a label built from a request, or
// fallback once the cap on such labels is reached.
func (m *metrics) forDynamic(domain, descriptor string, fallback *nodeMetrics) *nodeMetrics {
	if !m.dynamic.admit(domain + "\x00" + descriptor) {
		return fallback
	}
	return m.forNode(domain, descriptor)
}

// forget drops the series of configuration descriptors that are gone.
func (m *metrics) forget(gone []*nodeMetrics) {
	for _, n := range gone {
		l := prometheus.Labels{"domain": n.domain, "descriptor": n.descriptor}
		m.decisions.DeletePartialMatch(l)
		m.shadow.DeletePartialMatch(l)
	}
}

// labelCap admits label values built from requests, up to max distinct.
type labelCap struct {
	mu   sync.Mutex
	max  int
	seen map[string]struct{}
}

func (c *labelCap) admit(label string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[label]; ok {
		return true
	}
	if len(c.seen) >= c.max {
		return false
	}
	c.seen[label] = struct{}{}
	return true
}

// dynamicDescriptor names the descriptor a request matched in metrics when
// the configuration asks for request values: every level as
// envoyproxy/ratelimit writes its stats key — key_value where the leaf has
// detailed_metric (every level) or the level has value_to_metric, the
// configuration's key or key_value elsewhere — or "" when the
// configuration's StatsKey applies.
func dynamicDescriptor(entries []*rlv3.RateLimitDescriptor_Entry, path []*config.Node) string {
	leaf := path[len(path)-1]
	dynamic := leaf.DetailedMetric
	for _, n := range path {
		dynamic = dynamic || n.ValueToMetric
	}
	if !dynamic {
		return ""
	}
	var b strings.Builder
	for i, n := range path {
		if i > 0 {
			b.WriteByte('.')
		}
		key, value := entries[i].GetKey(), entries[i].GetValue()
		switch {
		case n.ShareThreshold && n.Wildcard:
			b.WriteString(key + "_" + n.Value)
		case leaf.DetailedMetric:
			b.WriteString(key + "_" + value)
		case n.ValueToMetric && value != "":
			b.WriteString(key + "_" + value)
		case n.Value != "":
			b.WriteString(key + "_" + n.Value)
		default:
			b.WriteString(key)
		}
	}
	return b.String()
}

// counters are the totals Stats reports.
type counters struct {
	requests, invalid, failed, overLimit, unknownDomain, shadowDenied atomic.Uint64
	loads, loadErrors                                                 atomic.Uint64
}
