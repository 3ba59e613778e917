package metrics

import (
	"sync/atomic"
	"testing"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/server"
	"github.com/rlserver/rlserver/internal/service"
)

type fakeServer struct{ connected atomic.Int64 }

func (f *fakeServer) Connected() int64 { return f.connected.Load() }
func (f *fakeServer) Rejected() uint64 { return 3 }
func (f *fakeServer) Draining() bool   { return false }

func (f *fakeServer) HandlerPanics() uint64     { return 2 }
func (f *fakeServer) HandshakeTimeouts() uint64 { return 4 }
func (f *fakeServer) LimitDisconnects() uint64  { return 5 }
func (f *fakeServer) AuthFailuresByAddr() ([]server.AddrCount, uint64) {
	return []server.AddrCount{{Addr: "192.0.2.1", Count: 9}}, 1
}

// TestCollectorReadsTheShards: what a scrape reports is what the shards
// counted, labelled by rule name only.
func TestCollectorReadsTheShards(t *testing.T) {
	store, _ := rules.NewStore([]rules.Def{rules.MustParseDef("api", "fixed_window", "2", "1h", "")})
	now := int64(1_704_067_200e9)
	keys := keyspace.New(keyspace.Config{Shards: 2, Clock: func() int64 { return now }, Rules: store})
	defer keys.Stop()
	d := keys.NewDispatcher()
	rule := store.Load().Get([]byte("api"))
	for _, k := range []string{"a", "a", "a", "b"} {
		d.Add(keyspace.Op{Kind: keyspace.Allow, Rule: rule, Key: []byte(k), Cost: 1})
	}
	d.Run()
	srv := &fakeServer{}
	srv.connected.Store(7)
	m := New(&Sources{Service: service.New(service.Config{Rules: store, Keys: keys}), Server: srv})
	m.CommandDuration.WithLabelValues("rl.allow").Observe(0.001)

	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			name := f.GetName()
			for _, l := range metric.GetLabel() {
				name += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case metric.Counter != nil:
				got[name] = metric.GetCounter().GetValue()
			case metric.Gauge != nil:
				got[name] = metric.GetGauge().GetValue()
			case metric.Histogram != nil:
				got[name] = float64(metric.GetHistogram().GetSampleCount())
			}
		}
	}
	for name, want := range map[string]float64{
		"rl_decisions_total,result=allowed,rule=api": 3,
		"rl_decisions_total,result=denied,rule=api":  1,
		"rl_keys":                       2,
		"rl_rules":                      1,
		"rl_rules_version":              1,
		"rl_connected_clients":          7,
		"rl_rejected_connections_total": 3,
		"rl_command_duration_seconds,command=rl.allow": 1,
		"rl_handler_panics_total":                      2,
		"rl_handshake_timeouts_total":                  4,
		"rl_limit_disconnects_total":                   5,
		"rl_auth_failures_total,address=192.0.2.1":     9,
		"rl_auth_failures_total,address=other":         1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if _, ok := got["go_goroutines"]; !ok {
		t.Error("the Go runtime collector is missing")
	}
}
