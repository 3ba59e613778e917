package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/client"
)

// A decision as a response carries it: the draft's RateLimit fields, the
// legacy X-RateLimit-* and, for a denial, Retry-After.
func ExampleDecision_Headers() {
	d := client.Decision{
		Allowed: true, Limit: 100, Remaining: 50,
		ResetAfter: 30 * time.Second, Rule: "burst", Window: time.Minute,
	}
	h := d.Headers()
	for _, k := range slices.Sorted(maps.Keys(h)) {
		fmt.Printf("%s: %s\n", k, h.Get(k))
	}
	// Output:
	// Ratelimit: "burst";r=50;t=30
	// Ratelimit-Policy: "burst";q=100;w=60
	// X-Ratelimit-Limit: 100
	// X-Ratelimit-Remaining: 50
	// X-Ratelimit-Reset: 30
}

// Several limits on one request: one list item per rule, and the legacy
// fields and Retry-After for the one that binds.
func ExampleSetHeaders() {
	perUser := client.Decision{Allowed: true, Limit: 10, Remaining: 3, ResetAfter: 40 * time.Second, Rule: "user", Window: time.Minute}
	perTenant := client.Decision{Limit: 1000, RetryAfter: 1500 * time.Millisecond, ResetAfter: time.Hour, Rule: "tenant", Window: time.Hour}
	h := http.Header{}
	client.SetHeaders(h, client.DraftHeaders|client.LegacyHeaders, time.Now(), perUser, perTenant)
	for _, k := range slices.Sorted(maps.Keys(h)) {
		fmt.Printf("%s: %s\n", k, h.Get(k))
	}
	// Output:
	// Ratelimit: "user";r=3;t=40, "tenant";r=0;t=2
	// Ratelimit-Policy: "user";q=10;w=60, "tenant";q=1000;w=3600
	// Retry-After: 2
	// X-Ratelimit-Limit: 1000
	// X-Ratelimit-Remaining: 0
	// X-Ratelimit-Reset: 2
}

// The body of a 429: RFC 9457 problem details of the draft's
// quota-exceeded type.
func ExampleQuotaExceeded() {
	d := client.Decision{Limit: 5, RetryAfter: 2200 * time.Millisecond, Rule: "orders"}
	fmt.Printf("%s", client.QuotaExceeded(d).JSON())
	// Output:
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"detail":"rate limit exceeded for orders; retry after 3 s","violated-policies":["orders"],"retry-after":3}
}

// Retry-After is whole seconds, rounded up, and never 0.
func ExampleRetryAfterSeconds() {
	for _, wait := range []time.Duration{0, 10 * time.Millisecond, time.Second, 2500 * time.Millisecond} {
		fmt.Println(wait, "→", client.RetryAfterSeconds(wait))
	}
	// Output:
	// 0s → 1
	// 10ms → 1
	// 1s → 1
	// 2.5s → 3
}

// Deciding a request, and telling a denial from a server that is down or a
// rule that does not exist. (Needs an rlserver on localhost:6380.)
func ExampleClient_Allow() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6380", ContextTimeoutEnabled: true})
	defer rdb.Close()
	c := client.New(rdb, client.WithBreaker(client.BreakerSettings{}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	d, err := c.Allow(ctx, "user:42", "api", 1)
	switch {
	case errors.Is(err, client.ErrUnavailable):
		log.Print("rlserver unreachable: failing open")
	case errors.Is(err, client.ErrMisconfigured):
		log.Fatalf("fix the configuration: %v", err)
	case err != nil:
		log.Print(err)
	case !d.Allowed:
		fmt.Printf("denied: retry in %v\n", d.RetryAfter)
	default:
		fmt.Printf("allowed: %d left\n", d.Remaining)
	}
}

// A request that must pass a per-user, a per-tenant and a global limit:
// all or nothing. (Needs an rlserver on localhost:6380.)
func ExampleClient_AllowAll() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6380"})
	defer rdb.Close()
	c := client.New(rdb)
	g, err := c.AllowAll(context.Background(),
		client.Pair{Key: "user:42", Rule: "user"},
		client.Pair{Key: "tenant:acme", Rule: "tenant"},
		client.Pair{Key: "search", Rule: "search.global"})
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range g.Decisions {
		if !d.Allowed {
			fmt.Printf("%s binds: retry in %v\n", d.Rule, d.RetryAfter)
		}
	}
}

// Charging after the fact: reserve an estimate of LLM tokens, then give
// back what the completion did not use. (Needs a server with RL.ACQUIRE.)
func ExampleClient_Acquire() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6380"})
	defer rdb.Close()
	c := client.New(rdb)
	ctx := context.Background()
	g, err := c.Acquire(ctx, "tenant:acme", "llm.tokens", 4000)
	if err != nil || g.Granted < 4000 {
		log.Fatalf("not enough budget: %v (granted %d)", err, g.Granted)
	}
	used := int64(1234) // what the completion actually cost
	if _, err := c.Refund(ctx, g, g.Granted-used); err != nil {
		log.Print(err)
	}
}

// A local budget serves most requests from memory: one RL.ACQUIRE per 50
// requests for a busy key. (Needs a server with RL.ACQUIRE.)
func ExampleBudget() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6380"})
	defer rdb.Close()
	b := client.NewBudget(client.New(rdb), "api", client.BudgetOptions{Chunk: 50})
	defer b.Close(context.Background())
	d, err := b.Take(context.Background(), "user:42", 1)
	if err == nil && d.Allowed {
		fmt.Println("serve the request")
	}
}
