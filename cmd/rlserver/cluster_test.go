package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"

	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/testskip"
)

// The cluster tests run real rlserver processes in cluster mode on
// loopback ports, made one cluster by `rlserver cluster create`, and point
// real cluster clients at them: go-redis's ClusterClient, redis-py's
// RedisCluster, ioredis's Cluster (through forwarding for RL.*) and
// redis-cli -c.

// clusterRules: per_user for traffic, day for exact counts. Both are
// token buckets refilling over a day, so the seconds a test takes on a
// loaded machine refill nothing (one token takes 864 s).
const clusterRules = `rules:
  - {name: per_user, algorithm: token_bucket, limit: 100, window: 24h}
  - {name: day, algorithm: token_bucket, limit: 50, window: 24h}
`

type testCluster struct {
	nodes []*process
	m     *cluster.Map // the map create pushed
}

// startTestCluster starts n nodes in cluster mode and creates the cluster
// with `rlserver cluster create`, as an operator would. extra are more
// arguments for every node.
func startTestCluster(t *testing.T, n int, extra ...string) *testCluster {
	t.Helper()
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(clusterRules), 0o644); err != nil {
		t.Fatal(err)
	}
	tc := &testCluster{}
	var addrs []string
	for range n {
		p := spawn(t, append([]string{"--cluster", "on", "--data-dir", t.TempDir(), "--rules", rules, "--snapshot-interval", "0"}, extra...)...)
		tc.nodes = append(tc.nodes, p)
		addrs = append(addrs, p.addr)
	}
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	if code := runClusterTool(ctx, append([]string{"create"}, addrs...), nil, &out, &errb); code != exitOK {
		t.Fatalf("cluster create: exit %d\n%s%s", code, out.String(), errb.String())
	}
	tc.m = tc.config(t, 0)
	if tc.m == nil || tc.m.Len() != n {
		t.Fatalf("after create, node 0 holds %v", tc.m)
	}
	return tc
}

// config returns the map node i holds.
func (tc *testCluster) config(t *testing.T, i int) *cluster.Map {
	t.Helper()
	s, err := tc.nodes[i].client(t).Do(context.Background(), "RL.CLUSTER", "GETCONFIG").Text()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := cluster.ParseMap([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// owner returns the index of the node that owns key's slot.
func (tc *testCluster) owner(key string) int {
	return tc.m.Owner(cluster.KeySlotString(key))
}

// peer returns a connection to node i marked as another node's, which is
// never forwarded: it answers MOVED for slots the node does not own.
func (tc *testCluster) peer(t *testing.T, i int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: tc.nodes[i].addr, Protocol: 2, MaxRetries: -1, PoolSize: 1,
		OnConnect: func(ctx context.Context, cn *redis.Conn) error {
			return cn.Do(ctx, "RL.CLUSTER", "PEER").Err()
		}})
	t.Cleanup(func() { c.Close() })
	return c
}

// checkOwned fails t unless each key's per_user state is held by its
// owner, and only there: the owner answers RL.PEEK with a spent budget,
// every other node MOVED to the owner.
func (tc *testCluster) checkOwned(t *testing.T, keys []string) {
	t.Helper()
	ctx := context.Background()
	for _, k := range keys {
		o := tc.owner(k)
		for i := range tc.nodes {
			v, err := tc.peer(t, i).Do(ctx, "RL.PEEK", k, "per_user").Slice()
			switch {
			case i == o && (err != nil || v[2].(int64) >= 100):
				t.Errorf("key %q: its owner, node %d, answers %v %v; want a spent budget", k, i, v, err)
			case i != o && (err == nil || !strings.HasPrefix(err.Error(), "MOVED ")):
				t.Errorf("key %q: node %d (not its owner, node %d) answers %v %v; want MOVED", k, i, o, v, err)
			}
		}
	}
}

func TestClusterGoRedisClusterClient(t *testing.T) {
	tc := startTestCluster(t, 3)
	for _, proto := range []int{2, 3} {
		t.Run("RESP"+strconv.Itoa(proto), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
			defer cancel()
			rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{tc.nodes[1].addr}, Protocol: proto})
			defer rc.Close()
			prefix := "go" + strconv.Itoa(proto)
			var keys []string
			for i := range 60 {
				k := fmt.Sprintf("%s:user:%d", prefix, i)
				keys = append(keys, k)
				if v, err := rc.Do(ctx, "RL.ALLOW", k, "per_user").Result(); err != nil || allowed(v) != 1 {
					t.Fatalf("RL.ALLOW %s: %v %v", k, v, err)
				}
				if v, err := rc.Do(ctx, "CL.THROTTLE", k+":cell", 10, 100, 60).Slice(); err != nil || v[0] != int64(0) {
					t.Fatalf("CL.THROTTLE %s: %v %v", k, v, err)
				}
				if n, err := rc.Incr(ctx, k+":n").Result(); err != nil || n != 1 {
					t.Fatalf("INCR %s: %d %v", k, n, err)
				}
				if ok, err := rc.Expire(ctx, k+":n", time.Minute).Result(); err != nil || !ok {
					t.Fatalf("EXPIRE %s: %v %v", k, ok, err)
				}
			}
			tagged, err := rc.Do(ctx, "RL.ALLOWALL", "{tenant:7}", "per_user", "{tenant:7}:user:"+prefix, "per_user").Result()
			if err != nil || allowed(tagged) != 1 {
				t.Errorf("RL.ALLOWALL in one slot: %v %v", tagged, err)
			}
			err = rc.Do(ctx, "RL.ALLOWALL", keys[0], "per_user", keys[1], "per_user", keys[2], "per_user").Err()
			if err == nil || err.Error() != "CROSSSLOT Keys in request don't hash to the same slot" {
				t.Errorf("RL.ALLOWALL across slots: %v", err)
			}
			tc.checkOwned(t, append(keys, "{tenant:7}", "{tenant:7}:user:"+prefix))
		})
	}
}

