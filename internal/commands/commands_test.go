package commands

import (
	"slices"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/internal/resp"
)

// redis7Commands is what redis-server 7.0.15 reports for the Redis commands
// rlserver implements: COMMAND INFO's arity, flags (only those rlserver
// models: write, readonly, admin, noscript, loading, stale, fast, no_auth,
// no_multi, movablekeys), first key, last key, key step, and COMMAND DOCS's
// group. Captured with redis-cli from a stock redis-server 7.0.15.
var redis7Commands = []struct {
	name              string
	arity             int
	flags             string
	first, last, step int
	group             string
}{
	{"get", 2, "readonly fast", 1, 1, 1, "string"},
	{"set", -3, "write", 1, 1, 1, "string"},
	{"setex", 4, "write", 1, 1, 1, "string"},
	{"psetex", 4, "write", 1, 1, 1, "string"},
	{"incr", 2, "write fast", 1, 1, 1, "string"},
	{"decr", 2, "write fast", 1, 1, 1, "string"},
	{"incrby", 3, "write fast", 1, 1, 1, "string"},
	{"decrby", 3, "write fast", 1, 1, 1, "string"},
	{"expire", -3, "write fast", 1, 1, 1, "generic"},
	{"pexpire", -3, "write fast", 1, 1, 1, "generic"},
	{"expireat", -3, "write fast", 1, 1, 1, "generic"},
	{"pexpireat", -3, "write fast", 1, 1, 1, "generic"},
	{"ttl", 2, "readonly fast", 1, 1, 1, "generic"},
	{"pttl", 2, "readonly fast", 1, 1, 1, "generic"},
	{"persist", 2, "write fast", 1, 1, 1, "generic"},
	{"type", 2, "readonly fast", 1, 1, 1, "generic"},
	{"del", -2, "write", 1, -1, 1, "generic"},
	{"unlink", -2, "write fast", 1, -1, 1, "generic"},
	{"exists", -2, "readonly fast", 1, -1, 1, "generic"},
	{"flushall", -1, "write", 0, 0, 0, "server"},
	{"flushdb", -1, "write", 0, 0, 0, "server"},
	{"multi", 1, "noscript loading stale fast", 0, 0, 0, "transactions"},
	{"exec", 1, "noscript loading stale", 0, 0, 0, "transactions"},
	{"discard", 1, "noscript loading stale fast", 0, 0, 0, "transactions"},
	{"watch", -2, "noscript loading stale fast", 1, -1, 1, "transactions"},
	{"unwatch", 1, "noscript loading stale fast", 0, 0, 0, "transactions"},
	{"auth", -2, "noscript loading stale fast no_auth", 0, 0, 0, "connection"},
	{"ping", -1, "fast", 0, 0, 0, "connection"},
	{"echo", 2, "loading stale fast", 0, 0, 0, "connection"},
	{"hello", -1, "noscript loading stale fast no_auth", 0, 0, 0, "connection"},
	{"select", 2, "loading stale fast", 0, 0, 0, "connection"},
	{"quit", -1, "noscript loading stale fast no_auth", 0, 0, 0, "connection"},
	{"client", -2, "", 0, 0, 0, "connection"},
	{"client|getname", 2, "noscript loading stale", 0, 0, 0, "connection"},
	{"client|id", 2, "noscript loading stale", 0, 0, 0, "connection"},
	{"client|info", 2, "noscript loading stale", 0, 0, 0, "connection"},
	{"client|list", -2, "admin noscript loading stale", 0, 0, 0, "connection"},
	{"client|kill", -3, "admin noscript loading stale", 0, 0, 0, "connection"},
	{"client|help", 2, "loading stale", 0, 0, 0, "connection"},
	{"client|setname", 3, "noscript loading stale", 0, 0, 0, "connection"},
	{"command", -1, "loading stale", 0, 0, 0, "server"},
	{"command|docs", -2, "loading stale", 0, 0, 0, "server"},
	{"command|list", -2, "loading stale", 0, 0, 0, "server"},
	{"command|getkeys", -4, "loading stale", 0, 0, 0, "server"},
	{"command|count", 2, "loading stale", 0, 0, 0, "server"},
	{"command|info", -2, "loading stale", 0, 0, 0, "server"},
	{"command|help", 2, "loading stale", 0, 0, 0, "server"},
	{"info", -1, "loading stale", 0, 0, 0, "server"},
	{"dbsize", 1, "readonly fast", 0, 0, 0, "server"},
	{"config", -2, "", 0, 0, 0, "server"},
	{"config|get", -3, "admin noscript loading stale", 0, 0, 0, "server"},
	{"config|help", 2, "loading stale", 0, 0, 0, "server"},
	{"save", 1, "admin noscript no_multi", 0, 0, 0, "server"},
	{"bgsave", -1, "admin noscript", 0, 0, 0, "server"},
	{"lastsave", 1, "loading stale fast", 0, 0, 0, "server"},
	{"shutdown", -1, "admin noscript loading stale no_multi", 0, 0, 0, "server"},
	{"memory", -2, "", 0, 0, 0, "server"},
	{"memory|purge", 2, "", 0, 0, 0, "server"},
	{"memory|help", 2, "loading stale", 0, 0, 0, "server"},
	{"time", 1, "loading stale fast", 0, 0, 0, "server"},
	{"cluster", -2, "", 0, 0, 0, "cluster"},
	{"cluster|slots", 2, "stale", 0, 0, 0, "cluster"},
	{"cluster|shards", 2, "stale", 0, 0, 0, "cluster"},
	{"cluster|nodes", 2, "stale", 0, 0, 0, "cluster"},
	{"cluster|info", 2, "stale", 0, 0, 0, "cluster"},
	{"cluster|myid", 2, "stale", 0, 0, 0, "cluster"},
	{"cluster|keyslot", 3, "stale", 0, 0, 0, "cluster"},
	{"cluster|countkeysinslot", 3, "stale", 0, 0, 0, "cluster"},
	{"cluster|getkeysinslot", 4, "stale", 0, 0, 0, "cluster"},
	{"cluster|help", 2, "loading stale", 0, 0, 0, "cluster"},
	{"readonly", 1, "loading stale fast", 0, 0, 0, "cluster"},
	{"readwrite", 1, "loading stale fast", 0, 0, 0, "cluster"},
	{"asking", 1, "fast", 0, 0, 0, "cluster"},
	// Scripting (cmd_script.go): skip_monitor, no_mandatory_keys and
	// allow_busy are flags rlserver does not model.
	{"eval", -3, "noscript stale movablekeys", 0, 0, 0, "scripting"},
	{"evalsha", -3, "noscript stale movablekeys", 0, 0, 0, "scripting"},
	{"eval_ro", -3, "readonly noscript stale movablekeys", 0, 0, 0, "scripting"},
	{"evalsha_ro", -3, "readonly noscript stale movablekeys", 0, 0, 0, "scripting"},
	{"script", -2, "", 0, 0, 0, "scripting"},
	{"script|load", 3, "noscript stale", 0, 0, 0, "scripting"},
	{"script|exists", -3, "noscript", 0, 0, 0, "scripting"},
	{"script|flush", -2, "noscript", 0, 0, 0, "scripting"},
	{"script|kill", 2, "noscript", 0, 0, 0, "scripting"},
	{"script|help", 2, "loading stale", 0, 0, 0, "scripting"},
	{"keys", 2, "readonly", 0, 0, 0, "generic"},
	{"scan", -2, "readonly", 0, 0, 0, "generic"},
	{"hscan", -3, "readonly", 1, 1, 1, "hash"},
	{"zscan", -3, "readonly", 1, 1, 1, "sorted-set"},
	{"setnx", 3, "write fast", 1, 1, 1, "string"},
	{"getset", 3, "write fast", 1, 1, 1, "string"},
	{"getdel", 2, "write fast", 1, 1, 1, "string"},
	{"getex", -2, "write fast", 1, 1, 1, "string"},
	{"mget", -2, "readonly fast", 1, -1, 1, "string"},
	{"mset", -3, "write", 1, -1, 2, "string"},
	{"msetnx", -3, "write", 1, -1, 2, "string"},
	{"append", 3, "write fast", 1, 1, 1, "string"},
	{"strlen", 2, "readonly fast", 1, 1, 1, "string"},
	{"incrbyfloat", 3, "write fast", 1, 1, 1, "string"},
	{"rename", 3, "write", 1, 2, 1, "generic"},
	{"renamenx", 3, "write fast", 1, 2, 1, "generic"},
	{"touch", -2, "readonly fast", 1, -1, 1, "generic"},
	{"expiretime", 2, "readonly fast", 1, 1, 1, "generic"},
	{"pexpiretime", 2, "readonly fast", 1, 1, 1, "generic"},
	{"hset", -4, "write fast", 1, 1, 1, "hash"},
	{"hmset", -4, "write fast", 1, 1, 1, "hash"},
	{"hsetnx", 4, "write fast", 1, 1, 1, "hash"},
	{"hget", 3, "readonly fast", 1, 1, 1, "hash"},
	{"hmget", -3, "readonly fast", 1, 1, 1, "hash"},
	{"hincrby", 4, "write fast", 1, 1, 1, "hash"},
	{"hincrbyfloat", 4, "write fast", 1, 1, 1, "hash"},
	{"hdel", -3, "write fast", 1, 1, 1, "hash"},
	{"hexists", 3, "readonly fast", 1, 1, 1, "hash"},
	{"hlen", 2, "readonly fast", 1, 1, 1, "hash"},
	{"hstrlen", 3, "readonly fast", 1, 1, 1, "hash"},
	{"hgetall", 2, "readonly", 1, 1, 1, "hash"},
	{"hkeys", 2, "readonly", 1, 1, 1, "hash"},
	{"hvals", 2, "readonly", 1, 1, 1, "hash"},
	{"lpush", -3, "write fast", 1, 1, 1, "list"},
	{"rpush", -3, "write fast", 1, 1, 1, "list"},
	{"lpushx", -3, "write fast", 1, 1, 1, "list"},
	{"rpushx", -3, "write fast", 1, 1, 1, "list"},
	{"lpop", -2, "write fast", 1, 1, 1, "list"},
	{"rpop", -2, "write fast", 1, 1, 1, "list"},
	{"lindex", 3, "readonly", 1, 1, 1, "list"},
	{"lrange", 4, "readonly", 1, 1, 1, "list"},
	{"ltrim", 4, "write", 1, 1, 1, "list"},
	{"llen", 2, "readonly fast", 1, 1, 1, "list"},
	{"lrem", 4, "write", 1, 1, 1, "list"},
	{"lset", 4, "write", 1, 1, 1, "list"},
	{"zadd", -4, "write fast", 1, 1, 1, "sorted-set"},
	{"zincrby", 4, "write fast", 1, 1, 1, "sorted-set"},
	{"zrem", -3, "write fast", 1, 1, 1, "sorted-set"},
	{"zscore", 3, "readonly fast", 1, 1, 1, "sorted-set"},
	{"zcard", 2, "readonly fast", 1, 1, 1, "sorted-set"},
	{"zcount", 4, "readonly fast", 1, 1, 1, "sorted-set"},
	{"zrange", -4, "readonly", 1, 1, 1, "sorted-set"},
	{"zrevrange", -4, "readonly", 1, 1, 1, "sorted-set"},
	{"zrangebyscore", -4, "readonly", 1, 1, 1, "sorted-set"},
	{"zrevrangebyscore", -4, "readonly", 1, 1, 1, "sorted-set"},
	{"zremrangebyscore", 4, "write", 1, 1, 1, "sorted-set"},
	{"zremrangebyrank", 4, "write", 1, 1, 1, "sorted-set"},
}

