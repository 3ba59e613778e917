package envoy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/rlserver/rlserver/internal/envoy"
	"github.com/rlserver/rlserver/internal/envoy/config"
	"github.com/rlserver/rlserver/internal/testserver"
)

// TestCompatibleWithEnvoyproxyRatelimit replays testdata/envoy/cases.yaml:
// requests and the responses envoyproxy/ratelimit gives them in the
// fixed-window case (from its integration test and from running it), which
// rlserver must give too — codes, limits, remaining counts and resets.
func TestCompatibleWithEnvoyproxyRatelimit(t *testing.T) {
	compatCases(t, nil)
}

// TestCompatibleWithEnvoyproxyRatelimitOnTheShards replays the same cases
// with rlserver's own limiter behind the front end — the service's managed
// rules on a real keyspace, its clock at the cases' instant — instead of
// the in-memory one.
func TestCompatibleWithEnvoyproxyRatelimitOnTheShards(t *testing.T) {
	compatCases(t, func(t *testing.T) envoy.Limiter {
		ts := testserver.Start(t, testserver.Options{ReservedRulePrefixes: []string{config.RulePrefix}})
		ts.Clock.Set(t0.UnixNano())
		m, err := ts.Service.Managed(config.RulePrefix)
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

// compatCases runs the cases, over the in-memory limiter, or over the one
// limiter makes for each case.
func compatCases(t *testing.T, limiter func(t *testing.T) envoy.Limiter) {
	var cases []struct {
		Name    string
		Source  string
		Configs []string
		Steps   []struct {
			Request  any
			Response any
		}
	}
	data, err := os.ReadFile("../../testdata/envoy/cases.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	steps := 0
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			h := newHarness(t, "", func(o *harnessOpts) {
				if limiter != nil {
					o.svc.Limiter = limiter(t)
				}
				o.layout = func(dir string) string {
					for _, rel := range c.Configs {
						if err := os.WriteFile(filepath.Join(dir, filepath.Base(rel)), []byte(readTestdata(t, rel)), 0o644); err != nil {
							t.Fatal(err)
						}
					}
					return dir
				}
			})
			for i, s := range c.Steps {
				steps++
				req := &rlsv3.RateLimitRequest{}
				want := &rlsv3.RateLimitResponse{}
				fromYAML(t, s.Request, req)
				fromYAML(t, s.Response, want)
				got, err := h.do(req)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if !proto.Equal(got, want) {
					t.Errorf("step %d: %s\n got %s\nwant %s", i, protojson.Format(req), protojson.Format(got), protojson.Format(want))
				}
			}
		})
	}
	if steps < 60 {
		t.Fatalf("ran %d steps", steps)
	}
}

// fromYAML converts a YAML value into a protobuf message through JSON.
func fromYAML(t *testing.T, v any, m proto.Message) {
	t.Helper()
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(j, m); err != nil {
		t.Fatalf("%s: %v", j, err)
	}
}
