package commands_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/testserver"
)

// scanAll runs a full iteration of SCAN (key "") or of HSCAN/ZSCAN (cmd
// over key), args after the cursor, and returns how often each key (or
// field/member) came back, with the values of pairs, and the calls made.
// between runs after each call but the last. It fails past limit calls.
func scanAll(t *testing.T, c *redis.Client, cmd, key string, args []any, limit int, between func()) (map[string]int, map[string]string, int) {
	t.Helper()
	ctx := context.Background()
	seen, vals := map[string]int{}, map[string]string{}
	cursor := "0"
	for calls := 1; ; calls++ {
		full := []any{cmd}
		if key != "" {
			full = append(full, key)
		}
		full = append(append(full, cursor), args...)
		reply, err := c.Do(ctx, full...).Slice()
		if err != nil || len(reply) != 2 {
			t.Fatalf("%v: %v %v", full, reply, err)
		}
		cursor = reply[0].(string)
		if _, err := strconv.ParseUint(cursor, 10, 64); err != nil {
			t.Fatalf("cursor %q", cursor)
		}
		elems := reply[1].([]any)
		step := 1
		if key != "" {
			step = 2
		}
		for i := 0; i < len(elems); i += step {
			name := elems[i].(string)
			seen[name]++
			if step == 2 {
				vals[name] = elems[i+1].(string)
			}
		}
		if cursor == "0" {
			return seen, vals, calls
		}
		if calls >= limit {
			t.Fatalf("%s: no end after %d calls", cmd, calls)
		}
		if between != nil {
			between()
		}
	}
}

// TestScan: a full SCAN returns every key once, filtered by MATCH and
// TYPE, in both protocols, inside MULTI and from a script declaring no
// keys; options and errors as Redis 7.0's.
func TestScan(t *testing.T) { testserver.Models(t, testScan) }

func testScan(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	setup := ts.Client(t, 2)
	for i := range 200 {
		setup.Set(ctx, fmt.Sprint("s:", i), "v", 0)
	}
	for i := range 20 {
		setup.HSet(ctx, fmt.Sprint("h:", i), "f", "v")
		setup.ZAdd(ctx, fmt.Sprint("z:", i), redis.Z{Score: 1, Member: "m"})
		setup.RPush(ctx, fmt.Sprint("l:", i), "e")
	}
	setup.Do(ctx, "RL.ALLOW", "limiter-key", "api") // limiter state is not a plain key
	testserver.EachProtocol(t, func(t *testing.T, protocol int) {
		c := ts.Client(t, protocol)
		seen, _, calls := scanAll(t, c, "SCAN", "", nil, 100, nil)
		if len(seen) != 260 {
			t.Fatalf("%d keys, want 260", len(seen))
		}
		for k, n := range seen {
			if n != 1 {
				t.Errorf("%s returned %d times", k, n)
			}
		}
		// COUNT 10 by default: about 26 calls, plus one per shard boundary.
		if calls < 26 || calls > 26+5 {
			t.Errorf("%d calls of COUNT 10 for 260 keys", calls)
		}
		if _, _, calls := scanAll(t, c, "SCAN", "", []any{"COUNT", 1000}, 2, nil); calls != 1 {
			t.Errorf("COUNT 1000: %d calls", calls)
		}
		if seen, _, _ := scanAll(t, c, "SCAN", "", []any{"MATCH", "s:1?", "COUNT", 7}, 100, nil); len(seen) != 10 || seen["s:15"] != 1 {
			t.Errorf("MATCH s:1?: %v", seen)
		}
		for typ, want := range map[string]int{"string": 200, "HASH": 20, "zset": 20, "list": 20, "nosuch": 0, "none": 0} {
			if seen, _, _ := scanAll(t, c, "SCAN", "", []any{"TYPE", typ, "MATCH", "*"}, 100, nil); len(seen) != want {
				t.Errorf("TYPE %s: %d keys, want %d", typ, len(seen), want)
			}
		}
	})

	c := setup
	for _, step := range []struct {
		args []any
		want string
	}{
		{[]any{"SCAN", "abc"}, "ERR invalid cursor"},
		{[]any{"SCAN", " 1"}, "ERR invalid cursor"},
		{[]any{"SCAN", "18446744073709551616"}, "ERR invalid cursor"},
		{[]any{"SCAN", "0", "COUNT", "0"}, "ERR syntax error"},
		{[]any{"SCAN", "0", "COUNT", "-1"}, "ERR syntax error"},
		{[]any{"SCAN", "0", "COUNT", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"SCAN", "0", "MATCH"}, "ERR syntax error"},
		{[]any{"SCAN", "0", "FOO", "bar"}, "ERR syntax error"},
		{[]any{"SCAN"}, "ERR wrong number of arguments for 'scan' command"},
	} {
		if got := testserver.RedisError(t, c, step.args...); got != step.want {
			t.Errorf("%v: %q, want %q", step.args, got, step.want)
		}
	}
	// strtoul's cursors: empty is 0, a sign is read, -1 is 2^64−1 (past
	// every key: the iteration is over).
	for _, cur := range []string{"", "+0", "-1", "18446744073709551615"} {
		reply, err := c.Do(ctx, "SCAN", cur, "COUNT", 1000).Slice()
		if err != nil {
			t.Errorf("SCAN %q: %v", cur, err)
			continue
		}
		if n := len(reply[1].([]any)); (cur == "" || cur == "+0") != (n == 260) || reply[0] != "0" {
			t.Errorf("SCAN %q: cursor %v, %d keys", cur, reply[0], n)
		}
	}

	// Inside MULTI, on the transaction's held keyspace.
	pipe := c.TxPipeline()
	scan := pipe.Do(ctx, "SCAN", "0", "COUNT", 1000, "TYPE", "hash")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := scan.Slice(); err != nil || r[0] != "0" || len(r[1].([]any)) != 20 {
		t.Errorf("SCAN in MULTI: %v %v", r, err)
	}
	// From a script: with no declared keys it holds every shard.
	got, err := c.Eval(ctx, "local r = redis.call('SCAN', '0', 'COUNT', '1000', 'MATCH', 'h:*') return #r[2]", nil).Int()
	if err != nil || got != 20 {
		t.Errorf("SCAN in a script: %d %v", got, err)
	}
	// Declaring keys, it is run again holding every shard.
	got, err = c.Eval(ctx, "local r = redis.call('SCAN', '0', 'COUNT', '1000', 'MATCH', 'h:*') return #r[2]", []string{"s:1"}).Int()
	if err != nil || got != 20 {
		t.Errorf("SCAN in a script declaring keys: %d %v", got, err)
	}
}