// rlserverFlagDifferences are the flags rlserver reports differently from
// Redis 7.0, on purpose (docs/compatibility.md says why).
var rlserverFlagDifferences = map[string]string{
	// BGSAVE messages every shard, which a transaction holding every shard
	// cannot wait for, so it is refused inside MULTI.
	"bgsave": "admin noscript no_multi",
}

// TestCommandTableMatchesRedis7 holds the table to what Redis reports for
// the same commands, so dispatch (arity, no_auth, no_multi), MULTI's queue
// checks and COMMAND answer as Redis does.
func TestCommandTableMatchesRedis7(t *testing.T) {
	redisNames := map[string]bool{}
	for _, want := range redis7Commands {
		redisNames[want.name] = true
		cmd := commands.lookupFullName([]byte(want.name))
		if cmd == nil {
			t.Errorf("%s: not in the table", want.name)
			continue
		}
		flags := want.flags
		if d, ok := rlserverFlagDifferences[want.name]; ok {
			flags = d
		}
		got := strings.Join(cmd.flags.names(), " ")
		if cmd.arity != want.arity || got != flags ||
			cmd.keys != (keyRange{want.first, want.last, want.step}) || cmd.group != want.group {
			t.Errorf("%s: arity %d, flags %q, keys %v, group %q; Redis 7.0: %d, %q, {%d %d %d}, %q",
				want.name, cmd.arity, got, cmd.keys, cmd.group, want.arity, flags, want.first, want.last, want.step, want.group)
		}
	}
	// Every Redis command of the table is compared above, but for the
	// ones Redis 7.0 does not have.
	newer := map[string]bool{"client|setinfo": true} // Redis 7.2
	for _, cmd := range commands.sorted {
		for _, c := range append([]*command{cmd}, cmd.subcommands...) {
			ours := strings.HasPrefix(c.name, "rl.") || c.name == "cl.throttle"
			if !ours && !redisNames[c.name] && !newer[c.name] {
				t.Errorf("%s: not compared with Redis; add what Redis 7.0 reports for it", c.name)
			}
		}
	}
}

