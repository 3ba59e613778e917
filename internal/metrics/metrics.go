// Package metrics exposes rlserver to Prometheus: a private registry whose
// collector reads the keyspace's own counters at scrape time, plus a
// command-duration histogram the protocol layer observes.
//
// Decisions are never counted through a Prometheus metric on the decision
// path: shards already count them (each shard its own counters, owned by its
// goroutine), and a scrape asks each shard for them. So metrics add no lock
// and no shared cache line to a decision, and label values are bounded by
// the number of rules and commands, never by keys.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rlserver/rlserver/internal/server"
	"github.com/rlserver/rlserver/internal/service"
)

// Server is what the collector reads from the connection layer
// (*server.Server).
type Server interface {
	Connected() int64
	Rejected() uint64
	Draining() bool
	HandlerPanics() uint64
	HandshakeTimeouts() uint64
	LimitDisconnects() uint64
	AuthFailuresByAddr() (top []server.AddrCount, other uint64)
}

// Sources are what the metrics describe.
type Sources struct {
	Service *service.Service
	Server  Server // may be set after New, before the first scrape
}

// Metrics is the registry and the instruments others observe.
type Metrics struct {
	Registry        *prometheus.Registry
	CommandDuration *prometheus.HistogramVec
	src             *Sources
}

// New builds the registry, registering every collector once.
func New(src *Sources) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		CommandDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rl_command_duration_seconds",
			Help: "Time from a command's dispatch to its reply being ready, by command. Pipelined decisions share their batch's time.",
			// 5 µs to ~1.3 s: decisions take microseconds, snapshots and
			// transactions can take longer.
			Buckets: prometheus.ExponentialBuckets(5e-6, 4, 10),
		}, []string{"command"}),
		src: src,
	}
	m.Registry.MustRegister(
		m.CommandDuration,
		&collector{src: src},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

var (
	descDecisions   = prometheus.NewDesc("rl_decisions_total", "Rate-limit decisions, by rule and result (allowed or denied).", []string{"rule", "result"}, nil)
	descShadow      = prometheus.NewDesc("rl_shadow_denied_total", "Requests a rule in shadow mode admitted that it would have denied, by rule (counted in rl_decisions_total as allowed).", []string{"rule"}, nil)
	descKeys        = prometheus.NewDesc("rl_keys", "Limiter keys holding state ((rule, key) pairs).", nil, nil)
	descPlainKeys   = prometheus.NewDesc("rl_plain_keys", "Plain keys (strings, hashes, lists, sorted sets).", nil, nil)
	descPlainBytes  = prometheus.NewDesc("rl_plain_value_bytes", "Bytes the plain keys' values hold, by their sizes (what --max-value-size bounds per key).", nil, nil)
	descIdle        = prometheus.NewDesc("rl_idle_evictions_total", "Limiter keys dropped because their state became fresh again (lossless).", nil, nil)
	descPressure    = prometheus.NewDesc("rl_pressure_evictions_total", "Keys dropped to respect --maxkeys (their budget forgotten).", nil, nil)
	descExpired     = prometheus.NewDesc("rl_expired_keys_total", "Plain keys whose TTL ran out.", nil, nil)
	descClients     = prometheus.NewDesc("rl_connected_clients", "Open client connections.", nil, nil)
	descRejected    = prometheus.NewDesc("rl_rejected_connections_total", "Connections refused at --maxclients.", nil, nil)
	descRules       = prometheus.NewDesc("rl_rules", "Rules in the current rule set.", nil, nil)
	descRulesVer    = prometheus.NewDesc("rl_rules_version", "Version of the current rule set; increases with every change.", nil, nil)
	descSnapDur     = prometheus.NewDesc("rl_snapshot_last_duration_seconds", "How long the last snapshot attempt took.", nil, nil)
	descSnapSuccess = prometheus.NewDesc("rl_snapshot_last_success_timestamp_seconds", "Unix time of the last good snapshot (0: none).", nil, nil)
	descSnapBytes   = prometheus.NewDesc("rl_snapshot_last_bytes", "Size of the last good snapshot.", nil, nil)
	descSnapOK      = prometheus.NewDesc("rl_snapshot_last_ok", "1 if the last snapshot attempt succeeded, else 0.", nil, nil)
	descPanics      = prometheus.NewDesc("rl_handler_panics_total", "Command handlers that panicked; each closed its connection and the server kept serving.", nil, nil)
	descHandshake   = prometheus.NewDesc("rl_handshake_timeouts_total", "Connections closed for not finishing the TLS handshake or AUTH within --handshake-timeout.", nil, nil)
	descLimitCuts   = prometheus.NewDesc("rl_limit_disconnects_total", "Connections closed for breaking a protocol limit, the output-buffer limit or the output timeout.", nil, nil)
	descAuthFails   = prometheus.NewDesc("rl_auth_failures_total", "Failed AUTH attempts by client IP address: the 100 addresses failing most, the rest as address \"other\".", []string{"address"}, nil)
)

// collector reads everything at scrape time.
type collector struct{ src *Sources }

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDecisions, descShadow, descKeys, descPlainKeys, descPlainBytes, descIdle, descPressure, descExpired,
		descClients, descRejected, descRules, descRulesVer, descSnapDur, descSnapSuccess, descSnapBytes, descSnapOK,
		descPanics, descHandshake, descLimitCuts, descAuthFails} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one Stats message to each shard per scrape.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	svc := c.src.Service
	st := svc.KeyspaceStats()
	set := svc.Rules()
	for _, r := range set.Rules() {
		rs := st.Rules[r.ID]
		ch <- prometheus.MustNewConstMetric(descDecisions, prometheus.CounterValue, float64(rs.Allowed), r.Name, "allowed")
		ch <- prometheus.MustNewConstMetric(descDecisions, prometheus.CounterValue, float64(rs.Denied), r.Name, "denied")
		if r.Shadow || rs.ShadowDenied > 0 {
			ch <- prometheus.MustNewConstMetric(descShadow, prometheus.CounterValue, float64(rs.ShadowDenied), r.Name)
		}
	}
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(descKeys, float64(st.Keys))
	gauge(descPlainKeys, float64(st.PlainKeys))
	gauge(descPlainBytes, float64(st.PlainBytes))
	counter(descIdle, float64(st.IdleEvictions))
	counter(descPressure, float64(st.PressureEvictions))
	counter(descExpired, float64(st.ExpiredKeys))
	gauge(descRules, float64(set.Len()))
	gauge(descRulesVer, float64(set.Version))
	if srv := c.src.Server; srv != nil {
		gauge(descClients, float64(srv.Connected()))
		counter(descRejected, float64(srv.Rejected()))
		counter(descPanics, float64(srv.HandlerPanics()))
		counter(descHandshake, float64(srv.HandshakeTimeouts()))
		counter(descLimitCuts, float64(srv.LimitDisconnects()))
		top, other := srv.AuthFailuresByAddr()
		for _, a := range top {
			ch <- prometheus.MustNewConstMetric(descAuthFails, prometheus.CounterValue, float64(a.Count), a.Addr)
		}
		ch <- prometheus.MustNewConstMetric(descAuthFails, prometheus.CounterValue, float64(other), "other")
	}
	if svc.Persistent() {
		ps := svc.SnapshotStatus()
		gauge(descSnapDur, ps.LastDuration.Seconds())
		gauge(descSnapSuccess, float64(ps.LastOKUnix))
		gauge(descSnapBytes, float64(ps.LastBytes))
		ok := 0.0
		if ps.LastErr == nil {
			ok = 1
		}
		gauge(descSnapOK, ok)
	}
}

// Handler serves /metrics and /healthz. /healthz answers 200 while the
// server serves and 503 once it drains (or before Sources.Server is set).
// The caller owns the listener and the http.Server, so that it can open
// every listener before any of them serves.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if m.src.Server == nil || m.src.Server.Draining() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	return mux
}
