package commands_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testserver"
)

func TestOverrides(t *testing.T) { testserver.Models(t, testOverrides) }

// testOverrides walks a key through an override's life at fixed instants:
// set (spent budget carried over), used, listed, kept across a rule change,
// and expired (spent budget carried back).
func testOverrides(t *testing.T) {
	testserver.EachProtocol(t, func(t *testing.T, protocol int) {
		ts := startServer(t, testserver.Def("api", "fixed_window", "3", "1h", ""), testserver.Def("tb", "token_bucket", "10", "10s", ""))
		c := ts.Client(t, protocol)
		ctx := context.Background()
		allow := func(key, rule string) [6]int64 {
			t.Helper()
			return testserver.Decision(t, c.Do(ctx, "RL.ALLOW", key, rule))
		}
		allow("vip", "api")
		allow("vip", "api")
		if err := c.Do(ctx, "RL.OVERRIDE", "SET", "api", "vip", 10, "1h", "EX", 60).Err(); err != nil {
			t.Fatal(err)
		}
		// The two units spent carry over: 8 more fit.
		for i := range 8 {
			if d := allow("vip", "api"); d[0] != 1 || d[1] != 10 || d[2] != int64(7-i) {
				t.Fatalf("vip request %d: %v", i, d)
			}
		}
		if d := allow("vip", "api"); d[0] != 0 {
			t.Fatalf("vip over its override: %v", d)
		}
		if d := allow("other", "api"); d[1] != 3 {
			t.Fatalf("another key: %v, want the rule's limit 3", d)
		}
		got, err := c.Do(ctx, "RL.OVERRIDE", "GET", "api", "vip").Result()
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("burst 0 expire_at_ms %d key vip limit 10 rule api ttl_ms 60000 window 1h", (testserver.T0+60e9)/1e6)
		if s := flatMap(got); s != want {
			t.Fatalf("GET: %s, want %s", s, want)
		}
		list, err := c.Do(ctx, "RL.OVERRIDE", "LIST").Slice()
		if err != nil || len(list) != 1 {
			t.Fatalf("LIST: %v, %v", list, err)
		}
		if l, _ := c.Do(ctx, "RL.OVERRIDE", "LIST", "tb").Slice(); len(l) != 0 {
			t.Fatalf("LIST tb: %v", l)
		}
		if info, _ := c.Do(ctx, "RL.INFO").Text(); !strings.Contains(info, "rl_overrides:1\r\n") {
			t.Fatalf("RL.INFO:\n%s", info)
		}
		// A rule change leaves the override's numbers alone.
		if err := c.Do(ctx, "RL.RULE", "SET", "api", "fixed_window", 4, "1h").Err(); err != nil {
			t.Fatal(err)
		}
		if d := testserver.Decision(t, c.Do(ctx, "RL.PEEK", "vip", "api")); d[1] != 10 || d[2] != 0 {
			t.Fatalf("vip after a rule change: %v", d)
		}
		// Expired: back to the rule, with the ten units spent kept.
		ts.Clock.Advance(61 * time.Second)
		if d := allow("vip", "api"); d[0] != 0 || d[1] != 4 {
			t.Fatalf("vip after expiry: %v, want denied under the rule's 4", d)
		}
		if v, err := c.Do(ctx, "RL.OVERRIDE", "GET", "api", "vip").Result(); err == nil || v != nil {
			t.Fatalf("GET after expiry: %v, %v, want nil", v, err)
		}
		// A later window: the rule's numbers.
		ts.Clock.Advance(time.Hour)
		if d := allow("vip", "api"); d[0] != 1 || d[2] != 3 {
			t.Fatalf("vip in a new window: %v", d)
		}
		// DEL ends one at once; a second DEL finds none.
		c.Do(ctx, "RL.OVERRIDE", "SET", "tb", "k", 1, "10s", "BURST", 2, "EXAT", (ts.Clock.Now()/1e9)+100)
		if d := allow("k", "tb"); d[1] != 2 || d[2] != 1 {
			t.Fatalf("bucket under an override with a burst: %v", d)
		}
		for _, want := range []int64{1, 0} {
			if n, err := c.Do(ctx, "RL.OVERRIDE", "DEL", "tb", "k").Int64(); err != nil || n != want {
				t.Fatalf("DEL: %d, %v, want %d", n, err, want)
			}
		}
		if d := allow("k", "tb"); d[1] != 10 || d[2] != 8 {
			t.Fatalf("bucket after DEL: %v, want the rule's capacity with 2 spent", d)
		}
	})
}

// flatMap renders a RESP2 array of pairs or a RESP3 map as "k v k v",
// sorted by key.
func flatMap(v any) string {
	m := map[string]any{}
	switch r := v.(type) {
	case []any:
		for i := 0; i+1 < len(r); i += 2 {
			m[r[i].(string)] = r[i+1]
		}
	case map[any]any:
		for k, x := range r {
			m[k.(string)] = x
		}
	}
	s := fmt.Sprint(m)
	s = strings.NewReplacer("map[", "", "]", "", ":", " ").Replace(s)
	return s
}

