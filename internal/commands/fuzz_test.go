package commands_test

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testserver"
)

// fuzzCommands are the commands FuzzCommands drives: the data-type,
// expiry, scan and script commands whose arguments carry options.
var fuzzCommands = []string{
	"SET", "GET", "GETEX", "GETDEL", "GETSET", "SETNX", "SETEX", "PSETEX", "MSET", "MSETNX", "MGET", "APPEND",
	"STRLEN", "INCR", "INCRBY", "DECRBY", "INCRBYFLOAT", "EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT", "TTL",
	"PTTL", "EXPIRETIME", "PERSIST", "RENAME", "RENAMENX", "TOUCH", "TYPE", "DEL", "EXISTS", "KEYS",
	"HSET", "HMSET", "HSETNX", "HGET", "HMGET", "HINCRBY", "HINCRBYFLOAT", "HDEL", "HEXISTS", "HLEN", "HSTRLEN",
	"HGETALL", "HKEYS", "LPUSH", "RPUSH", "LPUSHX", "RPUSHX", "LPOP", "RPOP", "LINDEX", "LRANGE", "LTRIM",
	"LREM", "LSET", "LLEN", "ZADD", "ZINCRBY", "ZREM", "ZSCORE", "ZCARD", "ZCOUNT", "ZRANGE", "ZREVRANGE",
	"ZRANGEBYSCORE", "ZREVRANGEBYSCORE", "ZREMRANGEBYSCORE", "ZREMRANGEBYRANK", "SCAN", "HSCAN", "ZSCAN",
	"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "SCRIPT",
}

// fuzzScripts are the scripts EVAL and EVALSHA run (an input picks one by
// its first argument's first byte, "0" the first): arbitrary Lua could loop forever, so
// the script is fixed and what is fuzzed is numkeys, the keys and the
// arguments it passes on to commands.
var fuzzScripts = []string{
	"return redis.call('SET', KEYS[1], unpack(ARGV))",
	"return redis.pcall('ZADD', KEYS[1], unpack(ARGV))",
	"return redis.call('ZRANGE', KEYS[1], unpack(ARGV))",
	"return redis.pcall('HSET', KEYS[1], unpack(ARGV))",
	"return redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])",
	"return {KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3] == 'x'}",
	"return redis.call('SCAN', unpack(ARGV))",
	"return redis.pcall('LRANGE', KEYS[1], unpack(ARGV))",
	"return redis.pcall('EXPIRE', KEYS[1], unpack(ARGV))",
	"return redis.pcall('GETEX', KEYS[1], unpack(ARGV))",
}

// fuzzMaxElements and fuzzMaxValue are the fuzzed server's --max-elements
// and --max-value-size.
const (
	fuzzMaxElements = 8
	fuzzMaxValue    = 1024 // above 9 elements' overheads: both bounds are reachable
)

// fuzzCheck is the last script of every input: the largest element count
// of any hash, list or sorted set, and the longest string, for the limits
// invariant.
const fuzzCheck = `local elems, bytes = 0, 0
for _, k in ipairs(redis.call('KEYS', '*')) do
	local t = redis.call('TYPE', k).ok
	if t == 'hash' then elems = math.max(elems, redis.call('HLEN', k))
	elseif t == 'list' then elems = math.max(elems, redis.call('LLEN', k))
	elseif t == 'zset' then elems = math.max(elems, redis.call('ZCARD', k))
	elseif t == 'string' then bytes = math.max(bytes, redis.call('STRLEN', k)) end
end
return {elems, bytes}`

// fuzzErrorCodes are the error codes these commands may answer with.
var fuzzErrorCodes = map[string]bool{"ERR": true, "WRONGTYPE": true, "NOSCRIPT": true, "NOTBUSY": true}

