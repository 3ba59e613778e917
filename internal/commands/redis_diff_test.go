package commands_test

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testserver"
)

// TestDifferentialRedis sends the same commands, one connection each, to a
// real redis-server 7 and to rlserver, and compares the replies byte for
// byte: SET's options in every combination of up to two (and many of
// three), every expire command with edge values and options, MULTI's queue
// checks and error precedence. rlserver's injected clock is set to the wall
// clock before each command, so TTLs are comparable; they may differ by the
// time between the two sends (a tolerance of 5 s, with every TTL in the
// script at least 100 s), and past 2262, where rlserver keeps the last
// instant int64 nanoseconds hold (docs/compatibility.md).
func TestDifferentialRedis(t *testing.T) { testserver.Models(t, testDifferentialRedis) }

func testDifferentialRedis(t *testing.T) {
	redisConn := startRedis(t)
	ts := startServer(t)
	rl := testserver.DialRaw(t, ts.Addr)
	rds := []*bufio.Reader{bufio.NewReader(redisConn), bufio.NewReader(rl)}
	diffs := 0
	for _, words := range differentialScript() {
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
			if diffs++; diffs == 20 {
				t.Fatal("too many differences")
			}
		}
	}
}

// sameReply compares the replies to words, TTLs within the tolerance
// TestDifferentialRedis allows.
func sameReply(words []string, redis, rl []string) bool {
	if strings.Join(redis, "\n") == strings.Join(rl, "\n") {
		return true
	}
	cmd := strings.ToUpper(words[0])
	if (cmd != "PTTL" && cmd != "TTL") || len(redis) != 1 || len(rl) != 1 {
		return false
	}
	a, errA := strconv.ParseInt(strings.TrimPrefix(redis[0], ":"), 10, 64)
	b, errB := strconv.ParseInt(strings.TrimPrefix(rl[0], ":"), 10, 64)
	if errA != nil || errB != nil || a < 0 || b < 0 {
		return false
	}
	beyond2262 := int64(7_000_000_000_000) // ms from today, well within the cap's 7.4e12
	tolerance := int64(5000)
	if cmd == "TTL" {
		beyond2262, tolerance = beyond2262/1000, tolerance/1000
	}
	if a > beyond2262 {
		return b > beyond2262
	}
	return max(a-b, b-a) <= tolerance
}

