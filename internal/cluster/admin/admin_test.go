package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/cluster/internal/fakenode"
)

// fakeNode stands for an rlserver node with --cluster on: CLUSTER MYID,
// RL.CLUSTER GETCONFIG and SETCONFIG over a real cluster.State, RL.INFO
// with a rule set version and digest, and AUTH when it has a password.
type fakeNode struct {
	srv      *fakenode.Server
	state    *cluster.State
	password string
	mu       sync.Mutex
	rulesVer string
	digest   string
	setCalls int
}

func startNode(t *testing.T, n int, password string) *fakeNode {
	t.Helper()
	st, err := cluster.NewState(cluster.Config{Mode: cluster.On, SelfID: fmt.Sprintf("%040x", n)})
	if err != nil {
		t.Fatal(err)
	}
	fn := &fakeNode{state: st, password: password, rulesVer: "3", digest: "9c1e0a7f3b2d4e5f"}
	fn.srv = fakenode.Start(t, fn.handle, nil)
	return fn
}

func (n *fakeNode) handle(c *fakenode.Conn, args [][]byte) []byte {
	cmd := strings.ToUpper(string(args[0]))
	if len(args) > 1 {
		cmd += " " + strings.ToUpper(string(args[1]))
	}
	switch {
	case strings.HasPrefix(cmd, "HELLO"):
		if len(args) >= 5 && strings.EqualFold(string(args[2]), "AUTH") {
			if string(args[4]) != n.password {
				return fakenode.Err("WRONGPASS invalid username-password pair or user is disabled.")
			}
			c.Values["authed"] = "1"
		}
		return fakenode.Array(fakenode.Bulk("server"), fakenode.Bulk("rlserver"), fakenode.Bulk("proto"), fakenode.Int(2))
	case strings.HasPrefix(cmd, "AUTH"):
		if string(args[len(args)-1]) != n.password {
			return fakenode.Err("WRONGPASS invalid username-password pair or user is disabled.")
		}
		c.Values["authed"] = "1"
		return fakenode.Simple("OK")
	}
	if n.password != "" && c.Values["authed"] == "" {
		return fakenode.Err("NOAUTH Authentication required.")
	}
	v := n.state.View()
	switch cmd {
	case "CLUSTER MYID":
		return v.AppendMyID(nil, cluster.Conn{Proto: 2})
	case "RL.CLUSTER GETCONFIG":
		if js := v.ConfigJSON(); js != nil {
			return fakenode.Bulk(string(js))
		}
		return fakenode.Null
	case "RL.CLUSTER SETCONFIG":
		n.mu.Lock()
		n.setCalls++
		n.mu.Unlock()
		if _, err := n.state.SetConfig(args[2]); err != nil {
			return fakenode.Err("ERR " + err.Error())
		}
		return fakenode.Simple("OK")
	case "RL.INFO":
		n.mu.Lock()
		defer n.mu.Unlock()
		info := "# Ratelimit\r\nrl_keys:0\r\nrl_rules_version:" + n.rulesVer + "\r\n"
		if n.digest != "" {
			info += "rl_rules_digest:" + n.digest + "\r\n"
		}
		return fakenode.Bulk(info)
	}
	return fakenode.Err("ERR unknown command '" + string(args[0]) + "'")
}

func startNodes(t *testing.T, count int, password string) ([]*fakeNode, []string) {
	var nodes []*fakeNode
	var addrs []string
	for i := range count {
		n := startNode(t, i+1, password)
		nodes = append(nodes, n)
		addrs = append(addrs, n.srv.Addr)
	}
	return nodes, addrs
}

// portsAsNames replaces each node's address in s by n1, n2... so that
// outputs compare across runs.
func portsAsNames(s string, addrs []string) string {
	for i, a := range addrs {
		s = strings.ReplaceAll(s, a, "n"+strconv.Itoa(i+1))
	}
	return s
}

