package commands_test

import (
	"bufio"
	"net"
	"slices"
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
		if strings.EqualFold(words[0], "keys") {
			// KEYS's order is unspecified: compare the keys sorted.
			replies[0], replies[1] = sortedBulks(replies[0]), sortedBulks(replies[1])
		}
		if scan := strings.ToLower(words[0]); scan == "scan" || scan == "hscan" || scan == "zscan" {
			// So is a scan's: the script scans everything in one call.
			replies[0], replies[1] = sortedScan(replies[0], scan != "scan"), sortedScan(replies[1], scan != "scan")
		}
		// HELLO's reply describes the server; what it switches is compared
		// by the replies after it.
		if !strings.EqualFold(words[0], "hello") && !sameReply(words, replies[0], replies[1]) {
			t.Errorf("%s\n redis:    %q\n rlserver: %q", strings.Join(words, " "), replies[0], replies[1])
			if diffs++; diffs == 30 {
				t.Fatal("too many differences")
			}
		}
	}
}

// sortedBulks returns an array reply's lines with its bulk strings
// ("$n", then the string) sorted.
func sortedBulks(reply []string) []string {
	if len(reply) < 3 || !strings.HasPrefix(reply[0], "*") {
		return reply
	}
	var pairs []string
	for i := 1; i+1 < len(reply); i += 2 {
		pairs = append(pairs, reply[i]+"\n"+reply[i+1])
	}
	slices.Sort(pairs)
	out := []string{reply[0]}
	for _, p := range pairs {
		out = append(out, strings.Split(p, "\n")...)
	}
	return out
}

// sortedScan returns a SCAN reply's lines (the cursor, then an array of
// bulk strings) with the array's strings sorted, or its (name, value)
// pairs when pairs.
func sortedScan(reply []string, pairs bool) []string {
	if len(reply) < 4 || reply[0] != "*2" {
		return reply
	}
	step := 2
	if pairs {
		step = 4
	}
	var items []string
	for i := 4; i+step <= len(reply); i += step {
		items = append(items, strings.Join(reply[i:i+step], "\n"))
	}
	slices.Sort(items)
	out := slices.Clone(reply[:4])
	for _, it := range items {
		out = append(out, strings.Split(it, "\n")...)
	}
	return out
}

