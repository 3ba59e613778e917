package commands_test

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testserver"
)

// TestDifferentialRedisTypes is TestDifferentialRedis for the string
// commands beyond SET and INCR, the generic commands over every type, and
// the hash, list and sorted-set commands: the same commands to a real
// redis-server 7 and to rlserver, replies compared byte for byte (TTLs
// within the tolerance sameReply allows). Skipped when no redis-server 7
// is installed.
func TestDifferentialRedisTypes(t *testing.T) { testserver.Models(t, testDifferentialRedisTypes) }

func testDifferentialRedisTypes(t *testing.T) {
	redisConn := startRedis(t)
	ts := startServer(t)
	rl := testserver.DialRaw(t, ts.Addr)
	rds := []*bufio.Reader{bufio.NewReader(redisConn), bufio.NewReader(rl)}
	diffs := 0
	for _, line := range typesScript() {
		words, err := testserver.SplitWords(line)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		ts.Clock.Set(time.Now().UnixNano())
		var replies [2][]string
		for i, conn := range []net.Conn{redisConn, rl} {
			conn.Write(testserver.EncodeCommand(words))
			r, err := testserver.ReadReply(rds[i])
			if err != nil {
				t.Fatalf("%q: %v", words, err)
			}
			replies[i] = r
		}
		if !sameReply(words, replies[0], replies[1]) {
			t.Errorf("%s\n redis:    %q\n rlserver: %q", strings.Join(words, " "), replies[0], replies[1])
			if diffs++; diffs == 30 {
				t.Fatal("too many differences")
			}
		}
	}
}

// typesScript returns the commands TestDifferentialRedisTypes sends: every
// command on a missing key, on its own type and on another type (for
// WRONGTYPE), with edge arguments and option combinations.
func typesScript() []string {
	var script []string
	add := func(lines ...string) { script = append(script, lines...) }
	add("FLUSHALL")
	// Values of every type, to aim each command at.
	setup := []string{"DEL s h l z", "SET s 10", "HSET h f 1", "RPUSH l a", "ZADD z 1 m"}
	onEvery := func(cmds ...string) {
		for _, c := range cmds {
			add(setup...)
			for _, k := range []string{"s", "h", "l", "z", "missing"} {
				add(strings.ReplaceAll(c, "$k", k), "TYPE "+k)
			}
		}
	}
	onEvery("GET $k", "SETNX $k v", "GETSET $k v", "GETDEL $k", "GETEX $k", "GETEX $k PERSIST", "GETEX $k EX 100",
		"APPEND $k xy", "STRLEN $k", "INCRBYFLOAT $k 1.5", "INCR $k", "SET $k v GET", "SET $k v", "MGET $k s x",
		"TYPE $k", "EXISTS $k $k", "TOUCH $k x", "DEL $k", "EXPIRE $k 100", "TTL $k", "PERSIST $k",
		"EXPIREAT $k 4102444800", "EXPIRETIME $k", "PEXPIRETIME $k", "RENAME $k r", "RENAMENX $k s",
		"HGET $k f", "HSET $k f 2", "LPUSH $k x", "LLEN $k", "ZADD $k 2 n", "ZCARD $k", "ZSCORE $k m",
		"HGETALL $k", "LRANGE $k 0 -1", "ZRANGE $k 0 -1 WITHSCORES")

	// Strings.
	add("SETNX n 1", "SETNX n 2", "GET n", "SETNX", "SETNX a b c",
		"SET t v EX 100", "GETSET t w", "TTL t", "GETSET t", "GETDEL t", "GETDEL t", "GETDEL",
		"SET g v", "GETEX g", "GETEX g EX 100", "TTL g", "GETEX g PX 200000", "PTTL g", "GETEX g EXAT 4102444800",
		"EXPIRETIME g", "GETEX g PXAT 4102444800000", "PEXPIRETIME g", "GETEX g PERSIST", "TTL g",
		"GETEX g EX 0", "GETEX g EX -1", "GETEX g EX x", "GETEX g EX", "GETEX g PERSIST EX 10", "GETEX g EX 10 PERSIST",
		"GETEX g EX 10 PX 10", "GETEX g EX 10 EX 20", "TTL g", "GETEX g FOO", "GETEX g EXAT 1", "EXISTS g",
		"GETEX missing EX 0", "GETEX missing FOO",
		"MSET a 1 b 2 c 3", "MGET a b c d", "MSET a", "MSET a 1 b", "MSETNX a 1 x 2", "MGET x", "MSETNX x 1 y 2",
		"MGET x y", "SET e v EX 100", "MSET e w", "TTL e", "MSET a 1 a 2", "GET a",
		"APPEND ap hello", "APPEND ap \" world\"", "GET ap", "STRLEN ap", "STRLEN nope", "APPEND ap \"\"",
		"SET ie 7 EX 100", "APPEND ie 8", "TTL ie", "GET ie",
		"SET f 10.5", "INCRBYFLOAT f 0.1", "INCRBYFLOAT f -5", "INCRBYFLOAT f 5.0e3", "INCRBYFLOAT f 1e400",
		"INCRBYFLOAT f inf", "INCRBYFLOAT f nan", "INCRBYFLOAT f abc", "INCRBYFLOAT f \" 1\"", "INCRBYFLOAT nf 3",
		"INCRBYFLOAT nf 0x10", "SET f abc", "INCRBYFLOAT f 1", "SET f 1", "INCRBYFLOAT f 1.1", "INCRBYFLOAT f -1.1",
		"SET f 5 EX 100", "INCRBYFLOAT f 1", "TTL f", "SET f 1e5", "INCRBYFLOAT f 0", "SET f 3.0", "INCRBYFLOAT f 0",
		"SET f 9223372036854775807", "INCRBYFLOAT f 1", "INCRBYFLOAT f 1.23456789012345678901",
		"SET src v EX 100", "RENAME src dst", "TTL dst", "GET src", "RENAME dst dst", "RENAME nope x",
		"RENAMENX dst dst", "RENAMENX nope x", "SET other o", "RENAMENX dst other", "RENAME dst other", "GET other",
		"TTL other", "SET p v", "RENAME other p", "TTL p",
		"EXPIRETIME nope", "PEXPIRETIME nope", "SET q v", "EXPIRETIME q", "PEXPIREAT q 4102444800123",
		"PEXPIRETIME q", "EXPIRETIME q", "TOUCH q nope q")
	add(hashScript()...)
	add(listScript()...)
	add(zsetScript()...)
	add(multiScript()...)
	return script
}

func hashScript() []string { return nil }

func listScript() []string { return nil }

func zsetScript() []string { return nil }

func multiScript() []string { return nil }