func TestCreate(t *testing.T) {
	nodes, addrs := startNodes(t, 3, "pw")
	var out bytes.Buffer
	if err := Create(context.Background(), addrs, &out, Options{Password: "pw"}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := `>>> Assigning 16384 slots to 3 nodes, map version 1:
  0000000000000000000000000000000000000001 n1 slots 0-5460 (5461)
  0000000000000000000000000000000000000002 n2 slots 5461-10922 (5462)
  0000000000000000000000000000000000000003 n3 slots 10923-16383 (5461)
[OK] n1 took map version 1
[OK] n2 took map version 1
[OK] n3 took map version 1
[OK] All 16384 slots covered; 3 nodes hold map version 1.
`
	if got := portsAsNames(out.String(), addrs); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
	first := nodes[0].state.View().Map()
	for i, n := range nodes {
		m := n.state.View().Map()
		if m == nil || !m.Equal(first) || m.Version() != 1 {
			t.Fatalf("node %d holds %v", i, m)
		}
		if self := m.Node(i); self.ClientAddr(false) != addrs[i] || self.ID != n.state.View().SelfID() {
			t.Errorf("node %d is announced as %s %s", i, self.ID, self.ClientAddr(false))
		}
	}

	// Creating the same cluster again (in any order) succeeds and pushes
	// nothing, as an init job that runs twice needs; creating another over
	// it is refused.
	out.Reset()
	if err := Create(context.Background(), []string{addrs[2], addrs[0], addrs[1]}, &out, Options{Password: "pw"}); err != nil ||
		out.String() != "[OK] The nodes already form this cluster (map version 1); nothing pushed.\n" {
		t.Fatalf("same create again: %v\n%s", err, out.String())
	}
	for _, n := range nodes {
		if n.setCalls != 1 {
			t.Errorf("a node was pushed %d maps", n.setCalls)
		}
	}
	err := Create(context.Background(), addrs[:2], &out, Options{Password: "pw"})
	if err == nil || !strings.Contains(err.Error(), "already holds map version 1 of 3 nodes") ||
		!strings.Contains(err.Error(), "nothing was pushed") {
		t.Fatalf("another create: %v", err)
	}
	// With --force, over two of the nodes: version 2, above what they hold.
	out.Reset()
	if err := Create(context.Background(), append([]string{"--force"}, addrs[:2]...), &out, Options{Password: "pw"}); err != nil {
		t.Fatalf("--force: %v\n%s", err, out.String())
	}
	if v := nodes[0].state.View().Version(); v != 2 || nodes[0].state.View().Map().Len() != 2 {
		t.Errorf("after --force node 1 holds version %d", v)
	}
}

func TestCreateRefusesBeforePushing(t *testing.T) {
	nodes, addrs := startNodes(t, 2, "")
	down := startNode(t, 9, "")
	down.srv.Close()
	var out bytes.Buffer
	err := Create(context.Background(), append(addrs, down.srv.Addr), &out, Options{})
	if err == nil || !strings.Contains(err.Error(), "nothing was pushed") || !strings.Contains(err.Error(), down.srv.Addr) {
		t.Fatalf("%v", err)
	}
	for _, n := range nodes {
		if n.setCalls != 0 {
			t.Error("a node was pushed a map although another did not answer")
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "no node addresses given"},
		{[]string{"--force"}, "no node addresses given"},
		{[]string{"localhost"}, "is not host:port"},
		{[]string{"0.0.0.0:6380"}, "unspecified"},
		{[]string{addrs[0], addrs[0]}, "given twice"},
	} {
		if err := Create(context.Background(), tt.args, &out, Options{}); err == nil || !strings.Contains(err.Error(), tt.want) ||
			!strings.Contains(err.Error(), "usage: "+CreateUsage) {
			t.Errorf("Create(%q): %v, want %q and the usage", tt.args, err, tt.want)
		}
	}
	// Wrong password: refused before pushing.
	pw, pwAddrs := startNodes(t, 1, "right")
	if err := Create(context.Background(), pwAddrs, &out, Options{Password: "wrong"}); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("wrong password: %v", err)
	}
	if pw[0].setCalls != 0 {
		t.Error("pushed with a wrong password")
	}
}

// TestCreateSameNodeTwice: two addresses reaching one node give one id
// twice, which the map refuses.
func TestCreateSameNodeTwice(t *testing.T) {
	_, addrs := startNodes(t, 1, "")
	alias := strings.Replace(addrs[0], "127.0.0.1", "localhost", 1)
	err := Create(context.Background(), []string{addrs[0], alias}, &bytes.Buffer{}, Options{})
	if err == nil || !strings.Contains(err.Error(), "have the same id") {
		t.Errorf("%v", err)
	}
}

