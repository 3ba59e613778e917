package client

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/rlserver/rlserver/client/internal/resptest"
	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rltest"
)

var bin *rltest.Binary

func TestMain(m *testing.M) {
	bin = rltest.Build()
	code := m.Run()
	bin.Remove()
	os.Exit(code)
}

// testRules: day-long windows, so the seconds a test takes refill nothing.
const testRules = `rules:
  - {name: day, algorithm: fixed_window, limit: 3, window: 24h}
  - {name: wide, algorithm: sliding_counter, limit: 100, window: 24h}
  - {name: burst, algorithm: token_bucket, limit: 10, window: 24h, burst: 20}
  - {name: queue, algorithm: leaky_bucket, limit: 10, window: 24h}
`

func newClient(t *testing.T, addr string, proto int, opts ...Option) *Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: proto, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return New(rdb, opts...)
}

func TestAllowPeekResetAgainstTheServer(t *testing.T) {
	t.Parallel()
	p := rltest.Start(t, bin, testRules)
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		c := newClient(t, p.Addr, proto)
		key := "user:" + string(rune('0'+proto))
		for i := int64(1); i <= 3; i++ {
			d, err := c.Allow(ctx, key, "day", 1)
			if err != nil || !d.Allowed || d.Limit != 3 || d.Remaining != 3-i || d.Rule != "day" || d.ResetAfter <= 0 {
				t.Fatalf("RESP%d allow %d: %+v, %v", proto, i, d, err)
			}
		}
		d, err := c.Allow(ctx, key, "day", 1)
		if err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 24*time.Hour {
			t.Fatalf("RESP%d: 4th of 3: %+v, %v", proto, d, err)
		}
		if d, err := c.Peek(ctx, key, "day", 1); err != nil || d.Allowed || d.Remaining != 0 {
			t.Fatalf("RESP%d peek: %+v, %v", proto, d, err)
		}
		if had, err := c.Reset(ctx, key, "day"); err != nil || !had {
			t.Fatalf("RESP%d reset: %v, %v", proto, had, err)
		}
		if had, err := c.Reset(ctx, key, "day"); err != nil || had {
			t.Fatalf("RESP%d second reset: %v, %v", proto, had, err)
		}
		if d, err := c.Peek(ctx, key, "day", 2); err != nil || !d.Allowed || d.Remaining != 3 {
			t.Fatalf("RESP%d peek after reset: %+v, %v", proto, d, err)
		}
		if d, err := c.Allow(ctx, key, "burst", 15); err != nil || !d.Allowed || d.Limit != 20 || d.Remaining != 5 {
			t.Fatalf("RESP%d burst: %+v, %v", proto, d, err)
		}
		// Five units queued ahead drain one every 2.4 h: the sixth waits
		// about 12 h, whatever the seconds the test takes.
		c.Allow(ctx, key, "queue", 5)
		if d, err := c.Allow(ctx, key, "queue", 1); err != nil || !d.Allowed || d.Delay < 4*144*time.Minute || d.Delay > 6*144*time.Minute {
			t.Fatalf("RESP%d leaky bucket delay: %+v, %v", proto, d, err)
		}
		info, err := c.Rule(ctx, "burst")
		if err != nil || info != (RuleInfo{"burst", "token_bucket", 10, 24 * time.Hour, 20}) {
			t.Fatalf("RESP%d rule: %+v, %v", proto, info, err)
		}
	}
}

