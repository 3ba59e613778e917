package commands_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/testserver"
)

// grantReply reads RL.ACQUIRE's reply in either protocol as its seven
// numbers: granted, limit, remaining, retry_after_ms, reset_after_ms,
// delay_ms, granted_at_ns.
func grantReply(t testing.TB, cmd *redis.Cmd) [7]int64 {
	t.Helper()
	v, err := cmd.Result()
	if err != nil {
		t.Fatalf("%v: %v", cmd.Args(), err)
	}
	names := [7]string{"granted", "limit", "remaining", "retry_after_ms", "reset_after_ms", "delay_ms", "granted_at_ns"}
	var out [7]int64
	switch r := v.(type) {
	case []any:
		if len(r) != 7 {
			t.Fatalf("grant of %d elements: %v", len(r), r)
		}
		for i := range r {
			out[i] = r[i].(int64)
		}
	case map[any]any:
		if len(r) != 7 {
			t.Fatalf("grant map of %d fields: %v", len(r), r)
		}
		for i, n := range names {
			x, ok := r[n].(int64)
			if !ok {
				t.Fatalf("grant map lacks %s: %v", n, r)
			}
			out[i] = x
		}
	default:
		t.Fatalf("grant reply of type %T", v)
	}
	return out
}

func TestAcquireRefund(t *testing.T) { testserver.Models(t, testAcquireRefund) }

// testAcquireRefund walks one key of each algorithm through grants and
// refunds at fixed instants.
func testAcquireRefund(t *testing.T) {
	testserver.EachProtocol(t, func(t *testing.T, protocol int) {
		ts := startServer(t,
			testserver.Def("tb", "token_bucket", "10", "10s", ""),
			testserver.Def("lb", "leaky_bucket", "10", "10s", ""),
			testserver.Def("fw", "fixed_window", "10", "10s", ""),
			testserver.Def("sl", "sliding_log", "10", "10s", ""),
			testserver.Def("sc", "sliding_counter", "10", "10s", ""))
		c := ts.Client(t, protocol)
		ctx := context.Background()
		for _, rule := range []string{"tb", "lb", "fw", "sl", "sc"} {
			t.Run(rule, func(t *testing.T) {
				g := grantReply(t, c.Do(ctx, "RL.ACQUIRE", "k", rule, 7))
				if g[0] != 7 || g[1] != 10 || g[2] != 3 || g[6] != ts.Clock.Now() {
					t.Fatalf("first grant: %v (clock %d)", g, ts.Clock.Now())
				}
				// More than is left: what is left.
				g2 := grantReply(t, c.Do(ctx, "RL.ACQUIRE", "k", rule, 100))
				if g2[0] != 3 || g2[2] != 0 {
					t.Fatalf("second grant: %v, want 3 granted, 0 left", g2)
				}
				// Nothing left: 0 granted, a wait for one more unit, no instant.
				g3 := grantReply(t, c.Do(ctx, "RL.ACQUIRE", "k", rule, 1))
				if g3[0] != 0 || g3[3] < 1 || g3[6] != 0 {
					t.Fatalf("third grant: %v, want 0 granted, a retry_after and no instant", g3)
				}
				// Give back 4 of the first grant, at the same instant: all 4 return.
				if n, err := c.Do(ctx, "RL.REFUND", "k", rule, 4, g[6]).Int64(); err != nil || n != 4 {
					t.Fatalf("refund: %d, %v, want 4", n, err)
				}
				if d := testserver.Decision(t, c.Do(ctx, "RL.PEEK", "k", rule)); d[2] != 4 {
					t.Fatalf("after the refund: %v, want 4 remaining", d)
				}
				// Offering back more than is spent takes back at most what the key holds.
				if n, err := c.Do(ctx, "RL.REFUND", "k", rule, 100, g[6]).Int64(); err != nil || n > 6 {
					t.Fatalf("refund of 100: %d, %v", n, err)
				}
				if d := testserver.Decision(t, c.Do(ctx, "RL.PEEK", "k", rule)); d[2] > 10 {
					t.Fatalf("above capacity after refunds: %v", d)
				}
				// A key with no state has nothing to give back.
				if n, err := c.Do(ctx, "RL.REFUND", "nobody", rule, 3, g[6]).Int64(); err != nil || n != 0 {
					t.Fatalf("refund to a fresh key: %d, %v", n, err)
				}
			})
		}
	})
}