func TestClusterRedisPy(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import redis.cluster").Run(); err != nil {
		testskip.Skip(t, "redis-py", "apt-get install python3-redis")
	}
	tc := startTestCluster(t, 3)
	out := runClusterClient(t, tc.nodes[2].addr, py, "-c", redisPyScript)
	// redis-py finds RL.ALLOWALL's keys with COMMAND GETKEYS and refuses
	// keys in two slots itself, before sending.
	want := "1\n0\n1\nRedisClusterException RL.ALLOWALL - all keys must map to the same key slot\n1 True\nOK"
	if out != want {
		t.Errorf("redis-py printed:\n%s\nwant:\n%s", out, want)
	}
	var keys []string
	for i := range 50 {
		keys = append(keys, fmt.Sprintf("py:%d", i))
	}
	tc.checkOwned(t, append(keys, "{t}a", "{t}b"))
}

// redisPyScript routes RL.* by COMMAND's key positions, and RL.ALLOWALL
// by COMMAND GETKEYS (movable keys).
const redisPyScript = `
import os
from redis.cluster import RedisCluster
host, port = os.environ["SEED"].rsplit(":", 1)
rc = RedisCluster(host=host, port=int(port))
for i in range(50):
    assert rc.execute_command("RL.ALLOW", f"py:{i}", "per_user")[0] == 1
    assert rc.execute_command("CL.THROTTLE", f"py:{i}:cell", 10, 100, 60)[0] == 0
    assert rc.set(f"py:{i}:s", i)
    assert rc.get(f"py:{i}:s") == str(i).encode()
print(rc.execute_command("RL.ALLOW", "py:0", "per_user")[0])
print(rc.execute_command("CL.THROTTLE", "py:0:cell", 10, 100, 60)[0])
print(rc.execute_command("RL.ALLOWALL", "{t}a", "per_user", "{t}b", "per_user")[0])
try:
    rc.execute_command("RL.ALLOWALL", "py:1", "per_user", "py:2", "per_user")
except Exception as e:
    print(type(e).__name__, e)
print(rc.incr("{t}n"), rc.expire("{t}n", 10))
rc.close()
print("OK")
`

func TestClusterIoredis(t *testing.T) {
	node := ioredisOrSkip(t)
	tc := startTestCluster(t, 3)
	out := runClusterClient(t, tc.nodes[0].addr, node, "-e", ioredisScript)
	want := "1\n1\nCROSSSLOT Keys in request don't hash to the same slot\n1\nOK"
	if out != want {
		t.Errorf("ioredis printed:\n%s\nwant:\n%s", out, want)
	}
	var keys []string
	for i := range 60 {
		keys = append(keys, fmt.Sprintf("io:%d", i))
	}
	tc.checkOwned(t, append(keys, "{t}a", "{t}b"))
	// ioredis sends RL.* to a random node: with three nodes about 2 in 3
	// are forwarded; none of 120 has odds of (1/3)^120.
	if n := tc.forwarded(t); n == 0 {
		t.Error("no command was forwarded; ioredis cannot have routed every RL.* itself")
	}
}

