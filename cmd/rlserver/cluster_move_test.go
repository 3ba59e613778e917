package main

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/cluster"
)

// moveLowSlots gives slots 0-2730 of node 0 to node 1, pushing the map as
// an operator does: the new owner first, the old owner last (it hands the
// slots over before it answers).
func (tc *testCluster) moveLowSlots(t *testing.T) {
	t.Helper()
	n0, n1, n2 := *tc.m.Node(0), *tc.m.Node(1), *tc.m.Node(2)
	n0.Slots = []cluster.Range{{Start: 2731, End: 5460}}
	n1.Slots = []cluster.Range{{Start: 0, End: 2730}, {Start: 5461, End: 10922}}
	m2, err := cluster.NewMap(tc.m.Version()+1, []cluster.Node{n0, n1, n2})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2, 0} {
		if err := pushMap(t, tc.nodes[i].client(t), m2); err != nil {
			t.Fatalf("push to node %d: %v", i, err)
		}
	}
	tc.m = m2
}

// TestClusterSlotMoveCarriesEveryKind: a slot move carries every piece of
// per-key state a snapshot keeps — a limiter key's spent budget, its
// override (numbers and expiry), a string with its TTL, a hash, a list
// and a sorted set — to the new owner, which then answers for each as the
// old owner did; the old owner drops its copy.
func TestClusterSlotMoveCarriesEveryKind(t *testing.T) {
	tc := startTestCluster(t, 3)
	tag := ""
	for i := 0; tag == ""; i++ {
		if k := "{kinds" + strconv.Itoa(i) + "}"; cluster.KeySlotString(k) <= 2730 {
			tag = k
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	old := tc.peer(t, 0)
	overrideAt := time.Now().Add(time.Hour).Unix()
	for _, cmd := range [][]any{
		{"RL.OVERRIDE", "SET", "day", tag + "ovr", 5, "24h", "EXAT", overrideAt},
		{"RL.ALLOW", tag + "ovr", "day", 3},
		{"RL.ALLOW", tag + "plain", "day", 7},
		{"SET", tag + "str", "v1", "EX", 1000},
		{"HSET", tag + "h", "f1", "a", "f2", "b"},
		{"RPUSH", tag + "l", "x", "y", "z"},
		{"ZADD", tag + "z", 1, "m1", 2.5, "m2"},
	} {
		if err := old.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v on the old owner: %v", cmd, err)
		}
	}
	tc.moveLowSlots(t)
	c := tc.peer(t, 1)
	if err := old.Get(ctx, tag+"str").Err(); err == nil {
		t.Errorf("the old owner still answers for %sstr", tag)
	}
	if n, err := old.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("the old owner still holds %d keys (%v), want its copy of the moved ones dropped", n, err)
	}
	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s on the new owner: %v, want %v", what, got, want)
		}
	}
	ovr, err := c.Do(ctx, "RL.OVERRIDE", "GET", "day", tag+"ovr").Slice()
	if err != nil || len(ovr) != 14 {
		t.Fatalf("RL.OVERRIDE GET on the new owner: %v %v", ovr, err)
	}
	check("override limit", ovr[5], int64(5))
	check("override expiry (ms)", ovr[11], overrideAt*1000)
	peek := func(key string) any {
		v, err := c.Do(ctx, "RL.PEEK", key, "day").Slice()
		if err != nil {
			t.Fatalf("RL.PEEK %s: %v", key, err)
		}
		return v[2]
	}
	check("remaining under the override", peek(tag+"ovr"), int64(2))
	check("remaining under the rule", peek(tag+"plain"), int64(43))
	check("GET", c.Get(ctx, tag+"str").Val(), "v1")
	if ttl := c.TTL(ctx, tag+"str").Val(); ttl <= 900*time.Second || ttl > 1000*time.Second {
		t.Errorf("TTL on the new owner: %v, want the old owner's (at most 1000s)", ttl)
	}
	check("HGETALL", c.HGetAll(ctx, tag+"h").Val(), map[string]string{"f1": "a", "f2": "b"})
	check("LRANGE", c.LRange(ctx, tag+"l", 0, -1).Val(), []string{"x", "y", "z"})
	check("ZRANGE", c.Do(ctx, "ZRANGE", tag+"z", 0, -1, "WITHSCORES").Val(), []any{"m1", "1", "m2", "2.5"})
}