func TestCheck(t *testing.T) {
	nodes, addrs := startNodes(t, 3, "")
	if err := Create(context.Background(), addrs, &bytes.Buffer{}, Options{}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	// One seed is enough: the map names the others.
	if err := Check(context.Background(), addrs[1:2], &out, Options{}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := `n2 0000000000000000000000000000000000000002 map v1 rules v3 digest 9c1e0a7f3b2d4e5f
n1 0000000000000000000000000000000000000001 map v1 rules v3 digest 9c1e0a7f3b2d4e5f
n3 0000000000000000000000000000000000000003 map v1 rules v3 digest 9c1e0a7f3b2d4e5f
[OK] All 3 nodes answered.
Map version 1:
  0000000000000000000000000000000000000001 n1 slots 0-5460 (5461)
  0000000000000000000000000000000000000002 n2 slots 5461-10922 (5462)
  0000000000000000000000000000000000000003 n3 slots 10923-16383 (5461)
[OK] Every node that answered holds map version 1; all 16384 slots covered.
[OK] Every node that answered applies the same rules (digest 9c1e0a7f3b2d4e5f).
`
	if got := portsAsNames(out.String(), addrs); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}

	// Node 3 gets a newer map (moving a slot), node 2 other rules.
	m := nodes[0].state.View().Map()
	ns := []cluster.Node{*m.Node(0), *m.Node(1), *m.Node(2)}
	ns[0].Slots = []cluster.Range{{Start: 0, End: 5459}}
	ns[1].Slots = []cluster.Range{{Start: 5460, End: 10922}}
	newer, err := cluster.NewMap(2, ns)
	if err != nil {
		t.Fatal(err)
	}
	nodes[2].state.Apply(newer)
	nodes[1].mu.Lock()
	nodes[1].rulesVer, nodes[1].digest = "4", "0123456789abcdef"
	nodes[1].mu.Unlock()
	out.Reset()
	err = Check(context.Background(), addrs[:1], &out, Options{})
	got := portsAsNames(out.String(), addrs)
	if !errors.Is(err, ErrFailed) {
		t.Errorf("check of a split cluster: %v", err)
	}
	for _, line := range []string{
		"[ERR] Nodes hold different maps: version 2 on n3; version 1 on n1, n2. Push the newest to every node.",
		"Map version 2:",
		"  0000000000000000000000000000000000000002 n2 slots 5460-10922 (5463)",
		"[ERR] Rules differ: digest 0123456789abcdef on n2; digest 9c1e0a7f3b2d4e5f on n1, n3.",
	} {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("missing %q in:\n%s", line, got)
		}
	}

	// A node stops; one reports no digest.
	nodes[2].srv.Close()
	nodes[1].mu.Lock()
	nodes[1].digest = ""
	nodes[1].mu.Unlock()
	out.Reset()
	err = Check(context.Background(), addrs[:1], &out, Options{})
	got = portsAsNames(out.String(), addrs)
	if !errors.Is(err, ErrFailed) {
		t.Errorf("check with a node down: %v", err)
	}
	for _, re := range []string{
		`(?m)^n3: unreachable: .+$`,
		`(?m)^\[ERR\] 1 of 3 nodes did not answer: n3$`,
		`(?m)^\[WARN\] Some nodes report no rl_rules_digest; comparing rl_rules_version only\.$`,
		`(?m)^\[ERR\] Rules differ: version 3 on n1; version 4 on n2\.$`,
	} {
		if !regexp.MustCompile(re).MatchString(got) {
			t.Errorf("no line matching %s in:\n%s", re, got)
		}
	}
}

func TestCheckWrongIDAndNoMap(t *testing.T) {
	nodes, addrs := startNodes(t, 2, "")
	var out bytes.Buffer
	if err := Check(context.Background(), addrs[:1], &out, Options{}); !errors.Is(err, ErrFailed) ||
		!strings.Contains(out.String(), "[ERR] No node holds a map") {
		t.Errorf("%v\n%s", err, out.String())
	}
	// A map that puts node 2's id at node 1's address.
	m, err := cluster.EvenMap(1, []cluster.Node{
		{ID: fmt.Sprintf("%040x", 2), Host: "127.0.0.1", Port: port(addrs[0])},
		{ID: fmt.Sprintf("%040x", 1), Host: "127.0.0.1", Port: port(addrs[1])},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		n.state.Apply(m)
	}
	out.Reset()
	err = Check(context.Background(), addrs[:1], &out, Options{})
	want := fmt.Sprintf("[ERR] %s is node %040x, but the map puts node %040x there.", addrs[0], 1, 2)
	if !errors.Is(err, ErrFailed) || !strings.Contains(out.String(), want) {
		t.Errorf("%v\n%s", err, out.String())
	}
}

func port(addr string) int {
	_, p, _ := strings.Cut(addr, ":")
	n, _ := strconv.Atoi(p)
	return n
}
