//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/snapshot"
)

// These tests run the real binary (see process_test.go) for what issue 11
// found at process level: a start refused or hung, a snapshot that could not
// be written, files left behind.

// peek returns RL.PEEK key rule's reply: allowed, limit, remaining, ...
func peek(t *testing.T, c *redis.Client, key, rule string) []any {
	t.Helper()
	v, err := c.Do(context.Background(), "RL.PEEK", key, rule).Slice()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// sigterm stops p with SIGTERM and requires exit 0 and a final snapshot.
func sigterm(t *testing.T, p *process) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.out.String())
	}
	if !strings.Contains(p.out.String(), "final snapshot written") {
		t.Fatalf("no final snapshot:\n%s", p.out.String())
	}
}

// TestLoweredLimitRestarts is issue 11's repro: lowering a limit below what
// a key spent made the next start refuse the snapshot — through RL.RULE SET,
// through the rules file and SIGHUP, and through a restart with a lower
// limit in --rules followed by any save.
func TestLoweredLimitRestarts(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	rulesPath := filepath.Join(t.TempDir(), "rules.yaml")
	writeRulesFile := func(limit int) {
		os.WriteFile(rulesPath, fmt.Appendf(nil, "rules:\n  - {name: f, algorithm: token_bucket, limit: %d, window: 24h}\n", limit), 0o644)
	}
	writeRulesFile(10)
	p := spawn(t, "--data-dir", data, "--rules", rulesPath, "--snapshot-interval", "0")
	c := p.client(t)
	for _, alg := range []string{"token_bucket", "sliding_log"} {
		if err := c.Do(ctx, "RL.RULE", "SET", alg, alg, "10", "1h").Err(); err != nil {
			t.Fatal(err)
		}
		c.Do(ctx, "RL.ALLOW", "k", alg, 8)
		if err := c.Do(ctx, "RL.RULE", "SET", alg, alg, "2", "1h").Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.Do(ctx, "RL.ALLOW", "k", "f", 8)
	writeRulesFile(2)
	p.cmd.Process.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(10 * time.Second); peek(t, c, "k", "f")[1] != int64(2); {
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not lower the limit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Do(ctx, "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t)

	p2 := spawn(t, "--data-dir", data, "--rules", rulesPath, "--snapshot-interval", "0")
	c2 := p2.client(t)
	for _, rule := range []string{"token_bucket", "sliding_log", "f"} {
		if v := peek(t, c2, "k", rule); v[0] != int64(0) || v[1] != int64(2) || v[2] != int64(0) {
			t.Fatalf("%s after the restart: %v, want denied at a limit of 2 (8 spent)", rule, v)
		}
	}

	// A restart with a lower limit in --rules, then a save, then a restart.
	c2.Do(ctx, "RL.RULE", "SET", "big", "fixed_window", "10", "1h")
	c2.Do(ctx, "RL.ALLOW", "k", "big", 9)
	sigterm(t, p2)
	os.WriteFile(rulesPath, []byte("rules:\n  - {name: big, algorithm: fixed_window, limit: 3, window: 1h}\n"), 0o644)
	p3 := spawn(t, "--data-dir", data, "--rules", rulesPath, "--snapshot-interval", "0")
	sigterm(t, p3)
	p4 := spawn(t, "--data-dir", data, "--rules", rulesPath)
	if v := peek(t, p4.client(t), "k", "big"); v[0] != int64(0) || v[1] != int64(3) {
		t.Fatalf("after restarting with a lower limit and saving: %v", v)
	}
}

// TestLargeWritesAreRefused: a value or key no snapshot record could hold
// (issue 11: SET of 70 MB, or a 70 MB RL.ALLOW key, made every later
// snapshot fail, the final one included) is refused when written, so
// SIGTERM still exits 0 and keeps every budget.
func TestLargeWritesAreRefused(t *testing.T) {
	ctx := context.Background()
	data, rulesPath := t.TempDir(), writeRules(t)
	p := spawn(t, "--data-dir", data, "--rules", rulesPath, "--snapshot-interval", "0")
	c := p.client(t)
	remaining(t, c, "RL.ALLOW", 4)
	huge := bytes.Repeat([]byte("x"), 70<<20)
	err := c.Set(ctx, "huge", huge, 0).Err()
	if err == nil || !strings.Contains(err.Error(), "value of 73400320 bytes exceeds the 33554432-byte limit (--max-value-size)") {
		t.Fatalf("SET of 70 MB: %v", err)
	}
	err = c.Do(ctx, "RL.ALLOW", huge, "day").Err()
	if err == nil || !strings.Contains(err.Error(), "--max-key-size") {
		t.Fatalf("RL.ALLOW with a 70 MB key: %v", err)
	}
	if err := c.Set(ctx, "big", huge[:32<<20], 0).Err(); err != nil {
		t.Fatalf("SET of a value at the limit: %v", err)
	}
	if err := c.Do(ctx, "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	sigterm(t, p)

	p2 := spawn(t, "--data-dir", data, "--rules", rulesPath)
	c2 := p2.client(t)
	if r := remaining(t, c2, "RL.PEEK", 1); r != 6 {
		t.Fatalf("after SIGTERM and restart: %d remaining, want 6", r)
	}
	if v, err := c2.Get(ctx, "big").Bytes(); err != nil || len(v) != 32<<20 {
		t.Fatalf("the largest value after the restart: %d bytes, %v", len(v), err)
	}

	// Limits a snapshot could not hold are refused at start.
	out, err := exec.Command(binary(t), "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--max-value-size", "100000000").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--max-value-size 100000000") {
		t.Fatalf("--max-value-size beyond a snapshot record: %v\n%s", err, out)
	}
}

// TestStaleTempFilesRemovedAtStart: after crashes during saves, the
// temporary files they left are removed when the server starts.
func TestStaleTempFilesRemovedAtStart(t *testing.T) {
	data := t.TempDir()
	for i := range 3 {
		os.WriteFile(filepath.Join(data, fmt.Sprintf("%s.tmp-%d", snapshot.FileName, i)), bytes.Repeat([]byte("x"), 1<<20), 0o644)
	}
	p := spawn(t, "--data-dir", data)
	entries, _ := os.ReadDir(data)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("left in the data directory: %v", entries)
		}
	}
	if !strings.Contains(p.out.String(), "removed the temporary files of interrupted snapshots") {
		t.Fatalf("the removal was not logged:\n%s", p.out.String())
	}
}

// TestSnapshotPathMustBeARegularFile: a dangling symbolic link where the
// snapshot should be started the server empty, silently; a named pipe hung
// it before it listened. Both now refuse to start, naming the path.
func TestSnapshotPathMustBeARegularFile(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"dangling symlink", func(p string) error { return os.Symlink(filepath.Join(filepath.Dir(p), "moved.snap"), p) }, "which does not exist"},
		{"named pipe", func(p string) error { return unix.Mkfifo(p, 0o644) }, "named pipe"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := t.TempDir()
			path := filepath.Join(data, snapshot.FileName)
			if err := tt.make(path); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(binary(t), "--addr", "127.0.0.1:0", "--data-dir", data)
			out, err := runFor(cmd, 20*time.Second)
			if err == nil || cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(out, path) || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %v, output:\n%s", err, out)
			}
		})
	}
}