// typesScript returns the commands TestDifferentialRedisTypes sends: every
// command on a missing key, on its own type and on another type (for
// WRONGTYPE), with edge arguments and option combinations.
func typesScript() []string {
	var script []string
	add := func(lines ...string) { script = append(script, lines...) }
	add("FLUSHALL")
	// Values of every type, to aim each command at.
	setup := []string{"DEL s h l z missing r", "SET s 10", "HSET h f 1", "RPUSH l a", "ZADD z 1 m"}
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
		"HGETALL $k", "LRANGE $k 0 -1", "ZRANGE $k 0 -1 WITHSCORES", "HDEL $k f", "LREM $k 0 a", "ZREM $k m",
		"ZREMRANGEBYRANK $k 0 -1", "ZREMRANGEBYSCORE $k 0 1", "LINDEX $k 0", "LSET $k 0 x", "LTRIM $k 0 0",
		"LPOP $k", "RPOP $k 1", "HINCRBY $k f 1", "HINCRBYFLOAT $k f 1", "ZINCRBY $k 1 m", "HMGET $k f", "HLEN $k",
		"ZCOUNT $k 0 1", "ZRANGEBYSCORE $k 0 1", "HSETNX $k f v", "HEXISTS $k f", "HKEYS $k", "HVALS $k",
		"RPUSHX $k a", "ZADD $k INCR 1 m", "ZREVRANGE $k 0 -1", "HSTRLEN $k f", "HSCAN $k 0", "ZSCAN $k 0",
		"HSCAN $k x", "ZSCAN $k 0 COUNT 0")

	// Which error comes first: the arguments', or WRONGTYPE.
	add(setup...)
	add("ZADD s x a", "ZADD s 1", "ZADD s NX XX 1 a", "ZADD s INCR 1 a 2 b", "HSET s a", "HINCRBY s f x",
		"HINCRBYFLOAT s f x", "LINDEX s x", "LPOP s x", "LPOP s -1", "ZRANGE s x 1", "ZRANGE s 0 1 FOO",
		"ZCOUNT s x 1", "INCRBYFLOAT h x", "LRANGE s 0 x", "LTRIM s x 0", "LREM s x a", "LSET s x a",
		"ZINCRBY s x m", "ZREMRANGEBYSCORE s x 1", "ZREMRANGEBYRANK s x 1", "GETEX s FOO", "GETEX h EX 0",
		"MSET s", "RENAME nope s", "HMGET s a", "HSETNX s a b", "HEXISTS s a", "ZSCORE s m", "LSET nope x a")
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
	// KEYS: Redis's glob patterns.
	add("FLUSHALL", "MSET hello 1 hallo 2 hxllo 3 heeeello 4 hllo 5 h[llo 6 \"a*b\" 7 \"f\\\\o\" 8 ab 9 x-y 10",
		"HSET hh f v", "KEYS *", "KEYS h?llo", "KEYS h*llo", "KEYS h[ae]llo", "KEYS h[^e]llo", "KEYS h[a-b]llo",
		"KEYS h[b-a]llo", "KEYS \"h\\\\[llo\"", "KEYS a\\*b", "KEYS \"a\\\\*b\"", "KEYS *[", "KEYS h[", "KEYS h[a",
		"KEYS [-]*", "KEYS x[-]y", "KEYS x[a-]y", "KEYS ***o", "KEYS ?", "KEYS ??", "KEYS \"\"", "KEYS *b", "KEYS a*",
		"KEYS \"f\\\\\\\\o\"", "KEYS h\\", "KEYS [\\]]*", "KEYS *l*l*o*", "KEYS nomatch", "DEL hello", "KEYS h*")
	// SCAN, HSCAN, ZSCAN: whole in one call (COUNT above the size), compared
	// sorted; the errors, in Redis's order.
	add("SCAN 0 COUNT 1000", "SCAN 0 COUNT 1000 MATCH h*llo", "SCAN 0 MATCH h[ae]llo COUNT 1000", "SCAN 0 COUNT 1000 TYPE hash",
		"SCAN 0 COUNT 1000 TYPE nosuch", "SCAN 0 TYPE STRING MATCH a* COUNT 1000", "SCAN \"\" COUNT 1000", "SCAN x",
		"SCAN \" 0\"", "SCAN 18446744073709551616", "SCAN 0 COUNT 0", "SCAN 0 COUNT -3", "SCAN 0 COUNT x", "SCAN 0 COUNT",
		"SCAN 0 MATCH", "SCAN 0 TYPE", "SCAN 0 FOO 1", "SCAN",
		"HSET hs a 1 b 2 c 3 dd 4", "HSCAN hs 0", "HSCAN hs 0 MATCH [ab]", "HSCAN hs 0 COUNT 1", "HSCAN hs 0 MATCH * COUNT 2",
		"HSCAN nope 0", "HSCAN nope x", "HSCAN nope 0 COUNT 0", "HSCAN hh x", "HSCAN hs 0 TYPE hash", "HSCAN hs 0 COUNT 0",
		"HSCAN hs 0 MATCH", "HSCAN hs 0 NOVALUES", "HSCAN hs",
		"ZADD zs 1.5 a 2 b inf c -0 d 0.1 e -inf f", "ZSCAN zs 0", "ZSCAN zs 0 MATCH [a-c]", "ZSCAN zs 0 COUNT 1",
		"ZSCAN hs 0", "ZSCAN zs x", "ZSCAN zs 0 COUNT 0", "ZSCAN nope 0")
	add(hashScript()...)
	add(listScript()...)
	add(zsetScript()...)
	add(multiScript()...)
	// RESP3: maps, doubles, nulls and score pairs.
	add("HELLO 3", "DEL h3 z3", "HSET h3 a 1 b 2", "HGETALL h3", "HGETALL nope", "HMGET h3 a x", "HGET h3 x",
		"ZADD z3 1.5 a 2 b", "ZSCORE z3 a", "ZSCORE z3 x", "ZINCRBY z3 1 a", "ZADD z3 INCR 1 b", "ZADD z3 NX INCR 1 b",
		"ZRANGE z3 0 -1 WITHSCORES", "ZRANGEBYSCORE z3 -inf +inf WITHSCORES", "ZREVRANGE z3 0 -1 WITHSCORES",
		"ZRANGE z3 0 -1", "LPOP nope", "LPOP nope 2", "GET nope", "MGET nope h3", "INCRBYFLOAT f3 1.5",
		"HSCAN h3 0", "ZSCAN z3 0", "HSCAN nope 0", "SCAN 0 COUNT 1000 TYPE zset MATCH *3", "HELLO 2")
	return script
}