// differentialScript returns the commands TestDifferentialRedis sends.
func differentialScript() [][]string {
	var script [][]string
	add := func(line string) {
		words, err := testserver.SplitWords(line)
		if err != nil {
			panic(err)
		}
		script = append(script, words)
	}
	add("FLUSHALL")
	// SET's options: every combination of one and two, and of three from
	// the ones that interact most.
	opts := []string{"NX", "XX", "GET", "KEEPTTL", "EX 100", "PX 200000", "EXAT 4102444800", "PXAT 4102444800000",
		"EX 1.5", "EX 0", "PX -1", "EX", "FOO", "px 300000", "EXAT 9223372036854775", "PXAT 9223372036854775807"}
	for _, a := range opts {
		add("SET k v " + a)
		add("PTTL k")
		for _, b := range opts {
			add("SET k v " + a + " " + b)
			add("PTTL k")
		}
	}
	few := []string{"NX", "XX", "KEEPTTL", "EX 100", "PX 200000", "EX 1.5", "GET"}
	for _, a := range few {
		for _, b := range few {
			for _, c := range few {
				add("DEL k")
				add("SET k v " + a + " " + b + " " + c)
				add("PTTL k")
			}
		}
	}
	for _, cmd := range []string{"SETEX", "PSETEX"} {
		for _, v := range []string{"100", "0", "-1", "x", "1.5", "9223372036854775", "9223372036854776",
			"9223372036854000000", "9223372036854775807", "01"} {
			add(fmt.Sprintf("%s k %s v", cmd, v))
			add("PTTL k")
		}
	}
	// The expire commands: edge times, with every option combination, on
	// a key without a TTL, one with a TTL, and a missing key.
	times := []string{"200", "-10", "abc", "0", "9223372036854775807", "-9223372036854775808", "9223372036854775",
		"-9223372036854775", "-9223372036854776", "4102444800", "4102444800000", "9223372036854000000",
		"-9223372036854770000", "-20000000000", "-9300000000", "01", "+5", ""}
	options := []string{"", "NX", "XX", "GT", "LT", "NX XX", "GT LT", "FOO", "XX GT", "lt xx", "NX NX"}
	for _, cmd := range []string{"EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"} {
		for _, v := range times {
			for _, o := range options {
				for _, setup := range []string{"SET k v", "SET k v EX 150", "DEL k"} {
					add(setup)
					add(fmt.Sprintf("%s k %q %s", cmd, v, o))
					add("PTTL k")
				}
			}
		}
	}
	// MULTI: what is checked when queued (existence, subcommand, arity,
	// no-multi) and what only when EXEC runs the command.
	for _, line := range []string{
		"MULTI", "INCR c", "PING a b", "INCR c", "FLUSHALL a b", "AUTH a b c", "SET k v EX 1.5 PXAT 1",
		"EXPIRE k abc", "SELECT 1", "UNWATCH", "ECHO", "EXEC",
		"MULTI", "CLIENT NOSUCH", "INCR c", "EXEC",
		"MULTI", "CLIENT SETNAME", "EXEC",
		"MULTI", "CONFIG GET", "EXEC",
		"MULTI", "MEMORY PURGE x", "EXEC",
		"MULTI", "COMMAND COUNT x", "EXEC",
		"MULTI", "SAVE", "INCR c", "EXEC",
		"MULTI", "SHUTDOWN NOSAVE SAVE", "EXEC",
		"MULTI", "NOSUCH", "EXEC",
		"MULTI", "MULTI", "WATCH k", "INCR c", "EXEC",
		"MULTI", "INCR c", "EXEC x", "EXEC",
		"MULTI", "DISCARD x", "DISCARD", "DISCARD",
		// Outside MULTI, the handlers' own checks.
		"PING a b", "FLUSHALL a b", "AUTH a b c", "BGSAVE a b", "SHUTDOWN NOSAVE SAVE", "SHUTDOWN a",
		"COMMAND COUNT x", "COMMAND LIST x", "COMMAND NOSUCH", "CLIENT", "CONFIG", "MEMORY", "MEMORY NOSUCH",
		"COMMAND GETKEYS GET k", "COMMAND GETKEYS DEL a b c", "COMMAND GETKEYS GET a b", "COMMAND GETKEYS PING x",
		"COMMAND GETKEYS NOSUCH x", "COMMAND GETKEYS CLIENT NOSUCH", "COMMAND GETKEYS CLIENT SETNAME x",
		"COMMAND GETKEYS EXPIRE a", "COMMAND GETKEYS EXPIRE a b c d e", "COMMAND GETKEYS GET",
		"COMMAND INFO nosuch client|nosuch",
		// Integers as Redis reads them.
		"SET n 9223372036854775807", "INCR n", "DECRBY n -9223372036854775808", "SET n -9223372036854775808",
		"DECR n", "INCRBY n x", "INCRBY n 01", "SET n 01", "INCR n", "SET n +1", "INCR n", "SET n \" 1\"", "INCR n",
		"SET n 1", "INCRBY n 9223372036854775807", "DECRBY n 1", "SELECT 0", "SELECT 00", "SELECT -0",
	} {
		add(line)
	}
	return script
}

// startRedis starts redis-server 7 on a Unix socket in a temporary
// directory, without persistence, and returns a connection to it; the test
// is skipped, saying so, when no redis-server 7 is installed.
func startRedis(t *testing.T) net.Conn {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed: the comparison with Redis did not run")
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.Contains(string(out), " v=7.") {
		t.Skipf("the comparison needs redis-server 7, found %q (%v)", out, err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("unix", sock)
		if err == nil {
			conn.SetDeadline(time.Now().Add(60 * time.Second))
			t.Cleanup(func() { conn.Close() })
			return conn
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not start listening: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // waiting for a process to start, not for time to pass
	}
}
