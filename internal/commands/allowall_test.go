package commands_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/testserver"
)

// allowAllReply reads RL.ALLOWALL's reply in either protocol.
func allowAllReply(cmd *redis.Cmd) (bool, [][6]int64, error) {
	v, err := cmd.Result()
	if err != nil {
		return false, nil, err
	}
	var flag any
	var items []any
	switch r := v.(type) {
	case []any:
		flag, items = r[0], r[1:]
	case map[any]any:
		flag, _ = r["allowed"]
		items, _ = r["decisions"].([]any)
	default:
		return false, nil, fmt.Errorf("reply of type %T", v)
	}
	var out [][6]int64
	for _, it := range items {
		d, err := testserver.ParseDecision(redis.NewCmdResult(it, nil))
		if err != nil {
			return false, nil, err
		}
		out = append(out, d)
	}
	return flag == int64(1), out, nil
}

func TestAllowAllScenario(t *testing.T) { testserver.Models(t, testAllowAllScenario) }

func testAllowAllScenario(t *testing.T) {
	testserver.EachProtocol(t, func(t *testing.T, protocol int) {
		ts := startServer(t, testserver.Def("user", "token_bucket", "5", "24h", ""), testserver.Def("tenant", "sliding_counter", "8", "24h", ""))
		c := ts.Client(t, protocol)
		ctx := context.Background()
		count := func(user string, n int) (admitted int, last [][6]int64) {
			for range n {
				ok, ds, err := allowAllReply(c.Do(ctx, "RL.ALLOWALL", user, "user", "t1", "tenant"))
				if err != nil {
					t.Fatal(err)
				}
				if len(ds) != 2 {
					t.Fatalf("%d decisions, want 2", len(ds))
				}
				if ok {
					admitted++
				}
				last = ds
			}
			return
		}
		if n, _ := count("u1", 6); n != 5 {
			t.Fatalf("u1: %d admitted, want 5", n)
		}
		n, last := count("u2", 5)
		if n != 3 {
			t.Fatalf("u2: %d admitted, want 3", n)
		}
		// Denied: the user alone would pass (2 left), the tenant binds.
		if last[0] != [6]int64{1, 5, 2, 0, last[0][4], 0} || last[1][0] != 0 || last[1][3] == 0 {
			t.Fatalf("denied reply: %v", last)
		}
		if got := testserver.Decision(t, c.Do(ctx, "RL.PEEK", "u2", "user")); got[2] != 2 {
			t.Fatalf("RL.PEEK u2 user: %v, want 2 remaining", got)
		}
		// COST applies to every pair.
		ok, ds, err := allowAllReply(c.Do(ctx, "RL.ALLOWALL", "u3", "user", "t2", "tenant", "COST", "4"))
		if err != nil || !ok || ds[0][2] != 1 || ds[1][2] != 4 {
			t.Fatalf("COST 4: %v %v %v", ok, ds, err)
		}
	})
}

func TestAllowAllErrorsChargeNothing(t *testing.T) {
	testserver.Models(t, testAllowAllErrorsChargeNothing)
}

func testAllowAllErrorsChargeNothing(t *testing.T) {
	ts := startServer(t, testserver.Def("user", "token_bucket", "5", "24h", ""), testserver.Def("tenant", "sliding_counter", "8", "24h", ""))
	c := ts.Client(t, 2)
	ctx := context.Background()
	many := []any{"RL.ALLOWALL"}
	for i := range 33 {
		many = append(many, fmt.Sprintf("k%d", i), "user")
	}
	tests := []struct {
		args []any
		want string
	}{
		{[]any{"RL.ALLOWALL", "u1"}, "ERR wrong number of arguments for 'rl.allowall' command"},
		{[]any{"RL.ALLOWALL", "u1", "user", "t1"}, "ERR syntax error"},
		{[]any{"RL.ALLOWALL", "u1", "user", "u1", "user"}, "ERR pair 'u1' 'user' is given twice; each key rule pair may appear once"},
		{many, "ERR too many pairs: RL.ALLOWALL takes at most 32 key rule pairs"},
		{[]any{"RL.ALLOWALL", "u1", "user", "t1", "tenant", "COST", "6"}, "ERR cost 6 exceeds the capacity 5 of rule 'user'; such a request could never be allowed"},
		{[]any{"RL.ALLOWALL", "u1", "user", "t1", "nope"}, "ERR unknown rule 'nope'"},
		{[]any{"RL.ALLOWALL", "u1", "user", "t1", "tenant", "COST", "0"}, "ERR invalid cost '0': must be a positive integer"},
		{[]any{"RL.ALLOWALL", "u1", "user", "t1", "tenant", "COST", "-3"}, "ERR invalid cost '-3': must be a positive integer"},
		{[]any{"RL.ALLOWALL", "u1", "user", "t1", "tenant", "cost", "x"}, "ERR value is not an integer or out of range"},
	}
	for _, tt := range tests {
		if got := testserver.RedisError(t, c, tt.args...); got != tt.want {
			t.Errorf("%v:\n got %q\nwant %q", tt.args[:min(len(tt.args), 7)], got, tt.want)
		}
	}
	if n, _ := c.DBSize(ctx).Result(); n != 0 {
		t.Fatalf("failed RL.ALLOWALL calls left %d keys", n)
	}
	// The same key under two rules is two pairs, not a duplicate.
	if ok, _, err := allowAllReply(c.Do(ctx, "RL.ALLOWALL", "k", "user", "k", "tenant")); err != nil || !ok {
		t.Fatalf("same key, two rules: %v %v", ok, err)
	}
}