// forwarded is the number of commands the nodes forwarded.
func (tc *testCluster) forwarded(t *testing.T) int {
	t.Helper()
	total := 0
	for i, p := range tc.nodes {
		info, err := p.client(t).Info(context.Background(), "cluster").Result()
		if err != nil {
			t.Fatalf("INFO of node %d: %v", i, err)
		}
		_, rest, ok := strings.Cut(info, "rl_cluster_forwarded_total:")
		n, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\r\n", 2)[0]))
		if !ok || err != nil {
			t.Fatalf("INFO cluster of node %d: no rl_cluster_forwarded_total in %q", i, info)
		}
		total += n
	}
	return total
}

// ioredisOrSkip returns node's path, with NODE_PATH set to the test
// clients' ioredis, or skips t.
func ioredisOrSkip(t *testing.T) string {
	node, err := exec.LookPath("node")
	if err != nil {
		testskip.Skip(t, "node", "apt-get install nodejs npm")
	}
	modules, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "clients", "ioredis", "node_modules"))
	if _, err := os.Stat(filepath.Join(modules, "ioredis")); err != nil {
		testskip.Skip(t, "ioredis", "npm ci --prefix testdata/clients/ioredis")
	}
	t.Setenv("NODE_PATH", modules)
	return node
}

// ioredisScript: ioredis knows no RL.* command, so it sends each to a
// random node, which forwards it to the owner.
const ioredisScript = `
const Redis = require("ioredis");
const [host, port] = [process.env.SEED.slice(0, process.env.SEED.lastIndexOf(":")), Number(process.env.SEED.split(":").pop())];
const c = new Redis.Cluster([{ host, port }]);
(async () => {
  for (let i = 0; i < 60; i++) {
    const v = await c.call("RL.ALLOW", "io:" + i, "per_user");
    if (v[0] !== 1) throw new Error("RL.ALLOW io:" + i + " = " + v);
    const cell = await c.call("CL.THROTTLE", "io:" + i + ":cell", 10, 100, 60);
    if (cell[0] !== 0) throw new Error("CL.THROTTLE io:" + i + " = " + cell);
    if (await c.incr("io:" + i + ":n") !== 1) throw new Error("INCR io:" + i);
    if (await c.expire("io:" + i + ":n", 60) !== 1) throw new Error("EXPIRE io:" + i);
  }
  console.log((await c.call("RL.ALLOW", "io:0", "per_user"))[0]);
  console.log((await c.call("RL.ALLOWALL", "{t}a", "per_user", "{t}b", "per_user"))[0]);
  try { await c.call("RL.ALLOWALL", "io:1", "per_user", "io:2", "per_user"); } catch (e) { console.log(e.message); }
  console.log(await c.incr("{t}n"));
  await c.quit();
  console.log("OK");
})().catch((e) => { console.error(e); process.exit(1); });
`