func hashScript() []string {
	return []string{
		"DEL h", "HSET h a 1 b 2", "HSET h a 3 c 4", "HGETALL h", "HSET h a", "HSET h", "HSET h a 1 b",
		"HMSET h x 1", "HMSET h x", "HGET h a", "HGET h nope", "HGET nope a", "HMGET h a nope b", "HMGET nope a b",
		"HSETNX h a 9", "HSETNX h n 9", "HGET h n", "HLEN h", "HLEN nope", "HEXISTS h a", "HEXISTS h zz",
		"HEXISTS nope a", "HSTRLEN h a", "HSTRLEN h zz", "HKEYS h", "HVALS h", "HKEYS nope", "HVALS nope",
		"HGETALL nope", "HDEL h a nope", "HDEL h a", "HGETALL h", "HDEL nope a",
		"HINCRBY h i 5", "HINCRBY h i -7", "HINCRBY h i x", "HINCRBY h i 9223372036854775807", "HINCRBY h i 1.5",
		"HSET h s abc", "HINCRBY h s 1", "HSET h big 9223372036854775807", "HINCRBY h big 1", "HINCRBY h i 01",
		"HINCRBYFLOAT h fl 10.5", "HINCRBYFLOAT h fl 0.1", "HINCRBYFLOAT h fl -1e3", "HINCRBYFLOAT h fl abc",
		"HINCRBYFLOAT h fl inf", "HINCRBYFLOAT h fl nan", "HINCRBYFLOAT h s 1", "HINCRBYFLOAT h fl 1e4000",
		"HINCRBYFLOAT h i 1", "HLEN h", "HSTRLEN h fl",
		// An emptied hash is deleted, its TTL with it.
		"DEL e", "HSET e f v", "EXPIRE e 100", "HDEL e f", "EXISTS e", "TTL e", "HSET e f v", "TTL e",
		"HSET e g w", "PERSIST e", "TTL e", "RENAME e e2", "HGETALL e2", "TYPE e2",
	}
}

func listScript() []string {
	return []string{
		"DEL l", "RPUSH l a b c", "LPUSH l x y", "LRANGE l 0 -1", "LLEN l", "LLEN nope", "LPUSHX nope a",
		"RPUSHX nope a", "EXISTS nope", "LPUSHX l p", "RPUSHX l q r", "LRANGE l 0 -1",
		"LINDEX l 0", "LINDEX l -1", "LINDEX l 100", "LINDEX l -100", "LINDEX l x", "LINDEX nope 0",
		"LRANGE l 1 2", "LRANGE l -3 -1", "LRANGE l 5 1", "LRANGE l -100 100", "LRANGE l x 1", "LRANGE nope 0 -1",
		"LRANGE l 0 9223372036854775807", "LRANGE l -9223372036854775808 0",
		"LPOP l", "RPOP l", "LPOP l 2", "RPOP l 0", "LPOP l -1", "LPOP l x", "LPOP l 1 2", "LPOP nope",
		"LPOP nope 2", "RPOP nope 0", "LRANGE l 0 -1", "RPOP l 100", "EXISTS l",
		"RPUSH l 1 2 3 4 5 6 7", "LTRIM l 1 -2", "LRANGE l 0 -1", "LTRIM l 0 0", "LRANGE l 0 -1", "LTRIM l 5 1",
		"EXISTS l", "LTRIM nope 0 1", "LTRIM l x 1",
		"RPUSH r a b a c a b", "LREM r 2 a", "LRANGE r 0 -1", "LREM r -1 b", "LRANGE r 0 -1", "LREM r 0 a",
		"LRANGE r 0 -1", "RPUSH r a b a", "LREM r -9223372036854775808 a", "LRANGE r 0 -1", "LREM r x a", "LREM nope 0 a", "LREM r 0 zz",
		"LSET r 0 X", "LSET r -1 Y", "LSET r 5 Z", "LSET nope 0 a", "LSET r x a", "LRANGE r 0 -1",
		// The moving window of the limits library.
		"DEL mw", "LINDEX mw 4", "LPUSH mw 1000 1000", "LTRIM mw 0 4", "LRANGE mw 0 -1",
	}
}