// FuzzCommands feeds arbitrary argument vectors to the data-type, expiry,
// scan and script commands of a real server, over a fixed set of values
// (a string, a hash, a list, a sorted set), in RESP2 or RESP3. Every
// reply must be well-formed RESP, every error must carry a Redis error
// code, no handler may panic (the server would answer "internal error"),
// the server must answer PING after, and no value may grow past
// --max-elements or --max-value-size. An input is one pipeline: setup,
// the command, the checks.
func FuzzCommands(f *testing.F) {
	for _, seed := range fuzzCommandSeeds() {
		f.Add(seed.sel, seed.resp3, strings.Join(seed.args, "\x00"))
	}
	ts := testserver.Start(f, testserver.Options{Shards: 2, MaxElements: fuzzMaxElements, MaxValueSize: fuzzMaxValue,
		EventLoops: 0, Model: true})
	var conn net.Conn
	var rd *bufio.Reader
	dial := func() error {
		c, err := net.Dial("tcp", ts.Addr)
		if err == nil {
			conn, rd = c, bufio.NewReader(c)
		}
		return err
	}
	if err := dial(); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { conn.Close() })
	f.Fuzz(func(t *testing.T, sel uint8, resp3 bool, joined string) {
		words := fuzzWords(sel, joined)
		// A failure leaves a fresh connection for the next input, so that
		// minimizing a finding is not misled by a closed one.
		fail := func(format string, args ...any) {
			t.Helper()
			conn.Close()
			if err := dial(); err != nil {
				t.Errorf("redial: %v", err)
			}
			t.Fatalf("%q: "+format, append([]any{words}, args...)...)
		}
		proto := "2"
		if resp3 {
			proto = "3"
		}
		pipeline := [][]string{{"HELLO", proto}, {"FLUSHALL"}, {"SET", "s", "10"}, {"HSET", "h", "f", "1", "g", "2"},
			{"RPUSH", "l", "a", "b", "c"}, {"ZADD", "z", "1", "a", "2.5", "b"}, {"SET", "e", "v", "PX", "100000"},
			words, {"EVAL", fuzzCheck, "0"}, {"PING"}}
		var req []byte
		for _, cmd := range pipeline {
			req = append(req, testserver.EncodeCommand(cmd)...)
		}
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := conn.Write(req); err != nil {
			fail("%v", err)
		}
		var last []byte
		for i := range pipeline {
			reply, err := readStrictReply(rd, 0)
			if err != nil {
				fail("reply %d: %v", i, err)
			}
			if bytes.Contains(reply, []byte("internal error")) {
				fail("a handler panicked: %q", reply)
			}
			if i == len(pipeline)-2 {
				last = reply
			}
			if i == len(pipeline)-1 && string(reply) != "+PONG\r\n" {
				fail("PING after answered %q", reply)
			}
		}
		var elems, size int
		if _, err := fmt.Sscanf(string(last), "*2\r\n:%d\r\n:%d\r\n", &elems, &size); err != nil {
			fail("the check script answered %q", last)
		}
		if elems > fuzzMaxElements || size > fuzzMaxValue {
			fail("a value grew past the limits: %d elements, %d bytes", elems, size)
		}
	})
}

// fuzzWords builds the command an input stands for: fuzzCommands[sel]
// with the arguments in joined, separated by NUL bytes. EVAL's script
// (and EVALSHA's SHA1, when its first byte is even) is one of
// fuzzScripts.
func fuzzWords(sel uint8, joined string) []string {
	name := fuzzCommands[int(sel)%len(fuzzCommands)]
	args := strings.Split(joined, "\x00")
	if joined == "" {
		args = nil
	}
	if len(args) > 32 {
		args = args[:32]
	}
	if strings.HasPrefix(name, "EVAL") {
		pick := 0 // the script the digit args[0][0] names, wrapping around
		if len(args) > 0 && len(args[0]) > 0 {
			pick = (int(args[0][0]) - '0' + 256) % 256
		} else if len(args) == 0 {
			args = []string{""}
		}
		script := fuzzScripts[pick%len(fuzzScripts)]
		switch {
		case !strings.HasPrefix(name, "EVALSHA"):
			args[0] = script
		case pick%2 == 0:
			sum := sha1.Sum([]byte(script))
			args[0] = hex.EncodeToString(sum[:])
		}
	}
	return append([]string{name}, args...)
}

