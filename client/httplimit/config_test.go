package httplimit

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/client"
)

const fullYAML = `timeout: 15ms
headers: [draft, legacy-unix]
trusted_proxies: [10.0.0.0/8, 192.0.2.7]
client_ip_header: Forwarded
ipv6_prefix: 56
key_prefix: "shop:"
closed_retry_after: 2s
log_every: 30s
breaker: {failures: 3, backoff: 50ms, max_backoff: 5s}
rules:
  orders: {fail: closed}
  reads:
    fail: local
    local: {algorithm: token_bucket, limit: 100, window: 1s, burst: 20}
    budget: {chunk: 50, low_water: 10, max_hold: 2s, max_keys: 500}
endpoints:
  - {match: "POST /orders", rules: [orders], scope: user}
  - {match: "GET /items/{id}", rules: [reads, reads.global], scope: apikey, header: X-API-Key, cost: 2}
  - {match: "GET /healthz", unlimited: true}
default: {rules: [api], scope: ip}
`

func TestParseReadsEveryField(t *testing.T) {
	c, err := Parse("limits.yaml", []byte(fullYAML))
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout != 15*time.Millisecond || c.Headers != client.DraftHeaders|client.LegacyHeaders|client.UnixReset ||
		c.ClientIPHeader != "Forwarded" || c.IPv6Prefix != 56 || c.KeyPrefix != "shop:" ||
		c.ClosedRetryAfter != 2*time.Second || c.LogEvery != 30*time.Second {
		t.Errorf("top level: %+v", c)
	}
	if len(c.TrustedProxies) != 2 || c.TrustedProxies[1] != netip.MustParsePrefix("192.0.2.7/32") {
		t.Errorf("trusted proxies %v", c.TrustedProxies)
	}
	if c.Breaker.Failures != 3 || c.Breaker.Backoff != 50*time.Millisecond || c.Breaker.MaxBackoff != 5*time.Second {
		t.Errorf("breaker %+v", c.Breaker)
	}
	reads := c.Rules["reads"]
	if reads.Fail != FailLocal || *reads.Local != (LocalLimit{"token_bucket", 100, time.Second, 20, 0}) ||
		*reads.Budget != (Budget{50, 10, 2 * time.Second, 500}) || c.Rules["orders"].Fail != FailClosed {
		t.Errorf("rules %+v %+v %+v", c.Rules, *reads.Local, *reads.Budget)
	}
	items := c.Endpoints[1]
	if items.Pattern != "GET /items/{id}" || len(items.Rules) != 2 || items.Scope != ScopeAPIKey || items.Header != "X-API-Key" || items.Cost != 2 {
		t.Errorf("endpoint %+v", items)
	}
	if !c.Endpoints[2].Unlimited || c.Default == nil || c.Default.Rules[0] != "api" || c.Default.Scope != ScopeIP {
		t.Errorf("healthz %+v, default %+v", c.Endpoints[2], c.Default)
	}
}

func TestParseErrorsNameFileAndLine(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"endpoints:\n  - {match: \"GET /a\", rules: [a]}\ndefault: {rules: [d]}\nheaders: [drafts]\n",
			"limits.yaml: line 4: headers: 'drafts' is not draft, legacy, legacy-unix or none"},
		{"default: {rules: [d]}\ntimeot: 1s\n",
			"limits.yaml: line 2: the configuration: unknown field 'timeot' (fields are breaker, client_ip_header, closed_retry_after, default, endpoints, headers, ipv6_prefix, key_prefix, log_every, rules, timeout, trusted_proxies)"},
		{"default: {rules: [d]}\nendpoints:\n  - {match: \"GET /a\", rules: [a]}\n  - {match: \"GET /a\", rules: [b]}\n",
			`limits.yaml: line 4: endpoint 2: pattern "GET /a" conflicts with pattern "GET /a": GET /a matches the same requests as GET /a`},
		{"default: {rules: [d]}\nendpoints:\n  - {match: \"GET /a/{\", rules: [a]}\n",
			`limits.yaml: line 3: endpoint 1: parsing "GET /a/{": at offset 7: bad wildcard segment (must end with '}')`},
		{"endpoints:\n  - {match: \"GET /a\", rules: [a]}\n",
			"limits.yaml: line 1: no default: requests that match no endpoint would be unlimited"},
		{"default: {rules: [d]}\nendpoints:\n  - {match: \"GET /a\", rules: [a], scope: tenant}\n",
			"limits.yaml: line 3: endpoint 1 (GET /a): scope \"tenant\": must be user, apikey, ip or global"},
		{"default: {rules: [d], scope: apikey}\n",
			"limits.yaml: line 1: default: scope apikey needs the header that holds the key"},
		{"default: {rules: [d]}\nrules:\n  d: {fail: local}\n",
			"limits.yaml: line 3: rule d: fail policy local needs a local limit"},
		{"default: {rules: [d]}\nrules:\n  d:\n    fail: local\n    local: {algorithm: token_bucket, limit: 0, window: 1s}\n",
			"limits.yaml: line 3: rule d: local limit: invalid limit '0': must be an integer from 1 to 1000000000"},
		{"default: {rules: [d]}\ntimeout: soon\n",
			"limits.yaml: line 2: 'soon' is not a positive Go duration"},
		{"default: {rules: [d]}\nendpoints:\n  - {match: \"GET /a\", rules: [a], cost: 0}\n",
			"limits.yaml: line 3: endpoint 1 (GET /a): cost 0: must be at least 1"},
		{"default: {unlimited: true, rules: [d]}\n",
			"limits.yaml: line 1: default: unlimited, yet names rules"},
		{"default: {rules: [d]}\nendpoints:\n  - {rules: [a]\n",
			"limits.yaml: line 3: did not find expected ',' or '}'"},
		{"default: {rules: [d]}\ndefault: {rules: [e]}\n",
			"limits.yaml: line 2: the configuration: field default given twice"},
	}
	for _, c := range cases {
		_, err := Parse("limits.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant …%s…", c.yaml, err, c.want)
		}
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	os.WriteFile(path, []byte("default: {rules: [d]}\nbogus: 1\n"), 0o644)
	if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), "httplimit config "+path+": line 2:") {
		t.Fatalf("%v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("a missing file loaded")
	}
}

func TestGoConfigIsValidatedToo(t *testing.T) {
	for _, c := range []Config{
		{Endpoints: []Endpoint{{Pattern: "GET /a", Rules: []string{"a"}}}}, // no default
		{Default: &Endpoint{}}, // no rules
		{Default: &Endpoint{Rules: []string{"a"}}, Rules: map[string]Rule{"a": {Fail: "sometimes"}}},
		{Default: &Endpoint{Rules: []string{"a"}}, IPv6Prefix: 129},
		{Default: &Endpoint{Rules: []string{"a"}}, ClientIPHeader: "X-Real-IP"},
	} {
		c.setDefaults()
		if err := c.validate(); err == nil {
			t.Errorf("%+v validated", c)
		}
	}
	ok := Config{Default: &Endpoint{Unlimited: true}}
	ok.setDefaults()
	if err := ok.validate(); err != nil {
		t.Errorf("an explicitly unlimited default: %v", err)
	}
}
