package metrics

import (
	"testing"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/service"
)

// TestShadowDeniedByRule: rl_shadow_denied_total counts, per rule in
// shadow mode, the admissions that would have been denials; an enforcing
// rule that never counted one reports no series.
func TestShadowDeniedByRule(t *testing.T) {
	trial := rules.MustParseDef("trial", "fixed_window", "1", "1h", "")
	trial.Shadow = true
	store, _ := rules.NewStore([]rules.Def{trial, rules.MustParseDef("api", "fixed_window", "1", "1h", "")})
	now := int64(1_704_067_200e9)
	keys := keyspace.New(keyspace.Config{Shards: 2, Clock: func() int64 { return now }, Rules: store})
	defer keys.Stop()
	d := keys.NewDispatcher()
	for _, name := range []string{"trial", "trial", "trial", "api", "api"} {
		d.Add(keyspace.Op{Kind: keyspace.Allow, Rule: store.Load().Get([]byte(name)), Key: []byte("k"), Cost: 1})
	}
	d.Run()
	m := New(&Sources{Service: service.New(service.Config{Rules: store, Keys: keys})})
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "rl_shadow_denied_total" {
			continue
		}
		for _, metric := range f.GetMetric() {
			got[metric.GetLabel()[0].GetValue()] = metric.GetCounter().GetValue()
		}
	}
	if len(got) != 1 || got["trial"] != 2 {
		t.Fatalf("rl_shadow_denied_total: %v, want trial 2 only", got)
	}
}
