package httplimit

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the middleware's Prometheus series, registered once on the
// registry the caller passes (WithRegistry); without one they are kept but
// not exposed.
//
//	httplimit_decisions_total{rule, outcome}  outcome: allowed, denied, failed
//	                                          (failed: no decision; see below)
//	httplimit_fail_policy_total{rule, policy} policy: open, closed, local
//	httplimit_server_seconds{command}         round trips to rlserver
//	httplimit_breaker_open                    1 while the breaker is open or half-open
type metrics struct {
	decisions   *prometheus.CounterVec
	failPolicy  *prometheus.CounterVec
	server      *prometheus.HistogramVec
	breakerOpen prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "httplimit_decisions_total",
			Help: "Rate-limit decisions per rlserver rule: allowed, denied, or failed (the server could not decide; the rule's fail policy applied).",
		}, []string{"rule", "outcome"}),
		failPolicy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "httplimit_fail_policy_total",
			Help: "Requests decided by a rule's fail policy (open, closed, local) because the server could not decide.",
		}, []string{"rule", "policy"}),
		server: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "httplimit_server_seconds",
			Help: "Round trips to rlserver, by command, including those that failed.",
			// 50 µs to 100 ms: loopback to a remote zone, and the timeout.
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .02, .05, .1},
		}, []string{"command"}),
		breakerOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "httplimit_breaker_open",
			Help: "1 while the circuit breaker in front of rlserver is open or half-open, else 0.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.decisions, m.failPolicy, m.server, m.breakerOpen} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) unregister(reg prometheus.Registerer) {
	if reg != nil {
		for _, c := range []prometheus.Collector{m.decisions, m.failPolicy, m.server, m.breakerOpen} {
			reg.Unregister(c)
		}
	}
}

// observe is the client's round-trip observer.
func (m *metrics) observe(command string, took time.Duration, _ error) {
	m.server.WithLabelValues(strings.ToLower(command)).Observe(took.Seconds())
}

func (m *metrics) breakerChanged(_, to string) {
	if to == "closed" {
		m.breakerOpen.Set(0)
	} else {
		m.breakerOpen.Set(1)
	}
}
