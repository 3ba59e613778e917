package cluster

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rlserver/rlserver/internal/cluster/forward"
	"github.com/rlserver/rlserver/internal/cluster/internal/fakenode"
)

// A fake rlserver cluster for the client tests: nodes that are tiny RESP
// servers answering the cluster commands with this package's builders and
// routing keyed commands with State.Route, as the server will once the
// package is wired in. Each node keeps its keys in a map, so a test can
// see where every key landed.

// fakeCommand is a command the fake nodes know, as COMMAND reports it
// (go-redis and redis-py route by these key positions).
type fakeCommand struct {
	name              string
	arity             int
	flags             []string
	first, last, step int
	// clientRouted: stock cluster clients route it by its key; the
	// rlserver-only commands are not (ioredis sends them anywhere), so a
	// node forwards those.
	clientRouted bool
}

var fakeCommands = []fakeCommand{
	{"get", 2, []string{"readonly", "fast"}, 1, 1, 1, true},
	{"set", -3, []string{"write", "denyoom"}, 1, 1, 1, true},
	{"incr", 2, []string{"write", "denyoom", "fast"}, 1, 1, 1, true},
	{"incrby", 3, []string{"write", "denyoom", "fast"}, 1, 1, 1, true},
	{"expire", -3, []string{"write", "fast"}, 1, 1, 1, true},
	{"mget", -2, []string{"readonly", "fast"}, 1, -1, 1, true},
	{"del", -2, []string{"write"}, 1, -1, 1, true},
	{"rl.allow", -3, []string{"write", "fast"}, 1, 1, 1, false},
	{"cl.throttle", -1, []string{"write"}, 1, 1, 1, false},
}

type fakeCluster struct {
	nodes []*fakeNode
	pool  *forward.Pool
}

type fakeNode struct {
	srv   *fakenode.Server
	state *State
	mu    sync.Mutex
	keys  map[string]string
	// forwarded counts commands this node relayed to another.
	forwarded int
}