// readStrictReply reads one reply and checks that it is well-formed RESP2
// or RESP3: a known type, lengths that match, CRLF where due, integers
// that are integers, error codes these commands may give. It returns the
// reply's bytes.
func readStrictReply(rd *bufio.Reader, depth int) ([]byte, error) {
	if depth > 16 {
		return nil, fmt.Errorf("nested deeper than 16")
	}
	line, err := rd.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || !bytes.HasSuffix(line, []byte("\r\n")) || bytes.IndexByte(line[:len(line)-2], '\r') >= 0 {
		return nil, fmt.Errorf("bad line %q", line)
	}
	body := string(line[1 : len(line)-2])
	out := append([]byte(nil), line...)
	count := func() (int, error) {
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || (n == -1 && line[0] != '*' && line[0] != '$') {
			return 0, fmt.Errorf("bad length in %q", line)
		}
		return n, nil
	}
	switch line[0] {
	case '+':
		return out, nil
	case '-':
		code, _, _ := strings.Cut(body, " ")
		if !fuzzErrorCodes[code] {
			return nil, fmt.Errorf("error without a Redis error code: %q", line)
		}
		return out, nil
	case ':':
		if _, err := strconv.ParseInt(body, 10, 64); err != nil {
			return nil, fmt.Errorf("bad integer %q", line)
		}
		return out, nil
	case ',':
		if _, err := strconv.ParseFloat(body, 64); err != nil && body != "inf" && body != "-inf" && body != "nan" {
			return nil, fmt.Errorf("bad double %q", line)
		}
		return out, nil
	case '#':
		if body != "t" && body != "f" {
			return nil, fmt.Errorf("bad boolean %q", line)
		}
		return out, nil
	case '_':
		if body != "" {
			return nil, fmt.Errorf("bad null %q", line)
		}
		return out, nil
	case '$', '=':
		n, err := count()
		if err != nil || n < 0 {
			return out, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return nil, err
		}
		if !bytes.HasSuffix(buf, []byte("\r\n")) {
			return nil, fmt.Errorf("bulk of %d bytes not ended by CRLF", n)
		}
		return append(out, buf...), nil
	case '*', '~', '%':
		n, err := count()
		if err != nil || n < 0 {
			return out, err
		}
		if line[0] == '%' {
			n *= 2
		}
		for range n {
			sub, err := readStrictReply(rd, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown reply type %q", line)
}

// fuzzSeed is one seed input.
type fuzzSeed struct {
	sel   uint8
	resp3 bool
	args  []string
}

// fuzzCommandSeeds are the tricky cases: every option of every command,
// their conflicts, numbers at the edges, and the values' limits.
func fuzzCommandSeeds() []fuzzSeed {
	index := map[string]uint8{}
	for i, name := range fuzzCommands {
		index[name] = uint8(i)
	}
	var seeds []fuzzSeed
	add := func(name string, args ...string) {
		seeds = append(seeds, fuzzSeed{index[name], len(seeds)%2 == 1, args})
	}
	add("SET", "k", "v", "EX", "10", "NX")
	add("SET", "s", "v", "PX", "100", "XX", "GET")
	add("SET", "k", "v", "KEEPTTL", "EX", "1")
	add("SET", "k", "v", "EXAT", "9223372036854775807")
	add("SET", "k", "v", "PXAT", "-1", "NX", "XX")
	add("SET", "h", "v", "GET")
	add("GETEX", "e", "PERSIST")
	add("GETEX", "s", "EX", "0")
	add("GETEX", "s", "PXAT", "9223372036854775807")
	add("GETEX", "s", "EX", "10", "PX", "10")
	add("SETEX", "k", "-1", "v")
	add("PSETEX", "k", "9223372036854775807", "v")
	add("MSET", "a", "1", "b")
	add("MSETNX", "a", "1", "s", "2")
	add("APPEND", "s", strings.Repeat("x", 1100))
	add("INCRBY", "s", "9223372036854775807")
	add("DECRBY", "s", "-9223372036854775808")
	add("INCRBYFLOAT", "s", "1e308")
	add("INCRBYFLOAT", "s", "inf")
	add("INCRBYFLOAT", "s", "0x1p3")
	add("EXPIRE", "s", "10", "NX", "XX")
	add("EXPIRE", "s", "10", "GT", "LT")
	add("PEXPIRE", "e", "-9223372036854775808")
	add("EXPIREAT", "s", "9223372036854775807")
	add("PEXPIREAT", "s", "100", "FOO")
	add("RENAME", "s", "s")
	add("RENAMENX", "h", "z")
	add("HSET", "h", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5", "f", "6", "g", "7")
	add("HSET", "h", "f", strings.Repeat("y", 1000))
	add("HSETNX", "h", "f", "1")
	add("HINCRBY", "h", "f", "9223372036854775807")
	add("HINCRBYFLOAT", "h", "f", "nan")
	add("HDEL", "h", "f", "g")
	add("LPUSH", "l", "1", "2", "3", "4", "5", "6")
	add("RPUSHX", "missing", "a")
	add("LPOP", "l", "-1")
	add("RPOP", "l", "9223372036854775807")
	add("LRANGE", "l", "-9223372036854775808", "9223372036854775807")
	add("LTRIM", "l", "1", "-1")
	add("LREM", "l", "-2", "a")
	add("LSET", "l", "-4", "x")
	add("LINDEX", "l", "x")
	add("ZADD", "z", "NX", "XX", "1", "a")
	add("ZADD", "z", "GT", "LT", "1", "a")
	add("ZADD", "z", "GT", "CH", "INCR", "5", "a")
	add("ZADD", "z", "INCR", "1", "a", "2", "b")
	add("ZADD", "z", "nan", "a")
	add("ZADD", "z", "-inf", "a", "+inf", "b", "1e-320", "c", "-0", "d", "3", "e", "4", "f", "5", "g")
	add("ZINCRBY", "z", "inf", "a")
	add("ZRANGE", "z", "(1", "+inf", "BYSCORE", "REV", "LIMIT", "0", "-1", "WITHSCORES")
	add("ZRANGE", "z", "0", "-1", "LIMIT", "1", "1")
	add("ZRANGE", "z", "[a", "[z", "BYLEX")
	add("ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "-1", "9223372036854775807")
	add("ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES", "LIMIT", "0", "1")
	add("ZREVRANGEBYSCORE", "z", "(2.5", "(1", "LIMIT")
	add("ZCOUNT", "z", "(", "1")
	add("ZREMRANGEBYSCORE", "z", "-inf", "(nan")
	add("ZREMRANGEBYRANK", "z", "-100", "100")
	add("SCAN", "0", "MATCH", "*", "COUNT", "1", "TYPE", "hash")
	add("SCAN", "-1", "COUNT", "0")
	add("SCAN", "", "TYPE", "nosuch", "COUNT", "9223372036854775807")
	add("SCAN", "18446744073709551616")
	add("HSCAN", "h", "0", "MATCH", "[a-", "COUNT", "1")
	add("HSCAN", "missing", "x", "COUNT", "0")
	add("ZSCAN", "z", "0", "NOVALUES")
	add("ZSCAN", "s", "0")
	add("KEYS", "[^\\")
	add("EVAL", "0", "1", "k", "v", "EX", "10", "NX")
	add("EVAL", "1", "1", "z", "GT", "LT", "1", "a")
	add("EVAL", "2", "1", "z", "0", "-1", "WITHSCORES")
	add("EVAL", "5", "1", "k", "str", "3.9", "x")
	add("EVAL", "6", "0", "0", "COUNT", "1")
	add("EVAL", "0", "-1")
	add("EVAL", "0", "99", "a")
	add("EVALSHA", "2", "1", "z", "0", "1")
	add("EVALSHA", "3", "0")
	add("EVALSHA_RO", "0", "1", "k", "v")
	add("SCRIPT", "LOAD", "return 1")
	add("SCRIPT", "EXISTS", "x", "y")
	add("SCRIPT", "FLUSH", "ASYNC")
	add("SCRIPT", "KILL")
	return seeds
}
