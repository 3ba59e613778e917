package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/testskip"
)

// The client tests point real cluster clients at a fake cluster whose
// nodes answer with this package's replies and route with State.Route
// (fakecluster_test.go): go-redis's ClusterClient, redis-py's
// RedisCluster, ioredis's Cluster and redis-cli -c. Each must find every
// node from the replies, route keys to their owners (directly, by MOVED,
// or, for ioredis and the rlserver-only commands, through forwarding),
// keep hash-tagged keys together and be refused cross-slot requests.

// checkOwners fails t unless each key is held by the node the cluster's
// map gives its slot to.
func checkOwners(t *testing.T, fc *fakeCluster, keys []string) {
	t.Helper()
	m := fc.nodes[0].state.View().Map()
	for _, k := range keys {
		want := m.Owner(KeySlotString(k))
		if got := fc.owner(t, k); got != want {
			t.Errorf("key %q (slot %d) is on node %d, its owner is node %d", k, KeySlotString(k), got, want)
		}
	}
}

func TestGoRedisClusterClient(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run("RESP"+strconv.Itoa(proto), func(t *testing.T) {
			fc := startFakeCluster(t, 3)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{fc.nodes[1].srv.Addr}, Protocol: proto})
			defer rc.Close()
			keys := goRedisTraffic(t, ctx, rc, "a")
			checkOwners(t, fc, keys)

			// Node 0 gives half its slots to node 2 (version 2); the
			// client's slot table is stale, and MOVED corrects it.
			m := fc.nodes[0].state.View().Map()
			nodes := []Node{*m.Node(0), *m.Node(1), *m.Node(2)}
			nodes[0].Slots = []Range{{0, 2730}}
			nodes[2].Slots = []Range{{2731, 5460}, {10923, 16383}}
			moved, err := NewMap(2, nodes)
			if err != nil {
				t.Fatal(err)
			}
			fc.push(t, moved)
			checkOwners(t, fc, goRedisTraffic(t, ctx, rc, "b"))
			for _, n := range fc.nodes {
				if n.forwarded != 0 {
					t.Errorf("a node forwarded %d commands that go-redis can route", n.forwarded)
				}
			}
		})
	}
	t.Run("emulated", func(t *testing.T) {
		fc := startFakeCluster(t, 0)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{fc.nodes[0].srv.Addr}})
		defer rc.Close()
		checkOwners(t, fc, goRedisTraffic(t, ctx, rc, "e"))
	})
}

// goRedisTraffic runs SET, GET, INCR, EXPIRE, RL.ALLOW and MGET through rc
// and returns the keys it wrote.
func goRedisTraffic(t *testing.T, ctx context.Context, rc *redis.ClusterClient, prefix string) []string {
	t.Helper()
	var keys []string
	for i := range 200 {
		k := fmt.Sprintf("%s:key:%d", prefix, i)
		keys = append(keys, k)
		if err := rc.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	for i, k := range keys {
		if v, err := rc.Get(ctx, k).Result(); err != nil || v != strconv.Itoa(i) {
			t.Fatalf("GET %s: %q %v", k, v, err)
		}
	}
	for i := range 100 {
		k := fmt.Sprintf("%s:user:%d", prefix, i)
		keys = append(keys, k)
		// go-redis routes a command it does not know by its first argument.
		if n, err := rc.Do(ctx, "RL.ALLOW", k, "per_user").Int(); err != nil || n != 1 {
			t.Fatalf("RL.ALLOW %s: %d %v", k, n, err)
		}
	}
	tagged := []string{"{tenant:7}:" + prefix, "{tenant:7}:" + prefix + ":user:42"}
	keys = append(keys, tagged...)
	for _, k := range tagged {
		if n, err := rc.Incr(ctx, k).Result(); err != nil || n != 1 {
			t.Fatalf("INCR %s: %d %v", k, n, err)
		}
		if ok, err := rc.Expire(ctx, k, time.Minute).Result(); err != nil || !ok {
			t.Fatalf("EXPIRE %s: %v %v", k, ok, err)
		}
	}
	if vals, err := rc.MGet(ctx, tagged...).Result(); err != nil || vals[0] != "1" || vals[1] != "1" {
		t.Fatalf("MGET of one tag: %v %v", vals, err)
	}
	err := rc.MGet(ctx, keys[0], keys[1], keys[2]).Err()
	if err == nil || err.Error() != "CROSSSLOT Keys in request don't hash to the same slot" {
		t.Fatalf("MGET across slots: %v", err)
	}
	return keys
}

func TestRedisPyRedisCluster(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import redis.cluster").Run(); err != nil {
		testskip.Skip(t, "redis-py", "apt-get install python3-redis")
	}
	for _, n := range []int{3, 0} {
		t.Run(modeName(n), func(t *testing.T) {
			fc := startFakeCluster(t, n)
			out := runClient(t, fc, py, "-c", redisPyScript)
			if out != "2\n[b'1', b'1']\nRedisClusterException\n1 True\nOK" {
				t.Errorf("redis-py printed:\n%s", out)
			}
			var keys []string
			for i := range 100 {
				keys = append(keys, fmt.Sprintf("py:%d", i))
			}
			for i := range 50 {
				keys = append(keys, fmt.Sprintf("pyuser:%d", i))
			}
			checkOwners(t, fc, append(keys, "{t}a", "{t}b", "{t}n"))
		})
	}
}