// startFakeCluster starts n nodes and gives each the even map of them, at
// version 1. With n == 0 it starts one node in Emulated mode.
func startFakeCluster(t *testing.T, n int) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{pool: forward.New(forward.Options{Init: [][]string{forward.PeerCommand}})}
	t.Cleanup(func() { fc.pool.Close() })
	mode, count := On, n
	if n == 0 {
		mode, count = Emulated, 1
	}
	var nodes []Node
	for i := range count {
		st, err := NewState(Config{Mode: mode, SelfID: testID(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		fn := &fakeNode{state: st, keys: map[string]string{}}
		fn.srv = fakenode.Start(t, func(c *fakenode.Conn, args [][]byte) []byte { return fc.handle(fn, c, args) }, nil)
		fc.nodes = append(fc.nodes, fn)
		_, port, _ := strings.Cut(fn.srv.Addr, ":")
		p, _ := strconv.Atoi(port)
		nodes = append(nodes, Node{ID: testID(i + 1), Host: "127.0.0.1", Port: p})
	}
	if mode == On {
		m, err := EvenMap(1, nodes)
		if err != nil {
			t.Fatal(err)
		}
		fc.push(t, m)
	}
	return fc
}

// push gives every node m.
func (fc *fakeCluster) push(t *testing.T, m *Map) {
	t.Helper()
	for _, n := range fc.nodes {
		if _, err := n.state.Apply(m); err != nil {
			t.Fatal(err)
		}
	}
}

// owner returns the node that holds key, checking that no other does.
func (fc *fakeCluster) owner(t *testing.T, key string) int {
	t.Helper()
	found := -1
	for i, n := range fc.nodes {
		n.mu.Lock()
		_, ok := n.keys[key]
		n.mu.Unlock()
		if ok {
			if found >= 0 {
				t.Errorf("key %q is on nodes %d and %d", key, found, i)
			}
			found = i
		}
	}
	return found
}

func (fc *fakeCluster) handle(n *fakeNode, c *fakenode.Conn, args [][]byte) []byte {
	if len(args) == 0 {
		return fakenode.Err("ERR empty command")
	}
	name := strings.ToLower(string(args[0]))
	v := n.state.View()
	cc := Conn{Proto: c.Proto, LocalAddr: c.Local}
	switch name {
	case "hello":
		if len(args) > 1 {
			p, _ := strconv.Atoi(string(args[1]))
			c.Proto = p
		}
		w := writer{proto: c.Proto}
		w.mapHeader(7)
		for _, kv := range [][2]string{{"server", "redis"}, {"version", "7.0.15"}} {
			w.bulk(kv[0])
			w.bulk(kv[1])
		}
		w.bulk("proto")
		w.integer(c.Proto)
		w.bulk("id")
		w.integer(1)
		w.bulk("mode")
		w.bulk(v.Mode().RedisMode())
		w.bulk("role")
		w.bulk("master")
		w.bulk("modules")
		w.array(0)
		return w.b
	case "ping":
		return fakenode.Simple("PONG")
	case "quit":
		c.Close()
		return fakenode.Simple("OK")
	case "client", "readonly", "readwrite", "asking", "select":
		return fakenode.Simple("OK")
	case "info":
		var b strings.Builder
		b.WriteString("# Server\r\nredis_version:7.0.15\r\nredis_mode:" + v.Mode().RedisMode() + "\r\n\r\n")
		b.WriteString("# Persistence\r\nloading:0\r\n\r\n# Cluster\r\n")
		WriteInfoSection(&b, v.Mode())
		w := writer{proto: c.Proto}
		w.verbatim([]byte(b.String()))
		return w.b
	case "command":
		return commandReply(c.Proto)
	case "cluster":
		return fc.clusterCommand(n, v, cc, args)
	case "rl.cluster":
		if len(args) == 2 && strings.EqualFold(string(args[1]), "peer") {
			c.Values["peer"] = "1"
			return fakenode.Simple("OK")
		}
		return fakenode.Err("ERR unknown subcommand")
	}
	return fc.keyed(n, c, name, args)
}

func (fc *fakeCluster) clusterCommand(n *fakeNode, v *View, cc Conn, args [][]byte) []byte {
	if len(args) < 2 {
		return fakenode.Err("ERR wrong number of arguments for 'cluster' command")
	}
	switch strings.ToLower(string(args[1])) {
	case "slots":
		return v.AppendSlots(nil, cc)
	case "shards":
		return v.AppendShards(nil, cc)
	case "nodes":
		return v.AppendNodes(nil, cc)
	case "info":
		return v.AppendInfo(nil, cc, RulesInfo{Version: 1})
	case "myid":
		return v.AppendMyID(nil, cc)
	case "keyslot":
		return AppendKeySlot(nil, args[2])
	case "countkeysinslot":
		out, err := AppendCountKeysInSlot(nil, args[2], func(slot uint16) int {
			n.mu.Lock()
			defer n.mu.Unlock()
			c := 0
			for k := range n.keys {
				if KeySlotString(k) == slot {
					c++
				}
			}
			return c
		})
		if err != nil {
			return fakenode.Err("ERR " + err.Error())
		}
		return out
	}
	return fakenode.Err("ERR unknown subcommand '" + string(args[1]) + "'. Try CLUSTER HELP.")
}

// keyed checks a keyed command's slot, then runs it here, redirects it or
// forwards it: the dispatch the server will do.
func (fc *fakeCluster) keyed(n *fakeNode, c *fakenode.Conn, name string, args [][]byte) []byte {
	var spec *fakeCommand
	for i := range fakeCommands {
		if fakeCommands[i].name == name {
			spec = &fakeCommands[i]
		}
	}
	if spec == nil {
		return fakenode.Err("ERR unknown command '" + string(args[0]) + "'")
	}
	slot, ok, err := KeysSlot(args, spec.first, spec.last, spec.step)
	if err != nil {
		text, _ := ReplyText(err)
		return fakenode.Err(text)
	}
	if !ok {
		return fakenode.Err("ERR wrong number of arguments for '" + name + "' command")
	}
	forwardOK := !spec.clientRouted && c.Values["peer"] == ""
	r := n.state.View().Route(slot, forwardOK)
	switch r.Action {
	case Down:
		text, _ := ReplyText(r.Err)
		return fakenode.Err(text)
	case Moved:
		return r.AppendMoved(nil, c.TLS)
	case Forward:
		n.mu.Lock()
		n.forwarded++
		n.mu.Unlock()
		out, err := fc.pool.Do(context.Background(), r.Owner.PeerAddr(false), c.Proto, args, nil)
		if err != nil {
			text, _ := ReplyText(&OwnerUnreachableError{Slot: slot, Addr: r.Owner.PeerAddr(false),
				Sent: errors.Is(err, forward.ErrNoReply)})
			return fakenode.Err(text)
		}
		return out
	}
	return n.run(name, args)
}

// run executes a command on this node's keys.
func (n *fakeNode) run(name string, args [][]byte) []byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch name {
	case "get":
		v, ok := n.keys[string(args[1])]
		if !ok {
			return fakenode.Null
		}
		return fakenode.Bulk(v)
	case "set":
		n.keys[string(args[1])] = string(args[2])
		return fakenode.Simple("OK")
	case "incr", "incrby", "rl.allow", "cl.throttle":
		c, _ := strconv.Atoi(n.keys[string(args[1])])
		if by := 1; name == "incrby" {
			by, _ = strconv.Atoi(string(args[2]))
			c += by
		} else {
			c += by
		}
		n.keys[string(args[1])] = strconv.Itoa(c)
		return fakenode.Int(c)
	case "expire":
		if _, ok := n.keys[string(args[1])]; ok {
			return fakenode.Int(1)
		}
		return fakenode.Int(0)
	case "mget":
		var items [][]byte
		for _, k := range args[1:] {
			if v, ok := n.keys[string(k)]; ok {
				items = append(items, fakenode.Bulk(v))
			} else {
				items = append(items, fakenode.Null)
			}
		}
		return fakenode.Array(items...)
	case "del":
		d := 0
		for _, k := range args[1:] {
			if _, ok := n.keys[string(k)]; ok {
				delete(n.keys, string(k))
				d++
			}
		}
		return fakenode.Int(d)
	}
	return fakenode.Err("ERR not implemented")
}

// commandReply is COMMAND's reply for fakeCommands: 10-element entries, as
// Redis 7 sends them (go-redis refuses other lengths than 6, 7 and 10).
func commandReply(proto int) []byte {
	w := writer{proto: proto}
	set := func(n int) {
		if proto == 3 {
			w.header('~', n)
		} else {
			w.array(n)
		}
	}
	w.array(len(fakeCommands))
	for _, c := range fakeCommands {
		w.array(10)
		w.bulk(c.name)
		w.integer(c.arity)
		set(len(c.flags))
		for _, f := range c.flags {
			w.b = append(w.b, '+')
			w.b = append(w.b, f...)
			w.b = append(w.b, '\r', '\n')
		}
		w.integer(c.first)
		w.integer(c.last)
		w.integer(c.step)
		set(0)     // ACL categories
		w.array(0) // tips
		w.array(0) // key specs
		w.array(0) // subcommands
	}
	return w.b
}
