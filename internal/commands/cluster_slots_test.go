package commands_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/testserver"
)

// TestClusterKeysInSlot: CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT count
// every limiter state and plain key of a slot, follow deletions, answer 0
// for a slot the node does not own, and refuse bad arguments in Redis
// 7.0.15's words (checked against a live redis-server --cluster-enabled).
func TestClusterKeysInSlot(t *testing.T) { testserver.Models(t, testClusterKeysInSlot) }

func testClusterKeysInSlot(t *testing.T) {
	ts, _ := startClusterServer(t, cluster.On, true, testserver.Def("r", "token_bucket", "10", "24h", ""))
	ctx := context.Background()
	c := ts.Client(t, 2)
	tag := "{" + keyIn("t", true) + "}"
	slot := int(cluster.KeySlotString(tag))
	for _, k := range []string{tag + ":a", tag + ":b"} {
		if err := c.Set(ctx, k, "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{tag + ":a", tag + ":c"} { // :a also as a plain key: two entries
		if err := c.Do(ctx, "RL.ALLOW", k, "r").Err(); err != nil {
			t.Fatal(err)
		}
	}
	count := func(slot int) int64 {
		t.Helper()
		n, err := c.ClusterCountKeysInSlot(ctx, slot).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(slot); n != 4 {
		t.Fatalf("COUNTKEYSINSLOT %d = %d, want 4", slot, n)
	}
	keys, err := c.ClusterGetKeysInSlot(ctx, slot, 10).Result()
	slices.Sort(keys)
	if want := []string{tag + ":a", tag + ":a", tag + ":b", tag + ":c"}; err != nil || !slices.Equal(keys, want) {
		t.Fatalf("GETKEYSINSLOT %d 10 = %q, %v; want %q", slot, keys, err, want)
	}
	if keys, err := c.ClusterGetKeysInSlot(ctx, slot, 2).Result(); err != nil || len(keys) != 2 {
		t.Fatalf("GETKEYSINSLOT %d 2 = %q, %v", slot, keys, err)
	}
	if keys, err := c.ClusterGetKeysInSlot(ctx, slot, 0).Result(); err != nil || len(keys) != 0 {
		t.Fatalf("GETKEYSINSLOT %d 0 = %q, %v", slot, keys, err)
	}
	c.Del(ctx, tag+":b")
	c.Do(ctx, "RL.RESET", tag+":c", "r")
	if n := count(slot); n != 2 {
		t.Fatalf("after DEL and RL.RESET: COUNTKEYSINSLOT = %d, want 2", n)
	}
	if n := count(int(cluster.KeySlotString(keyIn("t", false)))); n != 0 {
		t.Fatalf("a slot another node owns counts %d", n)
	}

	for _, s := range []struct {
		args []any
		want string
	}{
		{[]any{"CLUSTER", "COUNTKEYSINSLOT", "16384"}, "ERR Invalid slot"},
		{[]any{"CLUSTER", "COUNTKEYSINSLOT", "-1"}, "ERR Invalid slot"},
		{[]any{"CLUSTER", "COUNTKEYSINSLOT", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"CLUSTER", "COUNTKEYSINSLOT"}, "ERR wrong number of arguments for 'cluster|countkeysinslot' command"},
		{[]any{"CLUSTER", "GETKEYSINSLOT", "1", "-1"}, "ERR Invalid slot or number of keys"},
		{[]any{"CLUSTER", "GETKEYSINSLOT", "x", "1"}, "ERR value is not an integer or out of range"},
		{[]any{"CLUSTER", "GETKEYSINSLOT", "16384", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"CLUSTER", "GETKEYSINSLOT", "16384", "1"}, "ERR Invalid slot or number of keys"},
		{[]any{"CLUSTER", "GETKEYSINSLOT", "1", "00"}, "ERR value is not an integer or out of range"},
		{[]any{"CLUSTER", "GETKEYSINSLOT", "1", "99999999999999999999"}, "ERR value is not an integer or out of range"},
		{[]any{"CLUSTER", "GETKEYSINSLOT", "1"}, "ERR wrong number of arguments for 'cluster|getkeysinslot' command"},
	} {
		if err := c.Do(ctx, s.args...).Err(); err == nil || err.Error() != s.want {
			t.Errorf("%v: %v, want %s", s.args, err, s.want)
		}
	}
}

// TestClusterKeysInSlotEmulated: a go-redis ClusterClient pointed at an
// emulated node counts the keys it wrote, inside and outside MULTI.
func TestClusterKeysInSlotEmulated(t *testing.T) {
	ts, _ := startClusterServer(t, cluster.Emulated, false)
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{ts.Addr}})
	t.Cleanup(func() { cc.Close() })
	for i := range 5 {
		if err := cc.Set(ctx, fmt.Sprintf("{user:1}:%d", i), "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	slot := int(cluster.KeySlotString("{user:1}"))
	if n, err := cc.ClusterCountKeysInSlot(ctx, slot).Result(); err != nil || n != 5 {
		t.Fatalf("COUNTKEYSINSLOT = %d, %v; want 5", n, err)
	}
	c := ts.Client(t, 2)
	var count *redis.IntCmd
	var keys *redis.StringSliceCmd
	if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		count = p.ClusterCountKeysInSlot(ctx, slot)
		keys = p.ClusterGetKeysInSlot(ctx, slot, 3)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if count.Val() != 5 || len(keys.Val()) != 3 {
		t.Fatalf("in MULTI: count %d, keys %q", count.Val(), keys.Val())
	}

	// A script holds every shard only when it declares no keys.
	const script = "return redis.call('CLUSTER', 'COUNTKEYSINSLOT', ARGV[1])"
	if n, err := c.Eval(ctx, script, nil, slot).Int64(); err != nil || n != 5 {
		t.Fatalf("from a script: %d, %v", n, err)
	}
	err := c.Eval(ctx, script, []string{"{user:1}:0"}, slot).Err()
	if err == nil || !strings.Contains(err.Error(), "Script attempted to run 'cluster|countkeysinslot', which needs every shard") {
		t.Fatalf("from a script holding one shard: %v", err)
	}
}