const redisPyScript = `
import os
from redis.cluster import RedisCluster
rc = RedisCluster(host="127.0.0.1", port=int(os.environ["SEED_PORT"]))
for i in range(100):
    rc.set(f"py:{i}", i)
for i in range(100):
    assert rc.get(f"py:{i}") == str(i).encode(), i
for i in range(50):
    assert rc.execute_command("RL.ALLOW", f"pyuser:{i}", "per_user") == 1
print(rc.execute_command("RL.ALLOW", "pyuser:0", "per_user"))
rc.set("{t}a", 1)
rc.set("{t}b", 1)
print(rc.mget("{t}a", "{t}b"))
try:
    rc.mget("py:1", "py:2", "py:3")
except Exception as e:
    print(type(e).__name__)
print(rc.incr("{t}n"), rc.expire("{t}n", 10))
rc.close()
print("OK")
`

func TestIoredisCluster(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testskip.Skip(t, "node", "apt-get install nodejs npm")
	}
	modules, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "clients", "ioredis", "node_modules"))
	if _, err := os.Stat(filepath.Join(modules, "ioredis")); err != nil {
		testskip.Skip(t, "ioredis", "npm ci --prefix testdata/clients/ioredis")
	}
	t.Setenv("NODE_PATH", modules)
	for _, n := range []int{3, 0} {
		t.Run(modeName(n), func(t *testing.T) {
			fc := startFakeCluster(t, n)
			out := runClient(t, fc, node, "-e", ioredisScript)
			if out != "2\n1,1\nCROSSSLOT Keys in request don't hash to the same slot\nOK" {
				t.Errorf("ioredis printed:\n%s", out)
			}
			var keys []string
			for i := range 100 {
				keys = append(keys, fmt.Sprintf("io:%d", i))
			}
			for i := range 60 {
				keys = append(keys, fmt.Sprintf("iouser:%d", i))
			}
			checkOwners(t, fc, append(keys, "{t}a", "{t}b"))
			forwarded := 0
			for _, n := range fc.nodes {
				forwarded += n.forwarded
			}
			// ioredis sends RL.ALLOW to a random node: with three nodes
			// about 2 in 3 are forwarded; 0 of 61 has odds of (1/3)^61.
			if n == 3 && forwarded == 0 {
				t.Error("no RL.ALLOW was forwarded; ioredis cannot have routed them all")
			}
		})
	}
}

const ioredisScript = `
const Redis = require("ioredis");
const c = new Redis.Cluster([{ host: "127.0.0.1", port: Number(process.env.SEED_PORT) }]);
(async () => {
  for (let i = 0; i < 100; i++) await c.set("io:" + i, i);
  for (let i = 0; i < 100; i++) {
    const v = await c.get("io:" + i);
    if (v !== String(i)) throw new Error("io:" + i + " = " + v);
  }
  for (let i = 0; i < 60; i++) {
    const n = await c.call("RL.ALLOW", "iouser:" + i, "per_user");
    if (n !== 1) throw new Error("RL.ALLOW iouser:" + i + " = " + n);
  }
  console.log(await c.call("RL.ALLOW", "iouser:0", "per_user"));
  await c.set("{t}a", 1);
  await c.set("{t}b", 1);
  console.log(String(await c.mget("{t}a", "{t}b")));
  try { await c.mget("io:1", "io:2", "io:3"); } catch (e) { console.log(e.message); }
  await c.quit();
  console.log("OK");
})().catch((e) => { console.error(e); process.exit(1); });
`

func TestRedisCliFollowsMoved(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		testskip.Skip(t, "redis-cli", "apt-get install redis-tools")
	}
	for _, n := range []int{3, 0} {
		t.Run(modeName(n), func(t *testing.T) {
			fc := startFakeCluster(t, n)
			m := fc.nodes[0].state.View().Map()
			// Ask a node that does not own foo (when there is one).
			ask := (m.Owner(KeySlotString("foo")) + 1) % len(fc.nodes)
			_, port, _ := strings.Cut(fc.nodes[ask].srv.Addr, ":")
			run := func(args ...string) string {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				out, err := exec.CommandContext(ctx, cli, append([]string{"-c", "-h", "127.0.0.1", "-p", port}, args...)...).CombinedOutput()
				if err != nil {
					t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
				}
				return strings.TrimSpace(string(out))
			}
			if got := run("SET", "foo", "bar"); got != "OK" {
				t.Errorf("SET: %q", got)
			}
			if got := run("GET", "foo"); got != "bar" {
				t.Errorf("GET: %q", got)
			}
			if got := run("RL.ALLOW", "{tenant:7}:user:42", "per_user"); got != "1" {
				t.Errorf("RL.ALLOW: %q", got)
			}
			if got := run("CLUSTER", "KEYSLOT", "{tenant:7}:user:42"); got != "2624" {
				t.Errorf("KEYSLOT: %q", got)
			}
			checkOwners(t, fc, []string{"foo", "{tenant:7}:user:42"})
		})
	}
}

func modeName(n int) string {
	if n == 0 {
		return "emulated"
	}
	return strconv.Itoa(n) + "_nodes"
}

// runClient runs a client program with SEED_PORT set to the last node's
// port and returns its output, failing t if it fails or takes over 60s.
func runClient(t *testing.T, fc *fakeCluster, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, port, _ := strings.Cut(fc.nodes[len(fc.nodes)-1].srv.Addr, ":")
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "SEED_PORT="+port)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(bin), err, out)
	}
	return strings.TrimSpace(string(out))
}