// runInProcess runs the program in-process and returns its address, its log
// and a channel closed when it has exited (its exit code in *code).
func runInProcess(t *testing.T, args ...string) (addr string, out *syncBuffer, exited <-chan struct{}, code *int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out = &syncBuffer{wrote: make(chan struct{}, 1)}
	done, code := make(chan struct{}), new(int)
	go func() {
		defer close(done)
		*code = run(ctx, nil, append([]string{"--addr", "127.0.0.1:0"}, args...), nil, out, out)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("server did not stop")
		}
	})
	waitLog(t, out, `msg="rlserver started"`)
	return startedLine.FindStringSubmatch(out.String())[1], out, done, code
}

// TestShardPanicSavesTheHealthyShards: a panic on a shard's goroutine
// killed the process and lost everything since the last snapshot. Now the
// shard fails alone, the process saves what the other shards hold and
// exits 1, and a restart serves those keys' budgets.
func TestShardPanicSavesTheHealthyShards(t *testing.T) {
	maps := make(chan *keyspace.Map, 1)
	testHookKeyspace = func(m *keyspace.Map) { maps <- m }
	t.Cleanup(func() { testHookKeyspace = nil })
	data, rulesPath := t.TempDir(), writeRules(t)
	addr, out, exited, code := runInProcess(t, "--data-dir", data, "--rules", rulesPath, "--shards", "2", "--snapshot-interval", "0")
	m := <-maps
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	const n = 40
	for i := range n {
		c.Do(ctx, "RL.ALLOW", fmt.Sprint("user:", i), "day", 3)
	}

	m.InjectPanic(0)

	select {
	case <-exited:
		if *code != 1 {
			t.Fatalf("exit %d after a shard failed, want 1:\n%s", *code, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("still running after a shard failed:\n%s", out.String())
	}
	log := out.String()
	for _, want := range []string{"a shard failed; saving the other shards and exiting", "shard 0 failed: panic: injected", "InjectPanic.func", "final snapshot written"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the log lacks %q:\n%s", want, log)
		}
	}
	snap, err := snapshot.ReadFile(filepath.Join(data, snapshot.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Keys) == 0 || len(snap.Keys) >= n {
		t.Fatalf("the final snapshot holds %d of %d keys, want the healthy shard's (some, not all)", len(snap.Keys), n)
	}

	p := spawn(t, "--data-dir", data, "--rules", rulesPath, "--shards", "2")
	c2 := p.client(t)
	kept := 0
	for i := range n {
		switch r := peek(t, c2, fmt.Sprint("user:", i), "day")[2]; r {
		case int64(7):
			kept++
		case int64(10): // on the failed shard: starts fresh
		default:
			t.Fatalf("user:%d: %v remaining", i, r)
		}
	}
	if kept != len(snap.Keys) {
		t.Fatalf("%d keys kept their budget, the snapshot held %d", kept, len(snap.Keys))
	}
}

// TestKeyspaceAnswersThroughTheServer checks keyspace behaviour at the
// client: --maxkeys-policy reject without --maxkeys rejected every new
// limiter key (issue 11), FLUSHALL reset the per-rule counters (issue 12),
// and CL.THROTTLE on another kind of value is WRONGTYPE.
func TestKeyspaceAnswersThroughTheServer(t *testing.T) {
	addr, _, _, _ := runInProcess(t, "--data-dir", t.TempDir(), "--rules", writeRules(t), "--maxkeys-policy", "reject")
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer c.Close()
	ctx := context.Background()
	for i := range 3 {
		if err := c.Do(ctx, "RL.ALLOW", fmt.Sprint("user:", i), "day").Err(); err != nil {
			t.Fatalf("RL.ALLOW under --maxkeys-policy reject without --maxkeys: %v", err)
		}
	}
	if err := c.Do(ctx, "RL.ALLOWALL", "a", "day", "b", "day").Err(); err != nil {
		t.Fatalf("RL.ALLOWALL: %v", err)
	}
	if err := c.Do(ctx, "CL.THROTTLE", "cell", 1, 10, 60).Err(); err != nil {
		t.Fatalf("CL.THROTTLE: %v", err)
	}
	ruleLine := func() string {
		info, _ := c.Do(ctx, "RL.INFO").Text()
		for line := range strings.Lines(info) {
			if strings.HasPrefix(line, "rl_rule_day:") {
				return strings.TrimSpace(line)
			}
		}
		t.Fatalf("no rl_rule_day in:\n%s", info)
		return ""
	}
	if got := ruleLine(); got != "rl_rule_day:keys=5,allowed=5,denied=0" {
		t.Fatalf("before FLUSHALL: %s", got)
	}
	c.Do(ctx, "FLUSHALL")
	c.Do(ctx, "RL.ALLOW", "user:0", "day")
	if got := ruleLine(); got != "rl_rule_day:keys=1,allowed=6,denied=0" {
		t.Fatalf("after FLUSHALL and one more: %s (the counters must keep counting)", got)
	}
	c.Set(ctx, "s", "not a time", 0)
	if err := c.Do(ctx, "CL.THROTTLE", "s", 1, 10, 60).Err(); err == nil || err.Error() != "WRONGTYPE Operation against a key holding the wrong kind of value" {
		t.Fatalf("CL.THROTTLE on a string: %v", err)
	}
}