func zsetScript() []string {
	return []string{
		"DEL z", "ZADD z 1 a 2 b 3 c", "ZADD z 1 a", "ZADD z CH 5 a", "ZADD z NX 9 a 4 d", "ZADD z XX 7 a 8 e",
		"ZADD z XX CH 7 a 8 b", "ZADD z GT 1 a", "ZADD z GT CH 10 a", "ZADD z LT CH 1 a", "ZADD z LT 100 a",
		"ZADD z NX XX 1 a", "ZADD z GT LT 1 a", "ZADD z NX GT 1 a", "ZADD z INCR 1 a 2 b", "ZADD z INCR 2.5 a",
		"ZADD z INCR NX 1 a", "ZADD z INCR XX 1 zz", "ZADD z INCR GT -100 a", "ZADD z 1", "ZADD z 1 a 2",
		"ZADD z x a", "ZADD z nan a", "ZADD z inf i -inf j", "ZADD z INCR +inf i", "ZADD z INCR -inf i",
		"ZADD z 0x10 hex", "ZADD z 1e400 big", "ZADD z \" 1\" sp", "ZADD z FOO 1 a", "ZADD nope XX 1 a",
		"EXISTS nope", "ZRANGE z 0 -1 WITHSCORES", "ZCARD z", "ZCARD nope",
		"ZSCORE z a", "ZSCORE z zz", "ZSCORE nope a", "ZSCORE z i", "ZSCORE z j",
		"ZINCRBY z 1.5 b", "ZINCRBY z x b", "ZINCRBY z 1 new", "ZINCRBY nz 0.1 m", "ZSCORE nz m",
		"ZCOUNT z -inf +inf", "ZCOUNT z (1 3", "ZCOUNT z 1 (3", "ZCOUNT z x 1", "ZCOUNT nope 0 1", "ZCOUNT z 5 1",
		"ZRANGE z 0 2", "ZRANGE z -2 -1 WITHSCORES", "ZRANGE z 0 -1 REV", "ZRANGE z 0 -1 REV WITHSCORES",
		"ZRANGE z 1 4 BYSCORE", "ZRANGE z (1 +inf BYSCORE WITHSCORES", "ZRANGE z +inf -inf BYSCORE REV",
		"ZRANGE z -inf +inf BYSCORE LIMIT 1 2", "ZRANGE z -inf +inf BYSCORE LIMIT -1 2",
		"ZRANGE z -inf +inf BYSCORE LIMIT 1 -1", "ZRANGE z 0 -1 LIMIT 1 2", "ZRANGE z 0 -1 FOO",
		"ZRANGE z x 1", "ZRANGE z 0 1 BYSCORE LIMIT x 1", "ZRANGE z 0 1 BYSCORE LIMIT 1", "ZRANGE nope 0 -1",
		"ZREVRANGE z 0 1", "ZREVRANGE z 0 -1 WITHSCORES", "ZREVRANGE z 0 1 LIMIT 0 1", "ZREVRANGE z 0 1 BYSCORE",
		"ZRANGEBYSCORE z -inf +inf", "ZRANGEBYSCORE z 1 5 WITHSCORES", "ZRANGEBYSCORE z (1 (5 LIMIT 0 1",
		"ZRANGEBYSCORE z 1 5 LIMIT 1 1 WITHSCORES", "ZRANGEBYSCORE z x 5", "ZRANGEBYSCORE z 1 5 REV",
		"ZREVRANGEBYSCORE z +inf -inf", "ZREVRANGEBYSCORE z 5 1 WITHSCORES LIMIT 0 2", "ZREVRANGEBYSCORE z 1 5",
		"ZREM z a nope", "ZREM z a", "ZREM nope a", "ZREMRANGEBYSCORE z -inf (2", "ZRANGE z 0 -1 WITHSCORES",
		"ZREMRANGEBYSCORE z x 1", "ZREMRANGEBYSCORE nope 0 1", "ZREMRANGEBYRANK z 0 0", "ZREMRANGEBYRANK z -1 -1",
		"ZRANGE z 0 -1 WITHSCORES", "ZREMRANGEBYRANK z x 0", "ZREMRANGEBYRANK z 0 -1", "EXISTS z",
		// The sliding log of the ratelimiter npm package.
		"DEL sl", "ZREMRANGEBYSCORE sl 0 1000", "ZCARD sl", "ZADD sl 2000 2000", "ZRANGE sl 0 0",
		"ZRANGE sl -1 -1", "ZREMRANGEBYRANK sl 0 -6", "PEXPIRE sl 10000", "ZADD sl 2001 2001", "ZRANGE sl 0 -1 WITHSCORES",
		"ZADD sc 0.1 a 1.5 b -0 c 1e-310 d 123456789012345678 e", "ZRANGE sc 0 -1 WITHSCORES",
	}
}

func multiScript() []string {
	return []string{
		"DEL m1 m2 m3",
		"MULTI", "SETEX m1 100 0", "RENAMENX m1 m2", "INCR m2", "TTL m2", "EXEC",
		"MULTI", "ZREMRANGEBYSCORE m3 0 10", "ZCARD m3", "ZADD m3 20 a", "ZRANGE m3 0 0", "ZRANGE m3 -1 -1",
		"ZREMRANGEBYRANK m3 0 -3", "PEXPIRE m3 100000", "EXEC",
		"MULTI", "HSET m1 f 1", "HGET m1 f", "LPUSH m1 x", "TYPE m1", "EXEC",
		"MULTI", "HSET m1", "EXEC",
		"MULTI", "MGET m1 m2 m3", "MSET m4 a m5 b", "RENAME m4 m6", "EXEC",
	}
}