func TestAllowAllInAPipeline(t *testing.T) { testserver.Models(t, testAllowAllInAPipeline) }

func testAllowAllInAPipeline(t *testing.T) {
	ts := startServer(t, testserver.Def("user", "token_bucket", "2", "24h", ""), testserver.Def("tenant", "fixed_window", "100", "24h", ""))
	c := ts.Client(t, 2)
	ctx := context.Background()
	p := c.Pipeline()
	a := p.Do(ctx, "RL.ALLOW", "u", "user")
	b := p.Do(ctx, "RL.ALLOWALL", "u", "user", "t", "tenant")
	d := p.Do(ctx, "RL.ALLOWALL", "u", "user", "t", "tenant")
	e := p.Do(ctx, "RL.PEEK", "t", "tenant")
	p.Exec(ctx)
	if testserver.Decision(t, a)[2] != 1 {
		t.Fatal("first RL.ALLOW")
	}
	if ok, _, _ := allowAllReply(b); !ok {
		t.Fatal("second call should be admitted")
	}
	if ok, _, _ := allowAllReply(d); ok {
		t.Fatal("third call should be denied: the user is spent")
	}
	if got := testserver.Decision(t, e); got[2] != 99 {
		t.Fatalf("tenant charged %d times, want 1", 100-got[2])
	}
}

// TestAllowAllConcurrentConnections: 64 connections, each with its own user
// key, share one tenant key of limit 1000; exactly 1000 are admitted and the
// users' charges add up to 1000.
func TestAllowAllConcurrentConnections(t *testing.T) {
	testserver.Models(t, testAllowAllConcurrentConnections)
}

func testAllowAllConcurrentConnections(t *testing.T) {
	ts := startServer(t, testserver.Def("user", "token_bucket", "100", "24h", ""), testserver.Def("tenant", "sliding_counter", "1000", "24h", ""))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			c := redis.NewClient(&redis.Options{Addr: ts.Addr, PoolSize: 1, Protocol: 2 + i%2})
			defer c.Close()
			user := fmt.Sprintf("u%d", i)
			for range 30 {
				ok, _, err := allowAllReply(c.Do(ctx, "RL.ALLOWALL", user, "user", "acme", "tenant"))
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 1000 {
		t.Fatalf("admitted %d, want exactly 1000", admitted.Load())
	}
	c := ts.Client(t, 2)
	var charged int64
	for i := range 64 {
		charged += 100 - testserver.Decision(t, c.Do(ctx, "RL.PEEK", fmt.Sprintf("u%d", i), "user"))[2]
	}
	if charged != 1000 {
		t.Fatalf("users charged %d in all, want 1000", charged)
	}
}

// TestAllowAllDeadlockHunt: connections send pairs in random orders across
// shards, mixed with pipelined RL.ALLOWs, for a bounded number of rounds.
func TestAllowAllDeadlockHunt(t *testing.T) { testserver.Models(t, testAllowAllDeadlockHunt) }

func testAllowAllDeadlockHunt(t *testing.T) {
	ts := startServer(t, testserver.Def("r", "token_bucket", "1000000", "1s", ""), testserver.Def("s", "fixed_window", "1000000", "1s", ""))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			c := redis.NewClient(&redis.Options{Addr: ts.Addr, PoolSize: 1, Protocol: 2})
			defer c.Close()
			for range 100 {
				args := []any{"RL.ALLOWALL"}
				for _, k := range rng.Perm(12)[:2+rng.IntN(5)] {
					args = append(args, fmt.Sprintf("k%d", k), []string{"r", "s"}[rng.IntN(2)])
				}
				p := c.Pipeline()
				p.Do(ctx, args...)
				p.Do(ctx, "RL.ALLOW", fmt.Sprintf("k%d", rng.IntN(12)), "r")
				if _, err := p.Exec(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("%v: %v", args, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("connections still blocked after 60s: deadlock")
	}
}
