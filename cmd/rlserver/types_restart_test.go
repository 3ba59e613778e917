//go:build unix

package main

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestTypesSurviveRestart: hashes, lists and sorted sets, with their TTLs,
// survive a restart of the real binary: after SAVE and a SIGKILL, and
// through the final snapshot of a SIGTERM. --max-elements applies to the
// restarted server.
func TestTypesSurviveRestart(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	p := spawn(t, "--data-dir", data, "--snapshot-interval", "0")
	c := p.client(t)
	c.HSet(ctx, "bucket", "tokens", "9.5", "ts", "1704067200000")
	c.RPush(ctx, "window", "a", "b", "c")
	c.ZAdd(ctx, "log", redis.Z{Score: 1, Member: "x"}, redis.Z{Score: 2.5, Member: "y"})
	c.Expire(ctx, "log", time.Hour)
	if err := c.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t)

	check := func(c *redis.Client, stage string) {
		t.Helper()
		if h := c.HGetAll(ctx, "bucket").Val(); h["tokens"] != "9.5" || h["ts"] != "1704067200000" || len(h) != 2 {
			t.Errorf("%s: bucket %v", stage, h)
		}
		if l := c.LRange(ctx, "window", 0, -1).Val(); !slices.Equal(l, []string{"a", "b", "c"}) {
			t.Errorf("%s: window %q", stage, l)
		}
		z := c.ZRangeWithScores(ctx, "log", 0, -1).Val()
		if len(z) != 2 || z[0] != (redis.Z{Score: 1, Member: "x"}) || z[1] != (redis.Z{Score: 2.5, Member: "y"}) {
			t.Errorf("%s: log %v", stage, z)
		}
		if ttl := c.TTL(ctx, "log").Val(); ttl < 50*time.Minute || ttl > time.Hour {
			t.Errorf("%s: log's TTL %v", stage, ttl)
		}
		for key, want := range map[string]string{"bucket": "hash", "window": "list", "log": "zset"} {
			if got := c.Type(ctx, key).Val(); got != want {
				t.Errorf("%s: TYPE %s %q", stage, key, got)
			}
		}
	}
	p2 := spawn(t, "--data-dir", data, "--snapshot-interval", "0", "--max-elements", "3")
	c2 := p2.client(t)
	check(c2, "after SAVE and SIGKILL")
	if err := c2.RPush(ctx, "window", "d").Err(); err == nil || err.Error() != "ERR list of 4 elements exceeds the 3-element limit per key" {
		t.Errorf("RPUSH past --max-elements 3: %v", err)
	}
	c2.HIncrByFloat(ctx, "bucket", "tokens", -1.5)
	sigterm(t, p2)

	p3 := spawn(t, "--data-dir", data, "--snapshot-interval", "0")
	c3 := p3.client(t)
	if got := c3.HGet(ctx, "bucket", "tokens").Val(); got != "8" {
		t.Errorf("after SIGTERM's final snapshot: tokens %q, want 8", got)
	}
	c3.HSet(ctx, "bucket", "tokens", "9.5")
	check(c3, "after SIGTERM")
}
