package httplimit_test

import (
	"fmt"
	"log"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/client/httplimit"
)

// Protecting a small API: five order submissions per user, reads per API
// key, everything else per client address. (Needs an rlserver on
// localhost:6380 with the rules orders, reads and api.)
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6380", ContextTimeoutEnabled: true})
	lim, err := httplimit.New(rdb, httplimit.Config{
		Endpoints: []httplimit.Endpoint{
			{Pattern: "POST /orders", Rules: []string{"orders"}, Scope: httplimit.ScopeUser},
			{Pattern: "GET /items/{id}", Rules: []string{"reads"}, Scope: httplimit.ScopeAPIKey, Header: "X-API-Key"},
			{Pattern: "GET /healthz", Unlimited: true},
		},
		Default: &httplimit.Endpoint{Rules: []string{"api"}, Scope: httplimit.ScopeIP},
	}, httplimit.WithRegistry(prometheus.DefaultRegisterer))
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ordered") })
	log.Fatal(http.ListenAndServe(":8080", lim.Wrap(mux)))
}

// The same configuration in YAML, with a fail policy and a local budget.
func ExampleParse() {
	cfg, err := httplimit.Parse("limits.yaml", []byte(`
rules:
  orders: {fail: closed}
  reads:
    fail: local
    local: {algorithm: token_bucket, limit: 100, window: 1s}
    budget: {chunk: 20}
endpoints:
  - {match: "POST /orders", rules: [orders], scope: user}
  - {match: "GET /items/{id}", rules: [reads], scope: apikey, header: X-API-Key}
  - {match: "GET /healthz", unlimited: true}
default: {rules: [api], scope: ip}
`))
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range cfg.Endpoints {
		fmt.Println(strings.TrimSpace(fmt.Sprintf("%-16s %v %s", e.Pattern, e.Rules, e.Scope)))
	}
	fmt.Println("reads fails", cfg.Rules["reads"].Fail, "with a budget of", cfg.Rules["reads"].Budget.Chunk)
	// Output:
	// POST /orders     [orders] user
	// GET /items/{id}  [reads] apikey
	// GET /healthz     []
	// reads fails local with a budget of 20
}

// The authentication stage names the user for ScopeUser.
func ExampleWithUser() {
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user := r.Header.Get("X-User") // after checking the credentials
			next.ServeHTTP(w, r.WithContext(httplimit.WithUser(r.Context(), user)))
		})
	}
	_ = auth // handler := auth(lim.Wrap(mux))
}

// A configuration with a mistake names the file and the line.
func ExampleParse_error() {
	_, err := httplimit.Parse("limits.yaml", []byte(`
default: {rules: [api]}
endpoints:
  - {match: "GET /items/{id}", rules: [reads], scope: tenant}
`))
	fmt.Println(err)
	// Output:
	// httplimit config limits.yaml: line 4: endpoint 1 (GET /items/{id}): scope "tenant": must be user, apikey, ip or global
}
