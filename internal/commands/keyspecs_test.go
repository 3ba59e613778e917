package commands

import (
	"strings"
	"testing"
)

// redis7KeySpecs is the flags of each key specification redis-server
// 7.0.15 reports in COMMAND INFO for the keyed commands rlserver
// implements, specifications separated by " | ". Captured with redis-py
// from a stock redis-server 7.0.15.
var redis7KeySpecs = map[string]string{
	"get":              "RO access",
	"set":              "RW access update",
	"setex":            "OW update",
	"psetex":           "OW update",
	"incr":             "RW access update",
	"decr":             "RW access update",
	"incrby":           "RW access update",
	"decrby":           "RW access update",
	"expire":           "RW update",
	"pexpire":          "RW update",
	"expireat":         "RW update",
	"pexpireat":        "RW update",
	"ttl":              "RO access",
	"pttl":             "RO access",
	"persist":          "RW update",
	"type":             "RO",
	"del":              "RM delete",
	"unlink":           "RM delete",
	"exists":           "RO",
	"watch":            "RO",
	"setnx":            "OW insert",
	"getset":           "RW access update",
	"getdel":           "RW access delete",
	"getex":            "RW access update",
	"mget":             "RO access",
	"mset":             "OW update",
	"msetnx":           "OW insert",
	"append":           "RW insert",
	"strlen":           "RO",
	"incrbyfloat":      "RW access update",
	"rename":           "RW access delete | OW update",
	"renamenx":         "RW access delete | OW insert",
	"touch":            "RO",
	"expiretime":       "RO access",
	"pexpiretime":      "RO access",
	"hset":             "RW update",
	"hmset":            "RW update",
	"hsetnx":           "RW insert",
	"hget":             "RO access",
	"hmget":            "RO access",
	"hincrby":          "RW access update",
	"hincrbyfloat":     "RW access update",
	"hdel":             "RW delete",
	"hexists":          "RO",
	"hlen":             "RO",
	"hstrlen":          "RO",
	"hgetall":          "RO access",
	"hscan":            "RO access",
	"zscan":            "RO access",
	"hkeys":            "RO access",
	"hvals":            "RO access",
	"lpush":            "RW insert",
	"rpush":            "RW insert",
	"lpushx":           "RW insert",
	"rpushx":           "RW insert",
	"lpop":             "RW access delete",
	"rpop":             "RW access delete",
	"lindex":           "RO access",
	"lrange":           "RO access",
	"ltrim":            "RW delete",
	"llen":             "RO",
	"lrem":             "RW delete",
	"lset":             "RW update",
	"zadd":             "RW update",
	"zincrby":          "RW access update",
	"zrem":             "RW delete",
	"zscore":           "RO access",
	"zcard":            "RO",
	"zcount":           "RO access",
	"zrange":           "RO access",
	"zrevrange":        "RO access",
	"zrangebyscore":    "RO access",
	"zrevrangebyscore": "RO access",
	"zremrangebyscore": "RW delete",
	"zremrangebyrank":  "RW delete",
}

// TestKeySpecsMatchRedis7: COMMAND INFO's key specifications say what Redis
// 7.0 says for the same command (SET's variable_flags aside: rlserver's
// flags do not vary), and every keyed Redis command is compared.
func TestKeySpecsMatchRedis7(t *testing.T) {
	for _, top := range commands.sorted {
		for _, cmd := range append([]*command{top}, top.subcommands...) {
			if cmd.keys.first == 0 || strings.HasPrefix(cmd.name, "rl.") || cmd.name == "cl.throttle" {
				continue
			}
			want, ok := redis7KeySpecs[cmd.name]
			if !ok {
				t.Errorf("%s: key specifications not compared with Redis's", cmd.name)
				continue
			}
			specs := cmd.keySpecs
			if len(specs) == 0 {
				specs = []keySpec{{cmd.keys, cmd.keyFlags}}
			}
			var got []string
			for _, s := range specs {
				got = append(got, strings.Join(s.flags, " "))
			}
			if g := strings.Join(got, " | "); !strings.EqualFold(g, want) {
				t.Errorf("%s: key specifications %q, Redis 7.0 %q", cmd.name, g, want)
			}
		}
	}
}