// TestScanUnderChanges: keys present for a whole SCAN iteration are
// returned while another client adds and deletes keys and keys expire
// between calls; the iteration ends.
func TestScanUnderChanges(t *testing.T) { testserver.Models(t, testScanUnderChanges) }

func testScanUnderChanges(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c := ts.Client(t, 2)
	stable := map[string]bool{}
	for i := range 300 {
		k := fmt.Sprint("stable:", i)
		stable[k] = true
		c.Set(ctx, k, "v", 0)
	}
	for i := range 300 {
		c.Set(ctx, fmt.Sprint("churn:", i), "v", 0)
	}
	// The churner adds, deletes and sets short expiries, bounded in count,
	// until the scan is over.
	other := ts.Client(t, 2)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20_000; i++ {
			select {
			case <-done:
				return
			default:
			}
			k := fmt.Sprint("churn:", i%600)
			switch i % 3 {
			case 0:
				other.Set(ctx, k, "v", 0)
			case 1:
				other.Del(ctx, fmt.Sprint("churn:", (i*7)%600))
			case 2:
				other.PExpire(ctx, k, time.Millisecond)
			}
		}
	}()
	seen, _, _ := scanAll(t, c, "SCAN", "", []any{"COUNT", 3}, 10_000, func() { ts.Clock.Advance(time.Millisecond) })
	close(done)
	wg.Wait()
	for k := range stable {
		if seen[k] != 1 {
			t.Errorf("%s, present throughout, returned %d times", k, seen[k])
		}
	}
}

// TestHScanZScan: full iterations of a small and a large hash and sorted
// set, with changes between calls, MATCH and COUNT, and Redis 7.0's
// errors, in both protocols.
func TestHScanZScan(t *testing.T) { testserver.Models(t, testHScanZScan) }