// TestOverrideExpiresOnTick: the tick ends overrides due, so RL.INFO does
// not count them, even for keys nobody asks about.
func TestOverrideExpiresOnTick(t *testing.T) {
	ts := startServer(t, testserver.Def("api", "fixed_window", "3", "1h", ""))
	c := ts.Client(t, 2)
	ctx := context.Background()
	for i := range 20 {
		if err := c.Do(ctx, "RL.OVERRIDE", "SET", "api", fmt.Sprint("k", i), 5, "1h", "EX", 10+i%2*100).Err(); err != nil {
			t.Fatal(err)
		}
	}
	ts.Clock.Advance(11 * time.Second)
	ts.Keys.Tick()
	if info, _ := c.Do(ctx, "RL.INFO").Text(); !strings.Contains(info, "rl_overrides:10\r\n") {
		t.Fatalf("RL.INFO after ten expired:\n%s", info)
	}
}

func TestOverrideErrors(t *testing.T) {
	ts := startServer(t, testserver.Def("api", "fixed_window", "3", "1h", ""), testserver.Def("log", "sliding_log", "3", "1h", ""))
	c := ts.Client(t, 2)
	ctx := context.Background()
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"RL.OVERRIDE", "SET", "api", "k", 5, "1m"}, "ERR wrong number of arguments for 'rl.override|set' command"},
		{[]any{"RL.OVERRIDE", "SET", "api", "k", 5, "1m", "BURST", 3}, "ERR an override needs an expiry: add EX seconds or EXAT unix-time"},
		{[]any{"RL.OVERRIDE", "SET", "nope", "k", 5, "1m", "EX", 10}, "ERR unknown rule 'nope'"},
		{[]any{"RL.OVERRIDE", "SET", "api", "k", 5, "1m", "BURST", 3, "EX", 10}, "ERR invalid burst '3': only token_bucket and leaky_bucket take a burst"},
		{[]any{"RL.OVERRIDE", "SET", "api", "k", 0, "1m", "EX", 10}, "ERR invalid limit '0'"},
		{[]any{"RL.OVERRIDE", "SET", "api", "k", 5, "1y", "EX", 10}, "ERR invalid window '1y'"},
		{[]any{"RL.OVERRIDE", "SET", "log", "k", 200000, "1m", "EX", 10}, "ERR invalid limit '200000'"},
		{[]any{"RL.OVERRIDE", "SET", "api", "k", 5, "1m", "EX", 0}, "ERR invalid expire time in 'rl.override|set' command"},
		{[]any{"RL.OVERRIDE", "SET", "api", "k", 5, "1m", "EXAT", 1}, "ERR invalid expire time in 'rl.override|set' command"},
		{[]any{"RL.OVERRIDE", "SET", "api", "k", 5, "1m", "EX", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"RL.OVERRIDE", "SET", "api", "k", 5, "1m", "EX", 10, "EX", 10}, "ERR syntax error"},
		{[]any{"RL.OVERRIDE", "SET", "api", "k", 5, "1m", "EX", 10, "EXAT", 10}, "ERR syntax error"},
		{[]any{"RL.OVERRIDE", "GET", "api"}, "ERR wrong number of arguments for 'rl.override|get' command"},
		{[]any{"RL.OVERRIDE", "LIST", "nope"}, "ERR unknown rule 'nope'"},
		{[]any{"RL.OVERRIDE", "LIST", "api", "x"}, "ERR wrong number of arguments for 'rl.override|list' command"},
		{[]any{"RL.OVERRIDE", "NOPE"}, "ERR unknown subcommand 'NOPE'. Try RL.OVERRIDE HELP."},
	} {
		if got := testserver.RedisError(t, c, tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
	// An override with less capacity than the cost: refused, as a rule would.
	if err := c.Do(ctx, "RL.OVERRIDE", "SET", "api", "small", 2, "1h", "EX", 60).Err(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]any{{"RL.ALLOW", "small", "api", 3}, {"RL.ALLOWALL", "small", "api", "COST", 3}} {
		if got := testserver.RedisError(t, c, args...); !strings.Contains(got, "ERR cost 3 exceeds the capacity 2 of rule 'api'; such a request could never be allowed under this key's override") {
			t.Errorf("%v: %q", args, got)
		}
	}
	// An override with more capacity than its rule carries a cost the rule
	// could not; a key without one is still refused in the rule's words,
	// and a key whose override is smaller in the override's.
	if err := c.Do(ctx, "RL.OVERRIDE", "SET", "api", "big", 10, "1h", "EX", 60).Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := c.Do(ctx, "RL.ALLOW", "big", "api", 8).Slice(); err != nil || d[0] != int64(1) || d[1] != int64(10) || d[2] != int64(2) {
		t.Errorf("RL.ALLOW 8 under a larger override: %v %v", d, err)
	}
	if d, err := c.Do(ctx, "RL.ALLOWALL", "big", "api", "COST", 2).Slice(); err != nil || d[0] != int64(1) || fmt.Sprint(d[1]) != "[1 10 0 0 3600000 0]" {
		t.Errorf("RL.ALLOWALL COST 2 under a larger override: %v %v", d, err)
	}
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"RL.ALLOW", "plain", "api", 8}, "ERR cost 8 exceeds the capacity 3 of rule 'api'; such a request could never be allowed"},
		{[]any{"RL.ALLOW", "big", "api", 11}, "ERR cost 11 exceeds the capacity 3 of rule 'api'; such a request could never be allowed"},
		{[]any{"RL.PEEK", "small", "api", 8}, "ERR cost 8 exceeds the capacity 2 of rule 'api'; such a request could never be allowed under this key's override"},
		{[]any{"RL.ALLOWALL", "plain", "api", "COST", 8}, "ERR cost 8 exceeds the capacity 3 of rule 'api'; such a request could never be allowed"},
	} {
		if got := testserver.RedisError(t, c, tc.args...); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
}