func TestAllowAllIsAllOrNothing(t *testing.T) {
	t.Parallel()
	p := rltest.Start(t, bin, testRules)
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		c := newClient(t, p.Addr, proto)
		user := Pair{"u:" + string(rune('0'+proto)), "wide"}
		tenant := Pair{"t:" + string(rune('0'+proto)), "day"}
		g, err := c.AllowAllN(ctx, 3, user, tenant)
		if err != nil || !g.Allowed || g.Decisions[0].Remaining != 97 || g.Decisions[1].Remaining != 0 ||
			g.Decisions[0].Rule != "wide" || g.Decisions[1].Rule != "day" {
			t.Fatalf("RESP%d: %+v, %v", proto, g, err)
		}
		g, err = c.AllowAll(ctx, user, tenant)
		if err != nil || g.Allowed || !g.Decisions[0].Allowed || g.Decisions[1].Allowed || g.Decisions[1].RetryAfter <= 0 {
			t.Fatalf("RESP%d denied group: %+v, %v", proto, g, err)
		}
		// The user's limit was not charged by the denied group.
		if d, _ := c.Peek(ctx, user.Key, user.Rule, 1); d.Remaining != 97 {
			t.Fatalf("RESP%d: a denied group charged the user: remaining %d", proto, d.Remaining)
		}
	}
}

func TestErrorsTellMisconfiguredFromUnavailableAndAuth(t *testing.T) {
	t.Parallel()
	p := rltest.Start(t, bin, testRules)
	ctx := context.Background()
	c := newClient(t, p.Addr, 3)
	_, err := c.Allow(ctx, "k", "nope", 1)
	var unknown *UnknownRuleError
	if !errors.As(err, &unknown) || unknown.Rule != "nope" || !errors.Is(err, ErrMisconfigured) {
		t.Errorf("unknown rule: %#v", err)
	}
	_, err = c.Allow(ctx, "k", "day", 4)
	var cost *CostError
	if !errors.As(err, &cost) || *cost != (CostError{4, 3, "day"}) || !errors.Is(err, ErrMisconfigured) {
		t.Errorf("cost above capacity: %#v", err)
	}
	_, err = c.AllowAll(ctx, Pair{"k", "day"}, Pair{"k", "day"})
	if !errors.Is(err, ErrMisconfigured) {
		t.Errorf("duplicate pair: %v", err)
	}

	// Nothing listens on a port just released.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	_, err = newClient(t, dead, 3).Allow(ctx, "k", "day", 1)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrMisconfigured) {
		t.Errorf("unreachable: %v", err)
	}

	locked := rltest.Start(t, bin, testRules, "--requirepass", "s3cret")
	_, err = newClient(t, locked.Addr, 2).Allow(ctx, "k", "day", 1)
	if !errors.Is(err, ErrAuth) {
		t.Errorf("no password: %v", err)
	}
	wrong := redis.NewClient(&redis.Options{Addr: locked.Addr, Password: "nope", MaxRetries: -1})
	defer wrong.Close()
	if _, err := New(wrong).Allow(ctx, "k", "day", 1); !errors.Is(err, ErrAuth) {
		t.Errorf("wrong password: %v", err)
	}
	right := redis.NewClient(&redis.Options{Addr: locked.Addr, Password: "s3cret", MaxRetries: -1})
	defer right.Close()
	if d, err := New(right).Allow(ctx, "k", "day", 1); err != nil || !d.Allowed {
		t.Errorf("right password: %+v, %v", d, err)
	}
}

