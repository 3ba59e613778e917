package main

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestShadowAndOverridesSurviveARestart: a rule's shadow mode and a key's
// override, with its spent budget, come back from the final snapshot.
func TestShadowAndOverridesSurviveARestart(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	ctx := context.Background()
	saveAndStop(t, data, func(c *redis.Client) {
		for _, args := range [][]any{
			{"RL.RULE", "SET", "trial", "fixed_window", 2, "1h", "SHADOW"},
			{"RL.RULE", "SET", "api", "fixed_window", 3, "1h"},
			{"RL.OVERRIDE", "SET", "api", "vip", 10, "1h", "EX", 3600},
		} {
			if err := c.Do(ctx, args...).Err(); err != nil {
				t.Fatalf("%v: %v", args, err)
			}
		}
		for range 6 {
			c.Do(ctx, "RL.ALLOW", "vip", "api")
		}
	})
	addr := startRun(t, "--data-dir", data)
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 3})
	defer c.Close()
	rule, err := c.Do(ctx, "RL.RULE", "GET", "trial").Result()
	if err != nil || rule.(map[any]any)["mode"] != "shadow" {
		t.Fatalf("trial after the restart: %v, %v", rule, err)
	}
	v, err := c.Do(ctx, "RL.PEEK", "vip", "api").Result()
	if m, _ := v.(map[any]any); err != nil || m["limit"] != int64(10) || m["remaining"] != int64(4) {
		t.Fatalf("vip after the restart: %v, %v, want its override's 10 with 6 spent", v, err)
	}
	if o, err := c.Do(ctx, "RL.OVERRIDE", "GET", "api", "vip").Result(); err != nil || o.(map[any]any)["limit"] != int64(10) {
		t.Fatalf("RL.OVERRIDE GET after the restart: %v, %v", o, err)
	}
	if info, _ := c.Do(ctx, "RL.INFO").Text(); !strings.Contains(info, "rl_overrides:1\r\n") {
		t.Fatalf("RL.INFO:\n%s", info)
	}
}