func testHScanZScan(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c := ts.Client(t, 2)
	c.HSet(ctx, "small", "a", "1", "b", "2", "c", "3")
	c.ZAdd(ctx, "zsmall", redis.Z{Score: 1.5, Member: "a"}, redis.Z{Score: -0.25, Member: "b"})
	for i := range 1000 {
		c.HSet(ctx, "big", fmt.Sprint("f", i), fmt.Sprint("v", i))
		c.ZAdd(ctx, "zbig", redis.Z{Score: float64(i), Member: fmt.Sprint("m", i)})
	}
	c.ZAdd(ctx, "zbig", redis.Z{Score: 0.1, Member: "tenth"})
	c.Set(ctx, "str", "v", 0)
	testserver.EachProtocol(t, func(t *testing.T, protocol int) {
		c := ts.Client(t, protocol)
		// Small values come whole, cursor 0, whatever COUNT.
		seen, vals, calls := scanAll(t, c, "HSCAN", "small", []any{"COUNT", 1}, 1, nil)
		if calls != 1 || len(seen) != 3 || vals["b"] != "2" {
			t.Errorf("HSCAN small: %v %v in %d calls", seen, vals, calls)
		}
		_, vals, _ = scanAll(t, c, "ZSCAN", "zsmall", nil, 1, nil)
		if vals["a"] != "1.5" || vals["b"] != "-0.25" {
			t.Errorf("ZSCAN small: %v", vals)
		}
		// Large ones in parts: each field once, at most ~16 calls whatever
		// COUNT (a call returns at least 1/16 of the value).
		seen, vals, calls = scanAll(t, c, "HSCAN", "big", []any{"COUNT", 5}, 40, nil)
		if len(seen) != 1000 || vals["f7"] != "v7" || calls < 16 || calls > 17 {
			t.Errorf("HSCAN big: %d fields in %d calls", len(seen), calls)
		}
		for f, n := range seen {
			if n != 1 {
				t.Errorf("HSCAN: %s returned %d times", f, n)
			}
		}
		seen, vals, _ = scanAll(t, c, "ZSCAN", "zbig", []any{"MATCH", "m1*", "COUNT", 200}, 40, nil)
		if len(seen) != 111 || vals["m12"] != "12" {
			t.Errorf("ZSCAN MATCH m1*: %d members, m12 %q", len(seen), vals["m12"])
		}
		if _, vals, _ = scanAll(t, c, "ZSCAN", "zbig", []any{"MATCH", "tenth"}, 40, nil); vals["tenth"] != "0.10000000000000001" {
			t.Errorf("ZSCAN score of 0.1: %q", vals["tenth"])
		}
		// A missing key is an empty, finished scan, its options unread.
		if r, err := c.Do(ctx, "HSCAN", "nokey", "0", "COUNT", "0").Slice(); err != nil || r[0] != "0" || len(r[1].([]any)) != 0 {
			t.Errorf("HSCAN of a missing key: %v %v", r, err)
		}
	})
	// Fields present throughout come back while others come and go.
	seen, _, _ := scanAll(t, c, "HSCAN", "big", []any{"COUNT", 10}, 100, func() {
		for i := range 20 {
			c.HSet(ctx, "big", fmt.Sprint("new", i, "-", time.Now().UnixNano()), "x")
		}
		c.HDel(ctx, "big", "f1", "f2", "f3")
	})
	for i := 4; i < 1000; i++ {
		if seen[fmt.Sprint("f", i)] != 1 {
			t.Errorf("HSCAN under changes: f%d returned %d times", i, seen[fmt.Sprint("f", i)])
		}
	}
	for _, step := range []struct {
		args []any
		want string
	}{
		{[]any{"HSCAN", "str", "0"}, "WRONGTYPE Operation against a key holding the wrong kind of value"},
		{[]any{"ZSCAN", "small", "0"}, "WRONGTYPE Operation against a key holding the wrong kind of value"},
		{[]any{"HSCAN", "str", "abc"}, "ERR invalid cursor"},
		{[]any{"ZSCAN", "nokey", "abc"}, "ERR invalid cursor"},
		{[]any{"HSCAN", "small", "0", "TYPE", "hash"}, "ERR syntax error"},
		{[]any{"HSCAN", "small", "0", "COUNT", "0"}, "ERR syntax error"},
		{[]any{"ZSCAN", "zsmall", "0", "MATCH"}, "ERR syntax error"},
		{[]any{"ZSCAN", "zsmall", "0", "COUNT", "1.5"}, "ERR value is not an integer or out of range"},
		{[]any{"HSCAN", "small"}, "ERR wrong number of arguments for 'hscan' command"},
	} {
		if got := testserver.RedisError(t, c, step.args...); got != step.want {
			t.Errorf("%v: %q, want %q", step.args, got, step.want)
		}
	}
}

// TestScanCluster: in cluster mode SCAN lists this node's keys, and
// HSCAN/ZSCAN are routed by their key's slot.
func TestScanCluster(t *testing.T) { testserver.Models(t, testScanCluster) }

func testScanCluster(t *testing.T) {
	ts, _ := startClusterServer(t, cluster.On, true)
	ctx := context.Background()
	c := ts.Client(t, 2)
	want := map[string]bool{}
	for i := range 20 {
		k := keyIn(fmt.Sprint("k", i), true)
		want[k] = true
		if err := c.HSet(ctx, k, "f", "v").Err(); err != nil {
			t.Fatal(err)
		}
	}
	seen, _, _ := scanAll(t, c, "SCAN", "", []any{"COUNT", 3}, 100, nil)
	if len(seen) != len(want) {
		t.Errorf("SCAN in cluster mode: %v, want %v", seen, want)
	}
	for k := range want {
		if seen[k] != 1 {
			t.Errorf("SCAN in cluster mode: %s returned %d times", k, seen[k])
		}
	}
	mine, theirs := keyIn("k0", true), keyIn("h", false)
	if _, vals, _ := scanAll(t, c, "HSCAN", mine, nil, 1, nil); vals["f"] != "v" {
		t.Errorf("HSCAN of this node's key: %v", vals)
	}
	moved := fmt.Sprintf("MOVED %d 127.0.0.1:7002", cluster.KeySlotString(theirs))
	for _, cmd := range []string{"HSCAN", "ZSCAN"} {
		if got := testserver.RedisError(t, c, cmd, theirs, "0"); got != moved {
			t.Errorf("%s of another node's key: %q, want %q", cmd, got, moved)
		}
	}
}