func TestAcquireAndRefund(t *testing.T) {
	t.Parallel()
	// A real server, its window 366 days long: it does not end while the
	// test runs.
	p := rltest.Start(t, bin, "rules:\n  - {name: r, algorithm: fixed_window, limit: 10, window: 8784h}\n")
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		c := newClient(t, p.Addr, proto)
		key := "k" + string(rune('0'+proto))
		g, err := c.Acquire(ctx, key, "r", 6)
		if err != nil || g.Granted != 6 || !g.Allowed || g.Remaining != 4 || g.At == 0 || g.Key != key || g.Rule != "r" {
			t.Fatalf("RESP%d acquire: %+v, %v", proto, g, err)
		}
		g2, err := c.Acquire(ctx, key, "r", 6)
		if err != nil || g2.Granted != 4 || g2.Remaining != 0 {
			t.Fatalf("RESP%d partial grant: %+v, %v", proto, g2, err)
		}
		g3, err := c.Acquire(ctx, key, "r", 1)
		if err != nil || g3.Granted != 0 || g3.Allowed || g3.RetryAfter <= 0 {
			t.Fatalf("RESP%d refusal: %+v, %v", proto, g3, err)
		}
		back, err := c.Refund(ctx, g, 5)
		if err != nil || back != 5 {
			t.Fatalf("RESP%d refund: %d, %v", proto, back, err)
		}
		if d, _ := c.Peek(ctx, key, "r", 1); d.Remaining != 5 {
			t.Fatalf("RESP%d: remaining %d after the refund", proto, d.Remaining)
		}
	}
	// A server that does not know the commands (resptest's has no
	// RL.ALLOWALL): misconfigured, not down.
	s := resptest.Start(t, map[string]resptest.Rule{"r": {Algorithm: algorithms.FixedWindow, Limit: 10, Window: 24 * time.Hour}})
	if _, err := newClient(t, s.Addr(), 3).AllowAll(ctx, Pair{"k", "r"}); !errors.Is(err, ErrMisconfigured) {
		t.Errorf("unknown command: %v", err)
	}
}

func TestBreakerOpensAndRecovers(t *testing.T) {
	t.Parallel()
	p := rltest.Start(t, bin, testRules)
	proxy := rltest.NewProxy(t, p.Addr)
	var changes []string
	changed := make(chan string, 16)
	c := newClient(t, proxy.Addr(), 3, WithBreaker(BreakerSettings{
		Failures: 3, Backoff: 50 * time.Millisecond, MaxBackoff: 400 * time.Millisecond,
		OnStateChange: func(from, to string) { changed <- to },
	}))
	ctx := context.Background()
	if _, err := c.Allow(ctx, "k", "wide", 1); err != nil {
		t.Fatal(err)
	}
	proxy.Refuse(true)
	for i := range 3 {
		if _, err := c.Allow(ctx, "k", "wide", 1); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("call %d through a refusing proxy: %v", i, err)
		}
	}
	if s := c.BreakerState(); s != "open" {
		t.Fatalf("after 3 failures the breaker is %q", s)
	}
	// Open: calls fail at once, without touching the network.
	if _, err := c.Allow(ctx, "k", "wide", 1); !isOpenError(err) {
		t.Fatalf("open breaker: %v", err)
	}
	// A failed probe doubles the wait: after the first backoff the probe
	// fails, and the next one is not let through for 100 ms.
	waitFor(t, func() bool {
		_, err := c.Allow(ctx, "k", "wide", 1)
		return errors.Is(err, ErrUnavailable) && !isOpenError(err)
	})
	if c.BreakerState() != "open" {
		t.Fatalf("a failed probe left the breaker %q", c.BreakerState())
	}
	reopened := time.Now()
	proxy.Refuse(false)
	waitFor(t, func() bool {
		_, err := c.Allow(ctx, "k", "wide", 1)
		return err == nil
	})
	if since := time.Since(reopened); since < 80*time.Millisecond {
		t.Errorf("the second probe came %v after the failed one, before the doubled backoff", since)
	}
	if c.BreakerState() != "closed" {
		t.Fatalf("after a good probe the breaker is %q", c.BreakerState())
	}
	close(changed)
	for s := range changed {
		changes = append(changes, s)
	}
	want := []string{"open", "half-open", "open", "half-open", "closed"}
	if len(changes) != len(want) {
		t.Fatalf("state changes %v, want %v", changes, want)
	}
}

// isOpenError reports whether err is the breaker's refusal.
func isOpenError(err error) bool {
	return errors.Is(err, ErrUnavailable) && errors.Is(err, gobreaker.ErrOpenState)
}

// waitFor polls cond every few milliseconds until it holds, for at most
// rltest.Deadline.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(rltest.Deadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