func TestClusterRedisCli(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		testskip.Skip(t, "redis-cli", "apt-get install redis-tools")
	}
	tc := startTestCluster(t, 3)
	key := "{tenant:7}:user:42"
	// Ask a node that does not own the keys, with forwarding off for this
	// connection's commands (MOVED is what redis-cli follows): plain
	// commands are answered MOVED, RL.* forwarded.
	ask := tc.nodes[(tc.owner(key)+1)%3].addr
	run := func(args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
		defer cancel()
		host, port, _ := strings.Cut(ask, ":")
		out, err := exec.CommandContext(ctx, cli, append([]string{"-c", "-h", host, "-p", port}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	checks := []struct{ args, want string }{
		{"SET foo bar", "OK"},
		{"GET foo", "bar"},
		{"INCR " + key + ":n", "1"},
		{"EXPIRE " + key + ":n 60", "1"},
		// allowed, limit, remaining (the rest depends on elapsed time)
		{"RL.ALLOW " + key + " per_user", "1\n100\n99"},
		{"CL.THROTTLE " + key + ":cell 10 100 60", "0\n11\n10"},
		// all admitted; the first pair's allowed, limit, remaining
		{"RL.ALLOWALL {tenant:7} per_user " + key + " per_user", "1\n1\n100\n99"},
		{"RL.ALLOWALL foo per_user bar per_user", "CROSSSLOT Keys in request don't hash to the same slot"},
		{"CLUSTER KEYSLOT " + key, "2624"},
	}
	for _, c := range checks {
		got := run(strings.Fields(c.args)...)
		if strings.Count(got, "\n") > strings.Count(c.want, "\n") {
			got = strings.Join(strings.Split(got, "\n")[:strings.Count(c.want, "\n")+1], "\n")
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.args, got, c.want)
		}
	}
	tc.checkOwned(t, []string{key, "{tenant:7}"})
}

// runClusterClient runs a client program with SEED set to a node's
// address and returns its output, failing t if it fails or takes too long.
func runClusterClient(t *testing.T, seed, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*testDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "SEED="+seed)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(bin), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestClusterExactness: 64 connections over three nodes spend a few keys'
// day-long budgets, half routed by a ClusterClient, half sent to any node
// and forwarded; each key admits exactly its limit.
func TestClusterExactness(t *testing.T) {
	tc := startTestCluster(t, 3)
	const (
		conns    = 64
		keys     = 12
		limit    = 50 // the day rule's
		requests = 40 // per connection: 64*40 = 2560, over keys*limit = 600
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*testDeadline)
	defer cancel()
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{tc.nodes[0].addr}, PoolSize: conns / 2})
	defer rc.Close()
	var (
		mu       sync.Mutex
		admitted [keys]int
		failures []error
	)
	var wg sync.WaitGroup
	for g := range conns {
		var do func(args ...any) *redis.Cmd
		if g%2 == 0 {
			do = func(args ...any) *redis.Cmd { return rc.Do(ctx, args...) }
		} else {
			c := redis.NewClient(&redis.Options{Addr: tc.nodes[g%3].addr, PoolSize: 1, MaxRetries: -1})
			defer c.Close()
			do = func(args ...any) *redis.Cmd { return c.Do(ctx, args...) }
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range requests {
				k := (g + i) % keys
				v, err := do("RL.ALLOW", "exact:"+strconv.Itoa(k), "day").Result()
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				} else if allowed(v) == 1 {
					admitted[k]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed, the first: %v", len(failures), failures[0])
	}
	for k, n := range admitted {
		if n != limit {
			t.Errorf("key exact:%d: %d admitted, want exactly %d", k, n, limit)
		}
	}
	if tc.forwarded(t) == 0 {
		t.Error("no request was forwarded: the plain clients' requests for other nodes' slots must be")
	}
}

// pushMap sends m to node i with RL.CLUSTER SETCONFIG.
func pushMap(t *testing.T, c *redis.Client, m *cluster.Map) error {
	t.Helper()
	js, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return c.Do(context.Background(), "RL.CLUSTER", "SETCONFIG", string(js)).Err()
}

// TestClusterMapPushAndReload: a node without a map answers CLUSTERDOWN;
// maps come from --cluster-config (reloaded on SIGHUP) and RL.CLUSTER
// SETCONFIG; a bad map and an older one are refused; a restarted node
// keeps the map last pushed.
func TestClusterMapPushAndReload(t *testing.T) {
	ctx := context.Background()
	id := strings.Repeat("ab", 20)
	data, dir := t.TempDir(), t.TempDir()
	cfgPath := filepath.Join(dir, "map.json")
	node := func(version uint64, port int) *cluster.Map {
		m, err := cluster.NewMap(version, []cluster.Node{{ID: id, Host: "127.0.0.1", Port: port, Slots: []cluster.Range{{Start: 0, End: cluster.Slots - 1}}}})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// A node without a map answers CLUSTERDOWN.
	waiting := spawn(t, "--cluster", "on", "--data-dir", "")
	wc := waiting.client(t)
	if err := wc.Set(ctx, "k", 1, 0).Err(); err == nil || err.Error() != "CLUSTERDOWN The cluster is down" {
		t.Fatalf("SET without a map: %v", err)
	}
	if info, _ := wc.Do(ctx, "CLUSTER", "INFO").Text(); !strings.HasPrefix(info, "cluster_state:fail\r\n") {
		t.Errorf("CLUSTER INFO without a map: %q", info)
	}

	// The map in --cluster-config at start: its port is not known before
	// the node listens, so version 1 names another port (the node is
	// found in it by its id; clients would be told the wrong port).
	js, _ := json.Marshal(node(1, 1))
	os.WriteFile(cfgPath, js, 0o644)
	p := spawn(t, "--cluster", "on", "--cluster-node-id", id, "--data-dir", data, "--cluster-config", cfgPath)
	c := p.client(t)
	if m := configOf(t, c); m == nil || m.Version() != 1 {
		t.Fatalf("at start the node holds %v, want version 1", m)
	}
	port, _ := strconv.Atoi(p.addr[strings.LastIndex(p.addr, ":")+1:])

	// The file, on SIGHUP.
	js, _ = json.Marshal(node(2, port))
	os.WriteFile(cfgPath, js, 0o644)
	p.cmd.Process.Signal(unix.SIGHUP)
	waitFor(t, func() bool { m := configOf(t, c); return m != nil && m.Version() == 2 })
	if err := c.Set(ctx, "k", 1, 0).Err(); err != nil {
		t.Fatalf("SET with a map: %v", err)
	}
	// A bad file is refused on SIGHUP; the node keeps its map.
	os.WriteFile(cfgPath, []byte(`{"version": 9, "nodes": []}`), 0o644)
	p.cmd.Process.Signal(unix.SIGHUP)
	waitFor(t, func() bool { return strings.Contains(p.out.String(), "cluster map reload failed") })
	if m := configOf(t, c); m.Version() != 2 {
		t.Errorf("after a bad file the node holds version %d", m.Version())
	}

	// Pushes.
	if err := pushMap(t, c, node(3, port)); err != nil {
		t.Fatalf("push of version 3: %v", err)
	}
	if err := pushMap(t, c, node(3, port)); err != nil {
		t.Errorf("the same map again: %v", err)
	}
	err := pushMap(t, c, node(1, port))
	if err == nil || !strings.Contains(err.Error(), "cluster map is older than the node's: version 1, the node holds version 3") {
		t.Errorf("older map: %v", err)
	}
	err = c.Do(ctx, "RL.CLUSTER", "SETCONFIG", `{"version": 4, "nodes": [{"id": "`+id+`", "host": "127.0.0.1", "port": 1, "slots": [[0, 100]]}]}`).Err()
	if err == nil || !strings.Contains(err.Error(), "invalid cluster map: slots 101-16383 are owned by no node") {
		t.Errorf("map not covering every slot: %v", err)
	}
	if m := configOf(t, c); m.Version() != 3 {
		t.Errorf("after refusals the node holds version %d", m.Version())
	}

	// A restart keeps the pushed map (saved in --data-dir), newer than the file's.
	p.cmd.Process.Signal(unix.SIGTERM)
	p.wait(t)
	os.WriteFile(cfgPath, js, 0o644) // version 2
	p = spawn(t, "--cluster", "on", "--cluster-node-id", id, "--data-dir", data, "--cluster-config", cfgPath)
	if m := configOf(t, p.client(t)); m == nil || m.Version() != 3 {
		t.Errorf("after a restart the node holds %v, want version 3", m)
	}
}

func configOf(t *testing.T, c *redis.Client) *cluster.Map {
	t.Helper()
	s, err := c.Do(context.Background(), "RL.CLUSTER", "GETCONFIG").Text()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := cluster.ParseMap([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// waitFor polls cond (a signal's effect, which has no reply to wait on)
// until it holds, failing t after testDeadline.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterEmulated: one node in emulated mode serves every cluster
// client, with cross-slot requests still refused.
func TestClusterEmulated(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	os.WriteFile(rules, []byte(clusterRules), 0o644)
	p := spawn(t, "--cluster", "emulated", "--rules", rules, "--data-dir", t.TempDir())
	t.Run("go-redis", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
		defer cancel()
		rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{p.addr}})
		defer rc.Close()
		for i := range 20 {
			if v, err := rc.Do(ctx, "RL.ALLOW", "em:"+strconv.Itoa(i), "per_user").Result(); err != nil || allowed(v) != 1 {
				t.Fatalf("RL.ALLOW: %v %v", v, err)
			}
		}
		err := rc.Do(ctx, "RL.ALLOWALL", "em:1", "per_user", "em:2", "per_user").Err()
		if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
			t.Errorf("RL.ALLOWALL across slots: %v", err)
		}
	})
	t.Run("redis-py", func(t *testing.T) {
		py := "/usr/bin/python3"
		if err := exec.Command(py, "-c", "import redis.cluster").Run(); err != nil {
			testskip.Skip(t, "redis-py", "apt-get install python3-redis")
		}
		if out := runClusterClient(t, p.addr, py, "-c", redisPyScript); !strings.HasSuffix(out, "OK") {
			t.Errorf("redis-py printed:\n%s", out)
		}
	})
	t.Run("ioredis", func(t *testing.T) {
		node := ioredisOrSkip(t)
		if out := runClusterClient(t, p.addr, node, "-e", ioredisScript); !strings.HasSuffix(out, "OK") {
			t.Errorf("ioredis printed:\n%s", out)
		}
	})
	t.Run("redis-cli", func(t *testing.T) {
		host, port, _ := strings.Cut(p.addr, ":")
		out, err := exec.Command("redis-cli", "-c", "-h", host, "-p", port, "CLUSTER", "SLOTS").CombinedOutput()
		if err != nil {
			testskip.Skip(t, "redis-cli", "apt-get install redis-tools")
		}
		if want := "0\n16383\n127.0.0.1\n" + port + "\n"; !strings.HasPrefix(string(out), want) {
			t.Errorf("CLUSTER SLOTS: %q, want it to start %q", out, want)
		}
	})
}

// TestClusterNodeKilledAndMapRepushed: a dead node's slots answer
// CLUSTERDOWN through forwarding until a map without it is pushed; then
// they are served (fresh) by the survivors, and the clients follow.
func TestClusterNodeKilledAndMapRepushed(t *testing.T) {
	tc := startTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*testDeadline)
	defer cancel()
	var lost string // a key node 2 owns
	for i := 0; lost == ""; i++ {
		if k := "lost:" + strconv.Itoa(i); tc.owner(k) == 2 {
			lost = k
		}
	}
	c0 := tc.nodes[0].client(t)
	// A rule change reaches every node while all are up.
	if err := c0.Do(ctx, "RL.RULE", "SET", "late", "fixed_window", "7", "1h").Err(); err != nil {
		t.Fatalf("RL.RULE SET: %v", err)
	}
	for i, p := range tc.nodes {
		if v, err := p.client(t).Do(ctx, "RL.RULE", "GET", "late").Slice(); err != nil || fmt.Sprint(v) != "[name late algorithm fixed_window limit 7 window 1h burst 0 mode enforce]" {
			t.Errorf("node %d after the broadcast: RL.RULE GET late: %v %v", i, v, err)
		}
	}
	if err := c0.Do(ctx, "MULTI").Err(); err != nil {
		t.Fatal(err)
	}
	err := c0.Do(ctx, "RL.RULE", "DEL", "late").Err()
	if err == nil || !strings.Contains(err.Error(), "RL.RULE DEL is not queued in cluster mode") {
		t.Errorf("RL.RULE DEL inside MULTI: %v", err)
	}
	c0.Do(ctx, "DISCARD")
	if v, err := c0.Do(ctx, "RL.ALLOW", lost, "day").Slice(); err != nil || v[0] != int64(1) {
		t.Fatalf("RL.ALLOW forwarded to node 2: %v %v", v, err)
	}
	tc.nodes[2].cmd.Process.Signal(unix.SIGKILL)
	tc.nodes[2].wait(t)
	err = c0.Do(ctx, "RL.RULE", "DEL", "late").Err()
	if want := "ERR rule del on 2 of 3 nodes; not on " + tc.nodes[2].addr + " (unreachable)"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("RL.RULE DEL with a node down: %v, want %q", err, want)
	}
	err = c0.Do(ctx, "RL.ALLOW", lost, "day").Err()
	if err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN The owner of slot") {
		t.Fatalf("RL.ALLOW for the dead node's slot: %v", err)
	}
	if err := c0.Get(ctx, lost).Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
		t.Errorf("GET for the dead node's slot: %v", err)
	}

	// The operator pushes version 2: node 2's slots split between 0 and 1.
	n0, n1 := *tc.m.Node(0), *tc.m.Node(1)
	n0.Slots = append(n0.Slots, cluster.Range{Start: 10923, End: 13000})
	n1.Slots = append(n1.Slots, cluster.Range{Start: 13001, End: 16383})
	m2, err := cluster.NewMap(2, []cluster.Node{n0, n1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := pushMap(t, tc.nodes[i].client(t), m2); err != nil {
			t.Fatalf("push to node %d: %v", i, err)
		}
	}
	v, err := c0.Do(ctx, "RL.ALLOW", lost, "day").Slice()
	if err != nil || v[0] != int64(1) || v[2] != int64(49) {
		t.Errorf("RL.ALLOW after the re-push: %v %v; want admitted with a fresh budget (49 left)", v, err)
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{tc.nodes[0].addr, tc.nodes[1].addr}})
	defer rc.Close()
	for i := range 30 {
		k := "after:" + strconv.Itoa(i)
		if err := rc.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s after the re-push: %v", k, err)
		}
	}
}