// TestCommandTableInvariants checks what the table's entries promise each
// other and dispatch.
func TestCommandTableInvariants(t *testing.T) {
	groups := []string{groupRatelimit, groupString, groupHash, groupList, groupSortedSet, groupGeneric, groupTransactions, groupScripting,
		groupConnection, groupServer, groupModule, groupCluster}
	txControl := []string{"multi", "exec", "discard", "watch", "quit"}
	noAuth := []string{"auth", "hello", "quit"}
	for _, top := range commands.sorted {
		for _, cmd := range append([]*command{top}, top.subcommands...) {
			if !slices.Contains(groups, cmd.group) {
				t.Errorf("%s: group %q", cmd.name, cmd.group)
			}
			if cmd.flags&flagWrite != 0 && cmd.flags&flagReadonly != 0 {
				t.Errorf("%s: both write and readonly", cmd.name)
			}
			if cmd.keys.first != 0 && cmd.flags&(flagWrite|flagReadonly) == 0 && cmd.name != "watch" {
				t.Errorf("%s: takes keys but is neither write nor readonly", cmd.name)
			}
			if got := cmd.flags&flagTxControl != 0; got != slices.Contains(txControl, cmd.name) {
				t.Errorf("%s: tx-control %v", cmd.name, got)
			}
			if got := cmd.flags&flagNoAuth != 0; got != slices.Contains(noAuth, cmd.name) {
				t.Errorf("%s: no-auth %v", cmd.name, got)
			}
			if cmd.flags&flagTxControl != 0 && cmd.flags&flagNoMulti != 0 {
				t.Errorf("%s: tx-control commands run inside MULTI, no-multi ones are refused there", cmd.name)
			}
			if top.subByName != nil && cmd != top && cmd.index != top.index {
				t.Errorf("%s: index %d, its container's is %d", cmd.name, cmd.index, top.index)
			}
		}
	}
	// Every command that messages the shards itself is no-multi: inside
	// EXEC the transaction holds every shard and would wait forever.
	for _, name := range []string{"save", "bgsave", "shutdown", "rl.rule|reload"} {
		if commands.lookupFullName([]byte(name)).flags&flagNoMulti == 0 {
			t.Errorf("%s: not no-multi", name)
		}
	}
}

// TestAdmitDoesNotAllocate: dispatch's checks stay off the heap for the
// commands that pass them, subcommands included.
func TestAdmitDoesNotAllocate(t *testing.T) {
	for _, args := range [][][]byte{
		{[]byte("RL.ALLOW"), []byte("user:1"), []byte("api")},
		{[]byte("client"), []byte("ID")},
		{[]byte("GET"), []byte("k")},
	} {
		if n := testing.AllocsPerRun(100, func() {
			if _, err := commands.admit(args, true, false); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("admit %s: %v allocations", args[0], n)
		}
	}
}

// TestArgOverheadBound: the largest command the default --max-args allows
// costs at most 64 MiB of bookkeeping.
func TestArgOverheadBound(t *testing.T) {
	if cost := resp.DefaultLimits.MaxArgs * int64(argOverhead); cost > 64<<20 {
		t.Fatalf("--max-args %d × %d bytes = %d bytes", resp.DefaultLimits.MaxArgs, argOverhead, cost)
	}
}