func TestRefundAfterTheWindowReturnsNothing(t *testing.T) {
	testserver.Models(t, testRefundAfterTheWindow)
}

// testRefundAfterTheWindow: units granted in one window cannot be given
// back in the next, where other callers have spent the limit: the key must
// never admit more than its limit inside a window.
func testRefundAfterTheWindow(t *testing.T) {
	ts := startServer(t,
		testserver.Def("fw", "fixed_window", "10", "10s", ""),
		testserver.Def("sc", "sliding_counter", "10", "10s", ""),
		testserver.Def("sl", "sliding_log", "10", "10s", ""))
	c := ts.Client(t, 2)
	ctx := context.Background()
	for _, rule := range []string{"fw", "sc", "sl"} {
		g := grantReply(t, c.Do(ctx, "RL.ACQUIRE", "k", rule, 10))
		ts.Clock.Advance(20 * time.Second) // two windows on: the grant has aged out
		for i := range 10 {
			if d := testserver.Decision(t, c.Do(ctx, "RL.ALLOW", "k", rule)); d[0] != 1 {
				t.Fatalf("%s: allow %d in the new window denied: %v", rule, i, d)
			}
		}
		if n, err := c.Do(ctx, "RL.REFUND", "k", rule, 10, g[6]).Int64(); err != nil || n != 0 {
			t.Fatalf("%s: refund of an aged-out grant: %d, %v, want 0", rule, n, err)
		}
		if d := testserver.Decision(t, c.Do(ctx, "RL.ALLOW", "k", rule)); d[0] != 0 {
			t.Fatalf("%s: an 11th unit admitted in one window after a stale refund: %v", rule, d)
		}
	}
}

