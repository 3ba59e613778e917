package httplimit

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

func compileForTest(t *testing.T, cfg Config) *compiled {
	t.Helper()
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	states := map[string]*ruleState{}
	for _, n := range cfg.ruleNames() {
		states[n] = &ruleState{name: n, fail: FailOpen}
	}
	c, err := compile(&cfg, states)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMatchHasServeMuxPrecedence: the endpoint a request gets is the one
// whose pattern ServeMux would pick.
func TestMatchHasServeMuxPrecedence(t *testing.T) {
	patterns := []string{
		"GET /items/{id}",
		"GET /items/special",
		"/items/",
		"POST /items/{id}",
		"api.example.com/items/{id}",
		"GET /files/{path...}",
		"GET /{$}",
		"DELETE /admin/",
	}
	var eps []Endpoint
	for _, p := range patterns {
		eps = append(eps, Endpoint{Pattern: p, Rules: []string{"r"}})
	}
	c := compileForTest(t, Config{Endpoints: eps, Default: &Endpoint{Rules: []string{"d"}}})
	for _, tc := range []struct{ method, target, want string }{
		{"GET", "http://x/items/42", "GET /items/{id}"},
		{"HEAD", "http://x/items/42", "GET /items/{id}"}, // GET patterns match HEAD
		{"GET", "http://x/items/special", "GET /items/special"},
		{"POST", "http://x/items/42", "POST /items/{id}"},
		{"PUT", "http://x/items/42", "/items/"}, // no PUT pattern: the method-less one
		{"GET", "http://x/items/42/parts", "/items/"},
		{"GET", "http://api.example.com/items/42", "api.example.com/items/{id}"}, // a host beats none
		{"GET", "http://x/files/a/b/c", "GET /files/{path...}"},
		{"GET", "http://x/", "GET /{$}"},
		{"GET", "http://x/elsewhere", ""}, // the default
		{"DELETE", "http://x/admin/users/3", "DELETE /admin/"},
		{"GET", "http://x/admin/users/3", ""},                   // DELETE only
		{"GET", "http://x/items/../items/7", "GET /items/{id}"}, // as the redirect's target
		{"GET", "http://x/items", "/items/"},                    // /items redirects to /items/
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		if got := c.match(r).pattern; got != tc.want {
			t.Errorf("%s %s: endpoint %q, want %q", tc.method, tc.target, got, tc.want)
		}
	}
}

func TestMatchUsesAnExplicitRootAsDefault(t *testing.T) {
	c := compileForTest(t, Config{Endpoints: []Endpoint{
		{Pattern: "/", Rules: []string{"root"}},
		{Pattern: "GET /a", Rules: []string{"a"}},
	}})
	if ep := c.match(httptest.NewRequest("POST", "/zzz", nil)); ep.pattern != "/" || ep.rules[0].name != "root" {
		t.Fatalf("unmatched request got %q", ep.pattern)
	}
}

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	xff := ipConfig{trusted: trusted, header: "X-Forwarded-For", v6bits: 64}
	fwd := ipConfig{trusted: trusted, header: "Forwarded", forwarded: true, v6bits: 128}
	for _, tc := range []struct {
		name   string
		c      ipConfig
		peer   string
		header []string
		want   string
	}{
		{"untrusted peer, no header", xff, "203.0.113.5:4000", nil, "203.0.113.5"},
		{"untrusted peer spoofing the header", xff, "203.0.113.5:4000", []string{"198.51.100.1"}, "203.0.113.5"},
		{"trusted proxy", xff, "10.1.1.1:80", []string{"198.51.100.1"}, "198.51.100.1"},
		{"right-most untrusted wins over a forged left", xff, "10.1.1.1:80", []string{"6.6.6.6, 198.51.100.1, 10.2.2.2"}, "198.51.100.1"},
		{"several header lines", xff, "10.1.1.1:80", []string{"6.6.6.6", "198.51.100.1,10.2.2.2"}, "198.51.100.1"},
		{"all trusted: the left-most", xff, "10.1.1.1:80", []string{"10.9.9.9, 10.2.2.2"}, "10.9.9.9"},
		{"garbage stops at the last trusted hop", xff, "10.1.1.1:80", []string{"198.51.100.1, nonsense, 10.2.2.2"}, "10.2.2.2"},
		{"trusted proxy without a header", xff, "10.1.1.1:80", nil, "10.1.1.1"},
		{"ports and brackets", xff, "10.1.1.1:80", []string{"198.51.100.1:5555"}, "198.51.100.1"},
		{"IPv6 keyed by its /64", xff, "[2001:db8:1:2:3:4:5:6]:443", nil, "2001:db8:1:2::"},
		{"IPv4-mapped IPv6 is IPv4", xff, "[::ffff:203.0.113.9]:1", nil, "203.0.113.9"},
		{"Forwarded", fwd, "10.1.1.1:80", []string{`for=198.51.100.1;proto=https, for=10.2.2.2`}, "198.51.100.1"},
		{"Forwarded IPv6 quoted with port", fwd, "10.1.1.1:80", []string{`For="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17"},
		{"Forwarded obfuscated", fwd, "10.1.1.1:80", []string{`for=_hidden, for=10.2.2.2`}, "10.2.2.2"},
		{"Forwarded from an untrusted peer", fwd, "203.0.113.5:1", []string{`for=198.51.100.1`}, "203.0.113.5"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		for _, v := range tc.header {
			r.Header.Add(tc.c.header, v)
		}
		got, ok := tc.c.clientIP(r)
		if !ok || got.String() != tc.want {
			t.Errorf("%s: %v %v, want %s", tc.name, got, ok, tc.want)
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "@"
	if _, ok := xff.clientIP(r); ok {
		t.Error("a peer that is no IP address gave one")
	}
}