// allowed is a decision's first field, from RESP2's array or RESP3's map;
// -1 if v is neither.
func allowed(v any) int64 {
	switch d := v.(type) {
	case []any:
		if n, ok := d[0].(int64); ok {
			return n
		}
	case map[any]any:
		if n, ok := d["allowed"].(int64); ok {
			return n
		}
	}
	return -1
}

// TestClusterConfigMissingFailsTheStart: a --cluster-config that does not
// exist (a misspelt path) fails the start instead of leaving the node
// without a map.
func TestClusterConfigMissingFailsTheStart(t *testing.T) {
	var out, errb bytes.Buffer
	missing := filepath.Join(t.TempDir(), "nope.json")
	// Bounded: a node that starts anyway serves until ctx ends, and exits 0.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	code := run(ctx, nil, []string{"--addr", "127.0.0.1:0", "--data-dir", "", "--cluster", "on",
		"--cluster-config", missing}, nil, &out, &errb)
	if code != exitFail || !strings.Contains(errb.String(), "--cluster-config: stat "+missing+": no such file or directory") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}

// TestClusterForwardLatency measures what forwarding adds to a request:
// RL.ALLOW sent to its key's owner, and to another node that forwards it,
// one request at a time over loopback, p50 and p99 of each. It is a
// measurement (docs/cluster.md quotes it), run with
// RLSERVER_MEASURE_FORWARD=1; it checks nothing but that requests succeed.
func TestClusterForwardLatency(t *testing.T) {
	if os.Getenv("RLSERVER_MEASURE_FORWARD") == "" {
		t.Skip("a measurement: set RLSERVER_MEASURE_FORWARD=1")
	}
	tc := startTestCluster(t, 3)
	ctx := context.Background()
	const n = 20000
	key := "lat:1"
	owner := tc.owner(key)
	measure := func(node int) (p50, p99 time.Duration) {
		c := redis.NewClient(&redis.Options{Addr: tc.nodes[node].addr, PoolSize: 1, MaxRetries: -1})
		defer c.Close()
		d := make([]time.Duration, n)
		for i := range n {
			start := time.Now()
			if err := c.Do(ctx, "RL.PEEK", key, "per_user").Err(); err != nil {
				t.Fatal(err)
			}
			d[i] = time.Since(start)
		}
		slices.Sort(d)
		return d[n/2], d[n*99/100]
	}
	for round := range 3 {
		d50, d99 := measure(owner)
		f50, f99 := measure((owner + 1) % 3)
		t.Logf("round %d: direct p50 %v p99 %v; forwarded p50 %v p99 %v", round, d50, d99, f50, f99)
	}
}