func TestAcquireRefundErrors(t *testing.T) {
	ts := startServer(t, testserver.Def("r", "fixed_window", "10", "10s", ""))
	c := ts.Client(t, 2)
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"RL.ACQUIRE", "k", "r"}, "ERR wrong number of arguments for 'rl.acquire' command"},
		{[]any{"RL.ACQUIRE", "k", "nope", 1}, "ERR unknown rule 'nope'"},
		{[]any{"RL.ACQUIRE", "k", "r", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"RL.ACQUIRE", "k", "r", 0}, "ERR invalid count '0': must be a positive integer"},
		{[]any{"RL.REFUND", "k", "r", 1}, "ERR wrong number of arguments for 'rl.refund' command"},
		{[]any{"RL.REFUND", "k", "r", -1, 5}, "ERR invalid count '-1': must be a positive integer"},
		{[]any{"RL.REFUND", "k", "r", 1, 0}, "ERR invalid granted_at_ns '0': must be a positive integer"},
		{[]any{"RL.REFUND", "k", "r", 1, "soon"}, "ERR value is not an integer or out of range"},
	} {
		if got := testserver.RedisError(t, c, tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestAcquireRefundConcurrentExact(t *testing.T) {
	testserver.Models(t, testAcquireRefundConcurrentExact)
}

// testAcquireRefundConcurrentExact: clients grant, use part and refund the
// rest concurrently on one key whose clock stands still. Every unit is
// either used or given back in full, so the key ends with exactly the
// used units spent, never more than the limit.
func testAcquireRefundConcurrentExact(t *testing.T) {
	const limit = 1000
	for _, alg := range []string{"token_bucket", "leaky_bucket", "fixed_window", "sliding_log", "sliding_counter"} {
		t.Run(alg, func(t *testing.T) {
			ts := startServer(t, testserver.Def("r", alg, fmt.Sprint(limit), "1h", ""))
			var used atomic.Int64
			var wg sync.WaitGroup
			for w := range 8 {
				c := ts.Client(t, 2+w%2)
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := context.Background()
					for i := range 60 {
						g := grantReply(t, c.Do(ctx, "RL.ACQUIRE", "hot", "r", 1+(w+i)%7))
						if g[0] == 0 {
							continue
						}
						use := g[0] / 2
						used.Add(use)
						if back := g[0] - use; back > 0 {
							if n, err := c.Do(ctx, "RL.REFUND", "hot", "r", back, g[6]).Int64(); err != nil || n != back {
								t.Errorf("refund of %d: %d, %v", back, n, err)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			d := testserver.Decision(t, ts.Client(t, 2).Do(context.Background(), "RL.PEEK", "hot", "r"))
			if spent := limit - d[2]; spent != used.Load() || spent > limit {
				t.Fatalf("key shows %d spent, %d units were used (limit %d)", spent, used.Load(), limit)
			}
		})
	}
}

func TestShadowMode(t *testing.T) { testserver.Models(t, testShadowMode) }

// testShadowMode: a rule in shadow mode spends as usual and admits every
// request, counting the denials it did not enforce; switched back to
// enforce, the spent budget binds at once.
func testShadowMode(t *testing.T) {
	ts := startServer(t, testserver.Def("api", "fixed_window", "100", "1m", ""))
	c3 := ts.Client(t, 3)
	c2 := ts.Client(t, 2)
	ctx := context.Background()
	if err := c2.Do(ctx, "RL.RULE", "SET", "s", "fixed_window", 2, "1m", "SHADOW").Err(); err != nil {
		t.Fatal(err)
	}
	rule, err := c3.Do(ctx, "RL.RULE", "GET", "s").Result()
	if err != nil || rule.(map[any]any)["mode"] != "shadow" {
		t.Fatalf("RL.RULE GET s: %v, %v", rule, err)
	}
	for i, wantShadowDenied := range []int64{0, 0, 1, 1} {
		v, err := c3.Do(ctx, "RL.ALLOW", "k", "s").Result()
		if err != nil {
			t.Fatal(err)
		}
		m := v.(map[any]any)
		if m["allowed"] != int64(1) || m["shadow_denied"] != wantShadowDenied || m["retry_after_ms"] != int64(0) {
			t.Fatalf("request %d: %v, want admitted with shadow_denied %d", i, m, wantShadowDenied)
		}
	}
	// RESP2 keeps the six-integer shape.
	if d := testserver.Decision(t, c2.Do(ctx, "RL.ALLOW", "k", "s")); d[0] != 1 || d[2] != 0 {
		t.Fatalf("RESP2 shadow decision: %v", d)
	}
	// An enforcing rule's map has no shadow_denied.
	if v, _ := c3.Do(ctx, "RL.ALLOW", "k", "api").Result(); len(v.(map[any]any)) != 6 {
		t.Fatalf("enforcing rule's map: %v", v)
	}
	// A shadow pair that would deny does not refuse the group.
	ok, _, err := allowAllReply(c2.Do(ctx, "RL.ALLOWALL", "k", "s", "k", "api"))
	if err != nil || !ok {
		t.Fatalf("RL.ALLOWALL with a shadow denial: %v, %v", ok, err)
	}
	info, err := c2.Do(ctx, "RL.INFO").Text()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rl_shadow_denied_total:4\r\n", "rl_rule_s:keys=1,allowed=6,denied=0,mode=shadow,shadow_denied=4\r\n",
		"rl_rule_api:keys=1,allowed=2,denied=0\r\n"} {
		if !strings.Contains(info, want) {
			t.Fatalf("RL.INFO lacks %q:\n%s", want, info)
		}
	}
	// Enforced again: the two units spent in shadow mode still count.
	if err := c2.Do(ctx, "RL.RULE", "SET", "s", "fixed_window", 2, "1m").Err(); err != nil {
		t.Fatal(err)
	}
	if d := testserver.Decision(t, c2.Do(ctx, "RL.ALLOW", "k", "s")); d[0] != 0 {
		t.Fatalf("enforced after shadow: %v, want denied", d)
	}
	if d := testserver.Decision(t, c2.Do(ctx, "RL.ALLOW", "fresh", "s")); d[0] != 1 {
		t.Fatalf("a fresh key: %v", d)
	}
	for _, bad := range [][]any{
		{"RL.RULE", "SET", "s", "fixed_window", 2, "1m", "SHADOW", "SHADOW"},
		{"RL.RULE", "SET", "s", "fixed_window", 2, "1m", "LOUD"},
		{"RL.RULE", "SET", "s", "token_bucket", 2, "1m", "BURST"},
	} {
		if got := testserver.RedisError(t, c2, bad...); got != "ERR syntax error" {
			t.Errorf("%v: %q", bad, got)
		}
	}
}

// TestGatewayCommandsInsideMulti: RL.ACQUIRE, RL.REFUND and RL.OVERRIDE
// run on the transaction's held shards as they do outside it; RL.OVERRIDE
// LIST, which asks every shard, is refused when queued.
func TestGatewayCommandsInsideMulti(t *testing.T) {
	ts := startServer(t, testserver.Def("r", "fixed_window", "10", "1h", ""))
	c := ts.Client(t, 2)
	ctx := context.Background()
	pipe := c.TxPipeline()
	over := pipe.Do(ctx, "RL.OVERRIDE", "SET", "r", "k", 20, "1h", "EX", 60)
	acq := pipe.Do(ctx, "RL.ACQUIRE", "k", "r", 15)
	get := pipe.Do(ctx, "RL.OVERRIDE", "GET", "r", "k")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if over.Err() != nil || get.Err() != nil {
		t.Fatalf("SET %v, GET %v", over.Err(), get.Err())
	}
	g := grantReply(t, acq)
	if g[0] != 15 || g[1] != 20 {
		t.Fatalf("RL.ACQUIRE in MULTI under the override: %v", g)
	}
	pipe = c.TxPipeline()
	ref := pipe.Do(ctx, "RL.REFUND", "k", "r", 5, g[6])
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := ref.Int64(); err != nil || n != 5 {
		t.Fatalf("RL.REFUND in MULTI: %d, %v", n, err)
	}
	c.Do(ctx, "MULTI")
	if err := c.Do(ctx, "RL.OVERRIDE", "LIST").Err(); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Fatalf("RL.OVERRIDE LIST queued: %v", err)
	}
	c.Do(ctx, "DISCARD")
}

// TestAcquireUnderShadow: a shadow rule's refusal to grant becomes a grant
// of every unit asked for, none spent and nothing to refund; real grants
// are spent as usual.
func TestAcquireUnderShadow(t *testing.T) {
	ts := startServer(t, testserver.Def("r", "fixed_window", "10", "1h", ""))
	c := ts.Client(t, 3)
	ctx := context.Background()
	if err := c.Do(ctx, "RL.RULE", "SET", "r", "fixed_window", 10, "1h", "SHADOW").Err(); err != nil {
		t.Fatal(err)
	}
	v, err := c.Do(ctx, "RL.ACQUIRE", "k", "r", 10).Result()
	if m := v.(map[any]any); err != nil || m["granted"] != int64(10) || m["shadow_denied"] != int64(0) || m["granted_at_ns"] == int64(0) {
		t.Fatalf("real grant: %v, %v", v, err)
	}
	v, err = c.Do(ctx, "RL.ACQUIRE", "k", "r", 4).Result()
	if m := v.(map[any]any); err != nil || m["granted"] != int64(4) || m["shadow_denied"] != int64(1) || m["granted_at_ns"] != int64(0) {
		t.Fatalf("shadow grant: %v, %v", v, err)
	}
	if d := testserver.Decision(t, ts.Client(t, 2).Do(ctx, "RL.PEEK", "k", "r")); d[2] != 0 {
		t.Fatalf("after the grants: %v, want the ten real units spent", d)
	}
}
