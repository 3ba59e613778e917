package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"
)

// TestScriptsSurviveRestart: a script loaded with SCRIPT LOAD, and one run
// with EVAL, are found by EVALSHA after a restart (SIGTERM's final
// snapshot), so clients that load their scripts once at start
// (rate-limit-redis, ulule/limiter) keep working; SCRIPT FLUSH then a save
// forgets them across the next restart too.
func TestScriptsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	p := spawn(t, "--data-dir", data, "--snapshot-interval", "0")
	c := p.client(t)
	const loaded = "return redis.call('incrby', KEYS[1], ARGV[1])"
	const evaled = "return 'evaled'"
	sha, err := c.ScriptLoad(ctx, loaded).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Eval(ctx, evaled, nil).Err(); err != nil {
		t.Fatal(err)
	}
	sigterm(t, p)

	p2 := spawn(t, "--data-dir", data, "--snapshot-interval", "0")
	c2 := p2.client(t)
	if n, err := c2.EvalSha(ctx, sha, []string{"k"}, 5).Int64(); err != nil || n != 5 {
		t.Fatalf("EVALSHA after the restart: %d, %v", n, err)
	}
	if ok, err := c2.ScriptExists(ctx, sha, sha1Hex(evaled)).Result(); err != nil || !ok[0] || !ok[1] {
		t.Fatalf("SCRIPT EXISTS after the restart: %v, %v", ok, err)
	}
	if !strings.Contains(p2.out.String(), "scripts loaded") {
		t.Errorf("no 'scripts loaded' line:\n%s", p2.out.String())
	}
	c2.ScriptFlush(ctx)
	sigterm(t, p2)

	p3 := spawn(t, "--data-dir", data, "--snapshot-interval", "0")
	err = p3.client(t).EvalSha(ctx, sha, []string{"k"}, 5).Err()
	if err == nil || err.Error() != "NOSCRIPT No matching script. Please use EVAL." {
		t.Fatalf("EVALSHA after SCRIPT FLUSH and a restart: %v", err)
	}
}

func sha1Hex(src string) string {
	s := sha1.Sum([]byte(src))
	return hex.EncodeToString(s[:])
}