// TestClusterSlotMove: half of node 0's slots move to node 1 while 32
// connections spend day-long budgets of keys in those slots, through a
// ClusterClient and through plain clients on every node (forwarded). The
// state moves with the slots: each key admits exactly its limit, no
// request fails, and node 1 holds the spent state afterwards.
func TestClusterSlotMove(t *testing.T) {
	tc := startTestCluster(t, 3)
	const (
		conns    = 32
		nkeys    = 16
		limit    = 50 // the day rule's
		requests = 40 // per connection at least: 32*40 = 1280, over nkeys*limit = 800
		most     = 2000
	)
	var keys []string
	for i := 0; len(keys) < nkeys; i++ {
		if k := "mv:" + strconv.Itoa(i); cluster.KeySlotString(k) <= 2730 {
			keys = append(keys, k)
		}
	}
	// Each cluster client's connection also overwrites a string of its own
	// in the moving slots and, at its end, deletes another (plain clients
	// would get MOVED: only RL.* is forwarded): the writes made while the
	// slots are copied must reach the new owner.
	var written, deleted []string
	for i := 0; len(deleted) < conns; i++ {
		if k := "{w" + strconv.Itoa(i) + "}"; cluster.KeySlotString(k) <= 2730 {
			written, deleted = append(written, k+"str"), append(deleted, k+"del")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*testDeadline)
	defer cancel()
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{tc.nodes[2].addr}, PoolSize: conns / 2})
	defer rc.Close()
	// Keys beside the hot ones, so that the copy has work: limiter state and
	// strings, spread over every slot (a sixth of them in the moving ones).
	const background = 15000
	pipe := rc.Pipeline()
	for i := range background {
		pipe.Do(ctx, "RL.ALLOW", "bg:"+strconv.Itoa(i), "per_user")
		pipe.Set(ctx, "bgs:"+strconv.Itoa(i), i, 0)
	}
	for _, k := range deleted {
		pipe.Set(ctx, k, "x", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		admitted = map[string]int{}
		failures []error
		sent     int
		half     = make(chan struct{})
		moved    = make(chan struct{})
		last     = make([]int, conns)
	)
	var wg sync.WaitGroup
	for g := range conns {
		var do func(args ...any) *redis.Cmd
		if g%2 == 0 {
			do = func(args ...any) *redis.Cmd { return rc.Do(ctx, args...) }
		} else {
			c := redis.NewClient(&redis.Options{Addr: tc.nodes[g%3].addr, PoolSize: 1, MaxRetries: -1})
			defer c.Close()
			do = func(args ...any) *redis.Cmd { return c.Do(ctx, args...) }
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Until the move is over, and at least requests times.
			for i := 0; i < most; i++ {
				if i >= requests {
					select {
					case <-moved:
						var err error
						if g%2 == 0 {
							err = do("DEL", deleted[g]).Err()
						}
						mu.Lock()
						if err != nil {
							failures = append(failures, err)
						}
						mu.Unlock()
						return
					default:
					}
				}
				k := keys[(g+i)%nkeys]
				v, err := do("RL.ALLOW", k, "day").Result()
				var werr error
				if g%2 == 0 {
					werr = do("SET", written[g], i).Err()
				}
				mu.Lock()
				if err == nil {
					err = werr
				}
				if err != nil {
					failures = append(failures, err)
				} else if allowed(v) == 1 {
					admitted[k]++
				}
				last[g] = i
				if sent++; sent == conns*requests/3 {
					close(half)
				}
				mu.Unlock()
			}
		}()
	}
	// A third of the way in, node 0 gives slots 0-2730 to node 1: the new
	// owner takes the map first (it forwards those slots to node 0 until
	// their state arrives), then node 2, then node 0, which hands them over
	// before answering.
	<-half
	n0, n1, n2 := *tc.m.Node(0), *tc.m.Node(1), *tc.m.Node(2)
	n0.Slots = []cluster.Range{{Start: 2731, End: 5460}}
	n1.Slots = []cluster.Range{{Start: 0, End: 2730}, {Start: 5461, End: 10922}}
	m2, err := cluster.NewMap(2, []cluster.Node{n0, n1, n2})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2, 0} {
		if err := pushMap(t, tc.nodes[i].client(t), m2); err != nil {
			t.Fatalf("push to node %d: %v", i, err)
		}
	}
	close(moved)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed, the first: %v", len(failures), failures[0])
	}
	for _, k := range keys {
		if n := admitted[k]; n != limit {
			t.Errorf("key %s: %d admitted, want exactly %d", k, n, limit)
		}
	}
	tc.m = m2
	for _, k := range keys {
		v, err := tc.peer(t, 1).Do(ctx, "RL.PEEK", k, "day").Slice()
		if err != nil || v[2] != int64(0) {
			t.Errorf("key %s on its new owner: %v %v; want its spent budget (0 left)", k, v, err)
		}
	}
	info, _ := tc.nodes[0].client(t).Info(ctx, "cluster").Result()
	_, pause, _ := strings.Cut(info, "rl_cluster_last_handover_pause_us:")
	t.Logf("hand-over pause: %s µs", strings.TrimSpace(strings.SplitN(pause, "\r\n", 2)[0]))
	for _, line := range strings.Split(tc.nodes[0].out.String(), "\n") {
		if strings.Contains(line, "slots handed over") {
			t.Log(line)
		}
	}
	for g := 0; g < conns; g += 2 {
		if n, err := tc.peer(t, 1).Get(ctx, written[g]).Int(); err != nil || n != last[g] {
			t.Errorf("%s on its new owner: %d %v, want the last value written, %d", written[g], n, err, last[g])
		}
		if n := tc.peer(t, 1).Exists(ctx, deleted[g]).Val(); n != 0 {
			t.Errorf("%s, deleted, exists on its new owner", deleted[g])
		}
	}
	// Every background string of the moved slots is on the new owner.
	copied := tc.peer(t, 1).Pipeline()
	var want []int
	for i := range background {
		if k := "bgs:" + strconv.Itoa(i); cluster.KeySlotString(k) <= 2730 {
			copied.Get(ctx, k)
			want = append(want, i)
		}
	}
	cmds, err := copied.Exec(ctx)
	if err != nil {
		t.Fatalf("reading the moved strings: %v", err)
	}
	for j, c := range cmds {
		if n, err := c.(*redis.StringCmd).Int(); err != nil || n != want[j] {
			t.Fatalf("bgs:%d on its new owner: %d %v", want[j], n, err)
		}
	}
}
