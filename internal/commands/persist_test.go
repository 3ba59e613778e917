package commands_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/commands"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/testserver"
)

func TestPersistenceCommands(t *testing.T) { testserver.Models(t, testPersistenceCommands) }

func testPersistenceCommands(t *testing.T) {
	requested := make(chan commands.ShutdownMode, 1)
	ts := testserver.Start(t, testserver.Options{DataDir: t.TempDir(), Shutdown: func(m commands.ShutdownMode) {
		select { // go-redis retries a command whose connection closed: keep the first
		case requested <- m:
		default:
		}
	}})
	c := ts.Client(t, 2)
	ctx := context.Background()
	if n, _ := c.LastSave(ctx).Result(); n != 0 {
		t.Fatalf("LASTSAVE before any snapshot: %d", n)
	}
	c.Do(ctx, "RL.ALLOW", "a", "api")
	c.Do(ctx, "RL.ALLOW", "b", "api")
	info, _ := c.Info(ctx, "persistence").Result()
	if !strings.Contains(info, "rl_changes_since_last_save:2\r\n") {
		t.Fatalf("before SAVE:\n%s", info)
	}
	if s, err := c.Save(ctx).Result(); err != nil || s != "OK" {
		t.Fatalf("SAVE: %q %v", s, err)
	}
	if n, _ := c.LastSave(ctx).Result(); n < time.Now().Unix()-60 {
		t.Fatalf("LASTSAVE after SAVE: %d", n)
	}
	info, _ = c.Info(ctx, "persistence").Result()
	for _, want := range []string{"rl_snapshot_last_status:ok\r\n", "rl_snapshot_keys:2\r\n", "rl_changes_since_last_save:0\r\n",
		"rdb_last_bgsave_status:ok\r\n", "rl_persistence_enabled:1\r\n", "rl_snapshot_last_bytes:"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO persistence lacks %q:\n%s", want, info)
		}
	}
	rl, _ := c.Do(ctx, "RL.INFO").Text()
	for _, want := range []string{"rl_snapshot_keys:2\r\n", "rl_idle_evictions_total:0\r\n", "rl_pressure_evictions_total:0\r\n"} {
		if !strings.Contains(rl, want) {
			t.Errorf("RL.INFO lacks %q:\n%s", want, rl)
		}
	}
	if s, err := c.BgSave(ctx).Result(); err != nil || s != "Background saving started" {
		t.Fatalf("BGSAVE: %q %v", s, err)
	}
	if got := testserver.RedisError(t, c, "BGSAVE", "NOW"); got != "ERR syntax error" {
		t.Fatalf("BGSAVE NOW: %s", got)
	}
	if got := testserver.RedisError(t, c, "SHUTDOWN", "LATER"); got != "ERR syntax error" {
		t.Fatalf("SHUTDOWN LATER: %s", got)
	}
	c.Do(ctx, "SHUTDOWN", "NOSAVE")
	if m := <-requested; m != commands.ShutdownNoSave {
		t.Fatalf("SHUTDOWN NOSAVE requested %v", m)
	}
}

func TestPersistenceDisabled(t *testing.T) { testserver.Models(t, testPersistenceDisabled) }

func testPersistenceDisabled(t *testing.T) {
	ts := startServer(t)
	c := ts.Client(t, 2)
	for _, cmd := range [][]any{{"SAVE"}, {"BGSAVE"}, {"SHUTDOWN", "SAVE"}} {
		if got := testserver.RedisError(t, c, cmd...); got != "ERR persistence is disabled (--data-dir is empty)" {
			t.Errorf("%v: %s", cmd, got)
		}
	}
	if n, err := c.LastSave(context.Background()).Result(); err != nil || n != 0 {
		t.Fatalf("LASTSAVE: %d %v", n, err)
	}
}

func TestMaxKeysPolicies(t *testing.T) { testserver.Models(t, testMaxKeysPolicies) }

func testMaxKeysPolicies(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Rules: []rules.Def{testserver.Def("r", "fixed_window", "5", "1h", "")}, MaxKeys: 4, Reject: true})
	c := ts.Client(t, 2)
	ctx := context.Background()
	var errs int
	for i := range 40 {
		err := c.Do(ctx, "RL.ALLOW", i, "r").Err()
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ERR max keys reached") {
				t.Fatalf("key %d: %v", i, err)
			}
			errs++
		}
	}
	if n, _ := c.DBSize(ctx).Result(); n > 4 || errs < 36 {
		t.Fatalf("reject: %d keys held, %d refused", n, errs)
	}

	ev := testserver.Start(t, testserver.Options{Rules: []rules.Def{testserver.Def("r", "fixed_window", "5", "1h", "")}, MaxKeys: 4})
	c2 := ev.Client(t, 2)
	for i := range 40 {
		if err := c2.Do(ctx, "RL.ALLOW", i, "r").Err(); err != nil {
			t.Fatal(err)
		}
	}
	info, _ := c2.Do(ctx, "RL.INFO").Text()
	if n, _ := c2.DBSize(ctx).Result(); n > 4 || !strings.Contains(info, "rl_pressure_evictions_total:36\r\n") {
		t.Fatalf("evict: %d keys held\n%s", n, info)
	}
}
