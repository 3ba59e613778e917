package commands_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/commands"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/testserver"
)

// Two ids: this node's, and another node's that owns the upper half of
// the slots at 127.0.0.1:7002.
var (
	selfID  = strings.Repeat("a1", 20)
	otherID = strings.Repeat("b2", 20)
)

// startClusterServer starts a server in cluster mode: with mode On and
// split, a node owning slots 0-8191 of a two-node map (no forwarding);
// with On and !split, a node waiting for a map.
func startClusterServer(t testing.TB, mode cluster.Mode, split bool, defs ...rules.Def) (*testserver.Server, *cluster.State) {
	t.Helper()
	st, err := cluster.NewState(cluster.Config{Mode: mode, SelfID: selfID})
	if err != nil {
		t.Fatal(err)
	}
	if split {
		m, err := cluster.NewMap(1, []cluster.Node{
			{ID: selfID, Host: "127.0.0.1", Port: 7001, Slots: []cluster.Range{{Start: 0, End: 8191}}},
			{ID: otherID, Host: "127.0.0.1", Port: 7002, Slots: []cluster.Range{{Start: 8192, End: cluster.Slots - 1}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Apply(m); err != nil {
			t.Fatal(err)
		}
	}
	return testserver.Start(t, testserver.Options{Rules: defs, Cluster: &commands.ClusterConfig{State: st}}), st
}

// keyIn returns a key of the form prefix:N whose slot is below 8192 (mine
// true) or not.
func keyIn(prefix string, mine bool) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s:%d", prefix, i)
		if (cluster.KeySlotString(k) < 8192) == mine {
			return k
		}
	}
}

func TestClusterRouting(t *testing.T) { testserver.Models(t, testClusterRouting) }

func testClusterRouting(t *testing.T) {
	ts, _ := startClusterServer(t, cluster.On, true, testserver.Def("r", "token_bucket", "10", "24h", ""))
	ctx := context.Background()
	c := ts.Client(t, 2)
	mine, theirs := keyIn("k", true), keyIn("k", false)
	moved := fmt.Sprintf("MOVED %d 127.0.0.1:7002", cluster.KeySlotString(theirs))
	steps := []struct {
		args []any
		want string // the reply, or the error's text
	}{
		{[]any{"SET", mine, "1"}, "OK"},
		{[]any{"SET", theirs, "1"}, moved},
		// RL.* would be forwarded, but this node has no forwarding pool.
		{[]any{"RL.ALLOW", theirs, "r"}, moved},
		{[]any{"DEL", mine, theirs}, "CROSSSLOT Keys in request don't hash to the same slot"},
		{[]any{"RL.ALLOWALL", mine, "r", theirs, "r"}, "CROSSSLOT Keys in request don't hash to the same slot"},
		{[]any{"RL.ALLOWALL", "{" + mine + "}", "r", "{" + mine + "}:x", "r", "COST", "1"}, "[1 [1 10 9 0 8640000 0] [1 10 9 0 8640000 0]]"},
		{[]any{"CLUSTER", "KEYSLOT", "{tenant:7}:user:42"}, "2624"},
		{[]any{"READONLY"}, "OK"},
		{[]any{"RL.CLUSTER", "NOPE"}, "ERR unknown subcommand 'NOPE'. Try RL.CLUSTER HELP."},
	}
	for _, s := range steps {
		got, err := c.Do(ctx, s.args...).Result()
		text := fmt.Sprint(got)
		if err != nil {
			text = err.Error()
		}
		if !strings.HasPrefix(text, s.want) {
			t.Errorf("%v: %s, want %s", s.args, text, s.want)
		}
	}
	if info, _ := c.Info(ctx, "cluster").Result(); !strings.Contains(info, "cluster_enabled:1") {
		t.Errorf("INFO cluster: %q", info)
	}
	if hello, _ := c.Do(ctx, "HELLO", "3").Result(); fmt.Sprint(hello.(map[any]any)["mode"]) != "cluster" {
		t.Errorf("HELLO: %v", hello)
	}
}

// TestClusterTransactions: a queued command for another node's slot dooms
// the transaction (EXECABORT); queued commands whose keys span slots are
// queued, and EXEC refuses them with CROSSSLOT, as Redis does.
func TestClusterTransactions(t *testing.T) { testserver.Models(t, testClusterTransactions) }

func testClusterTransactions(t *testing.T) {
	ts, _ := startClusterServer(t, cluster.On, true)
	ctx := context.Background()
	mine, mine2, theirs := keyIn("a", true), keyIn("b", true), keyIn("k", false)
	if cluster.KeySlotString(mine) == cluster.KeySlotString(mine2) {
		t.Fatal("want two slots")
	}
	conn := ts.Client(t, 2).Conn()
	defer conn.Close()
	run := func(args ...any) string {
		v, err := conn.Do(ctx, args...).Result()
		if err != nil {
			return err.Error()
		}
		return fmt.Sprint(v)
	}
	for _, s := range []struct{ args, want string }{
		{"MULTI", "OK"}, {"INCR " + mine, "QUEUED"}, {"INCR " + mine2, "QUEUED"},
		{"EXEC", "CROSSSLOT Keys in request don't hash to the same slot"},
		{"GET " + mine, "redis: nil"}, // nothing ran
		{"MULTI", "OK"}, {"INCR " + theirs, fmt.Sprintf("MOVED %d 127.0.0.1:7002", cluster.KeySlotString(theirs))},
		{"EXEC", "EXECABORT Transaction discarded because of previous errors."},
		{"MULTI", "OK"}, {"INCR " + mine, "QUEUED"}, {"INCR " + mine, "QUEUED"}, {"EXEC", "[1 2]"},
	} {
		var args []any
		for _, w := range strings.Fields(s.args) {
			args = append(args, w)
		}
		if got := run(args...); got != s.want {
			t.Errorf("%s: %s, want %s", s.args, got, s.want)
		}
	}
}

// TestClusterModes: a node waiting for a map answers CLUSTERDOWN and
// cluster_state:fail; a node with cluster mode off refuses the cluster
// commands as Redis does and reports standalone.
func TestClusterModes(t *testing.T) {
	ctx := context.Background()
	ts, _ := startClusterServer(t, cluster.On, false)
	c := ts.Client(t, 2)
	if err := c.Set(ctx, "k", 1, 0).Err(); err == nil || err.Error() != "CLUSTERDOWN The cluster is down" {
		t.Errorf("SET without a map: %v", err)
	}
	if info, _ := c.Do(ctx, "CLUSTER", "INFO").Text(); !strings.HasPrefix(info, "cluster_state:fail\r\n") {
		t.Errorf("CLUSTER INFO without a map: %q", info)
	}
	off := testserver.Start(t, testserver.Options{}).Client(t, 2)
	for _, args := range [][]any{{"CLUSTER", "SLOTS"}, {"READONLY"}, {"RL.CLUSTER", "GETCONFIG"}} {
		if err := off.Do(ctx, args...).Err(); err == nil || err.Error() != "ERR This instance has cluster support disabled" {
			t.Errorf("%v with cluster mode off: %v", args, err)
		}
	}
	if info, _ := off.Info(ctx, "cluster").Result(); !strings.Contains(info, "cluster_enabled:0") {
		t.Errorf("INFO cluster, mode off: %q", info)
	}
}

// BenchmarkClusterEndToEnd is BenchmarkEndToEnd's RL.ALLOW in cluster
// mode, on a node owning half the slots (every key owned by it): the
// slot check's cost beside standalone's.
func BenchmarkClusterEndToEnd(b *testing.B) {
	bothModels(b, func(b *testing.B) {
		keys := make([]string, 16)
		for i := range keys {
			keys[i] = keyIn(fmt.Sprintf("user%d", i), true)
		}
		allow := func(i int) []string { return []string{"RL.ALLOW", keys[i], "r"} }
		for _, n := range []int{1, 16} {
			b.Run(fmt.Sprintf("standalone/P%d", n), func(b *testing.B) {
				benchRoundTripsOn(b, startServer(b, testserver.Def("r", "token_bucket", "1000000000", "1s", "")), nil, n, allow)
			})
			b.Run(fmt.Sprintf("cluster/P%d", n), func(b *testing.B) {
				ts, _ := startClusterServer(b, cluster.On, true, testserver.Def("r", "token_bucket", "1000000000", "1s", ""))
				benchRoundTripsOn(b, ts, nil, n, allow)
			})
		}
	})
}
