package values

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/testskip"
)

// TestMain reports, even in a plain go test run, a differential test
// skipped for want of redis-server.
func TestMain(m *testing.M) {
	code := m.Run()
	testskip.Report(code)
	os.Exit(code)
}

// Differential tests: random command sequences sent to a real
// redis-server 7.0 and applied through this package by a small command
// layer (below), replies and whole values compared after every command.
// The sequences keep hashes and sorted sets small (at most 128 elements of
// at most 64 bytes), where Redis keeps them as listpacks: hash fields
// then come back in first-added order, as Hash keeps them, and -0 is
// stored as 0, as ZSet stores it. Skipped, saying so, without
// redis-server 7.0.

const (
	diffSequences = 200
	diffSteps     = 60
)

// startRedis starts a redis-server 7.0 on a Unix socket in a temporary
// directory and returns a RESP2 client; both stop when the test ends.
func startRedis(t *testing.T) *redis.Client {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		testskip.Skip(t, "redis-server 7.0", "apt-get install redis-server")
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil || !strings.Contains(string(out), "v=7.0.") {
		// The expectations are 7.0's: other versions word and format replies differently.
		testskip.Skip(t, "redis-server 7.0", fmt.Sprintf("found %q; Debian bookworm's redis-server is 7.0", bytes.TrimSpace(out)))
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(path, "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: sock, Protocol: 2, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not start within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c
}

// render writes a reply as go-redis returns it, one way for both sides.
func render(v any, err error) string {
	switch {
	case errors.Is(err, redis.Nil):
		return "(nil)"
	case err != nil:
		return "(error) " + err.Error()
	}
	switch v := v.(type) {
	case int64:
		return fmt.Sprintf("(integer) %d", v)
	case string:
		return strconv.Quote(v)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = render(x, nil)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case nil:
		return "(nil)"
	}
	return fmt.Sprintf("(unexpected %T %v)", v, v)
}

// errReply is a reply error as the protocol layer words it.
type errReply struct{ msg string }

func (e errReply) Error() string { return e.msg }

func replyErr(err error) error {
	var le *LimitError
	if errors.As(err, &le) {
		return err
	}
	return errReply{"ERR " + err.Error()}
}

var errNoSuchKey = valueError("no such key")

// diffDB is the command layer over this package: one key of each type.
type diffDB struct {
	h *Hash
	l *List
	z *ZSet
}

func strs(bs [][]byte) []any {
	out := make([]any, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

func ints(args []string, at ...int) []int {
	out := make([]int, len(at))
	for i, a := range at {
		n, err := strconv.Atoi(args[a])
		if err != nil {
			panic(err)
		}
		out[i] = n
	}
	return out
}

func (db *diffDB) hash(args []string) (any, error) {
	h := db.h
	if h == nil {
		h = NewHash()
	}
	defer func() {
		if h.Len() > 0 {
			db.h = h
		} else {
			db.h = nil
		}
	}()
	a := bs(args...)
	switch args[0] {
	case "HSET":
		n, err := h.Set(Limits{}, a[2:])
		return int64(n), err
	case "HSETNX":
		ok, err := h.SetNX(Limits{}, a[2], a[3])
		return int64(boolInt(ok)), err
	case "HGET":
		if v, ok := h.Get(a[2]); ok {
			return string(v), nil
		}
		return nil, redis.Nil
	case "HMGET":
		var out []any
		for _, f := range a[2:] {
			if v, ok := h.Get(f); ok {
				out = append(out, string(v))
			} else {
				out = append(out, nil)
			}
		}
		return out, nil
	case "HDEL":
		return int64(h.Del(a[2:]...)), nil
	case "HEXISTS":
		return int64(boolInt(h.Exists(a[2]))), nil
	case "HLEN":
		return int64(h.Len()), nil
	case "HINCRBY":
		incr, _ := strconv.ParseInt(args[3], 10, 64)
		return h.IncrBy(Limits{}, a[2], incr)
	case "HINCRBYFLOAT":
		incr, err := ParseFloatIncrement(a[3])
		if err != nil {
			return nil, err
		}
		v, err := h.IncrByFloat(Limits{}, a[2], incr)
		return string(v), err
	case "HGETALL", "HKEYS", "HVALS":
		out := []any{}
		for f, v := range h.All() {
			if args[0] != "HVALS" {
				out = append(out, f)
			}
			if args[0] != "HKEYS" {
				out = append(out, string(v))
			}
		}
		return out, nil
	}
	panic(args[0])
}

func (db *diffDB) list(args []string) (any, error) {
	l := db.l
	missing := l == nil
	if missing {
		l = NewList()
	}
	defer func() {
		if l.Len() > 0 {
			db.l = l
		} else {
			db.l = nil
		}
	}()
	a := bs(args...)
	switch args[0] {
	case "LPUSH":
		n, err := l.PushLeft(Limits{}, a[2:]...)
		return int64(n), err
	case "RPUSH":
		n, err := l.PushRight(Limits{}, a[2:]...)
		return int64(n), err
	case "LPOP", "RPOP":
		if len(args) == 2 {
			pop := l.PopLeft
			if args[0] == "RPOP" {
				pop = l.PopRight
			}
			if e, ok := pop(); ok {
				return string(e), nil
			}
			return nil, redis.Nil
		}
		if missing {
			return nil, redis.Nil
		}
		n := ints(args, 2)[0]
		if args[0] == "LPOP" {
			return strs(l.AppendPopLeft([][]byte{}, n)), nil
		}
		return strs(l.AppendPopRight([][]byte{}, n)), nil
	case "LINDEX":
		if e, ok := l.Index(ints(args, 2)[0]); ok {
			return string(e), nil
		}
		return nil, redis.Nil
	case "LRANGE":
		i := ints(args, 2, 3)
		return strs(l.AppendRange([][]byte{}, i[0], i[1])), nil
	case "LTRIM":
		i := ints(args, 2, 3)
		l.Trim(i[0], i[1])
		return "OK", nil
	case "LLEN":
		return int64(l.Len()), nil
	case "LREM":
		return int64(l.Rem(ints(args, 2)[0], a[3])), nil
	case "LSET":
		if missing {
			return nil, errNoSuchKey
		}
		if err := l.Set(Limits{}, ints(args, 2)[0], a[3]); err != nil {
			return nil, err
		}
		return "OK", nil
	}
	panic(args[0])
}

func scoredReply(ms []ScoredMember, withScores bool) []any {
	out := []any{}
	for _, m := range ms {
		out = append(out, m.Member)
		if withScores {
			out = append(out, string(AppendScore(nil, m.Score)))
		}
	}
	return out
}

func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if strings.EqualFold(a, flag) {
			return true
		}
	}
	return false
}

func (db *diffDB) zset(args []string) (any, error) {
	z := db.z
	if z == nil {
		z = NewZSet()
	}
	defer func() {
		if z.Card() > 0 {
			db.z = z
		} else {
			db.z = nil
		}
	}()
	a := bs(args...)
	switch args[0] {
	case "ZADD":
		var o ZAddOptions
		i := 2
	flags:
		for ; i < len(args); i++ {
			switch args[i] {
			case "NX":
				o.NX = true
			case "XX":
				o.XX = true
			case "GT":
				o.GT = true
			case "LT":
				o.LT = true
			case "CH":
				o.CH = true
			case "INCR":
				o.Incr = true
			default:
				break flags
			}
		}
		res, err := z.Add(Limits{}, o, a[i:])
		switch {
		case err != nil:
			return nil, err
		case !o.Incr:
			return int64(res.Count(o)), nil
		case res.Done:
			return string(AppendScore(nil, res.Score)), nil
		}
		return nil, redis.Nil
	case "ZINCRBY":
		incr, err := ParseScore(a[2])
		if err != nil {
			return nil, err
		}
		s, err := z.IncrBy(Limits{}, incr, a[3])
		return string(AppendScore(nil, s)), err
	case "ZREM":
		return int64(z.Rem(a[2:]...)), nil
	case "ZSCORE":
		if s, ok := z.Score(a[2]); ok {
			return string(AppendScore(nil, s)), nil
		}
		return nil, redis.Nil
	case "ZCARD":
		return int64(z.Card()), nil
	case "ZRANGE":
		i := ints(args, 2, 3)
		return scoredReply(z.AppendRangeByRank(nil, i[0], i[1], hasFlag(args, "REV")), hasFlag(args, "WITHSCORES")), nil
	case "ZCOUNT", "ZRANGEBYSCORE", "ZREVRANGEBYSCORE", "ZREMRANGEBYSCORE":
		lo, hi := a[2], a[3]
		if args[0] == "ZREVRANGEBYSCORE" {
			lo, hi = hi, lo
		}
		r, err := ParseScoreRange(lo, hi)
		if err != nil {
			return nil, err
		}
		switch args[0] {
		case "ZCOUNT":
			return int64(z.Count(r)), nil
		case "ZREMRANGEBYSCORE":
			return int64(z.RemRangeByScore(r)), nil
		}
		offset, count := 0, -1
		if n := len(args); args[n-3] == "LIMIT" {
			offset, count = ints(args, n-2)[0], ints(args, n-1)[0]
		}
		ms := z.AppendRangeByScore(nil, r, args[0] == "ZREVRANGEBYSCORE", offset, count)
		return scoredReply(ms, hasFlag(args, "WITHSCORES")), nil
	case "ZREMRANGEBYRANK":
		i := ints(args, 2, 3)
		return int64(z.RemRangeByRank(i[0], i[1])), nil
	}
	panic(args[0])
}

// runDiff drives sequences of commands from gen through both sides.
func runDiff(t *testing.T, stream uint64, gen func(r *rand.Rand) []string, apply func(db *diffDB, args []string) (any, error), dump []string) {
	c := startRedis(t)
	ctx := context.Background()
	for seq := range uint64(diffSequences) {
		r := rand.New(rand.NewPCG(seq, stream))
		if err := c.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		db := &diffDB{}
		var history []string
		check := func(args []string) {
			history = append(history, strings.Join(args, " "))
			cargs := make([]any, len(args))
			for i, a := range args {
				cargs[i] = a
			}
			want := render(c.Do(ctx, cargs...).Result())
			v, err := apply(db, args)
			if err != nil && !errors.Is(err, redis.Nil) {
				err = replyErr(err)
			}
			if got := render(v, err); got != want {
				t.Fatalf("sequence %d: after\n  %s\nrlserver %s\nredis    %s", seq, strings.Join(history, "\n  "), got, want)
			}
		}
		for range diffSteps {
			check(gen(r))
			check(dump)
		}
	}
}

var (
	diffFields = []string{"a", "b", "c", "d", "", "f1", "field-two"}
	diffValues = []string{"", "x", "1", "-5", "9223372036854775806", "-9223372036854775807", "05", "abc", "0", "-0",
		"10", "1.5", "0.1", " 1", "1e3", "0x10", "inf", strings.Repeat("v", 64)}
	diffFloatIncrs = []string{"0.1", "-0.25", "1e3", "2.5", "-3", "1.5e-7", "10.5", "0x10", "abc", "inf", "-0", "1e20",
		"0.000003814697265625", "123456789.123456789", "3"}
)

func TestHashAgainstRedis(t *testing.T) {
	runDiff(t, 11, func(r *rand.Rand) []string {
		f, v := pick(r, diffFields), pick(r, diffValues)
		switch r.IntN(12) {
		case 0, 1:
			return []string{"HSET", "h", f, v, pick(r, diffFields), pick(r, diffValues)}
		case 2:
			return []string{"HSETNX", "h", f, v}
		case 3:
			return []string{"HGET", "h", f}
		case 4:
			return []string{"HMGET", "h", f, pick(r, diffFields)}
		case 5:
			return []string{"HDEL", "h", f, pick(r, diffFields), f}
		case 6:
			return []string{"HEXISTS", "h", f}
		case 7:
			return []string{"HINCRBY", "h", f, pick(r, []string{"1", "-1", "7", "9223372036854775807", "-9223372036854775808", "0"})}
		case 8, 9:
			return []string{"HINCRBYFLOAT", "h", f, pick(r, diffFloatIncrs)}
		case 10:
			return []string{"HKEYS", "h"}
		default:
			return []string{"HVALS", "h"}
		}
	}, (*diffDB).hash, []string{"HGETALL", "h"})
}

func TestListAgainstRedis(t *testing.T) {
	elems := []string{"a", "b", "c", "", "1796021453.2227824", strings.Repeat("long", 30)}
	idx := func(r *rand.Rand) string { return strconv.Itoa(r.IntN(15) - 7) }
	runDiff(t, 12, func(r *rand.Rand) []string {
		e := pick(r, elems)
		switch r.IntN(11) {
		case 0, 1:
			return []string{"LPUSH", "l", e, pick(r, elems)}
		case 2, 3:
			return []string{"RPUSH", "l", e, pick(r, elems), pick(r, elems)}
		case 4:
			return []string{pick(r, []string{"LPOP", "RPOP"}), "l"}
		case 5:
			return []string{pick(r, []string{"LPOP", "RPOP"}), "l", strconv.Itoa(r.IntN(4))}
		case 6:
			return []string{"LINDEX", "l", idx(r)}
		case 7:
			return []string{"LRANGE", "l", idx(r), idx(r)}
		case 8:
			return []string{"LTRIM", "l", idx(r), idx(r)}
		case 9:
			return []string{"LREM", "l", strconv.Itoa(r.IntN(7) - 3), e}
		default:
			return []string{"LSET", "l", idx(r), e}
		}
	}, (*diffDB).list, []string{"LRANGE", "l", "0", "-1"})
}

var (
	diffMembers = []string{"a", "b", "c", "d", "e", "", "m-long-member-name"}
	diffScores  = []string{"1", "2", "-1", "0", "-0", "1.5", "0.1", "inf", "-inf", "+inf", "1e-5", "123456789012345678",
		"1796021406436562", "0x10", "3.0000000000000001", "1e308", "-1e308", "abc", "nan", " 1"}
	diffBounds = []string{"-inf", "+inf", "(1", "1", "(0", "0", "2", "(2.5", "1.5", "", "(", "abc", "(-inf", "1e400", " 1",
		"(inf", "-0", "0.1"}
)

func TestZSetAgainstRedis(t *testing.T) {
	idx := func(r *rand.Rand) string { return strconv.Itoa(r.IntN(15) - 7) }
	limit := func(r *rand.Rand, args []string) []string {
		if r.IntN(2) == 0 {
			args = append(args, "WITHSCORES")
		}
		if r.IntN(2) == 0 {
			args = append(args, "LIMIT", strconv.Itoa(r.IntN(5)-1), strconv.Itoa(r.IntN(5)-1))
		}
		return args
	}
	runDiff(t, 13, func(r *rand.Rand) []string {
		m := pick(r, diffMembers)
		switch r.IntN(12) {
		case 0, 1, 2:
			args := []string{"ZADD", "z"}
			for _, f := range []string{"NX", "XX", "GT", "LT", "CH", "INCR"} {
				if r.IntN(6) == 0 {
					args = append(args, f)
				}
			}
			for range 1 + r.IntN(3) {
				args = append(args, pick(r, diffScores[:17]), pick(r, diffMembers))
			}
			if r.IntN(10) == 0 {
				args[len(args)-2] = pick(r, diffScores)
			}
			return args
		case 3:
			return []string{"ZINCRBY", "z", pick(r, diffScores), m}
		case 4:
			return []string{"ZREM", "z", m, pick(r, diffMembers)}
		case 5:
			return []string{"ZSCORE", "z", m}
		case 6:
			return []string{"ZCOUNT", "z", pick(r, diffBounds), pick(r, diffBounds)}
		case 7:
			args := []string{"ZRANGE", "z", idx(r), idx(r)}
			if r.IntN(2) == 0 {
				args = append(args, "REV")
			}
			if r.IntN(2) == 0 {
				args = append(args, "WITHSCORES")
			}
			return args
		case 8:
			return limit(r, []string{"ZRANGEBYSCORE", "z", pick(r, diffBounds), pick(r, diffBounds)})
		case 9:
			return limit(r, []string{"ZREVRANGEBYSCORE", "z", pick(r, diffBounds), pick(r, diffBounds)})
		case 10:
			return []string{"ZREMRANGEBYSCORE", "z", pick(r, diffBounds), pick(r, diffBounds)}
		default:
			return []string{"ZREMRANGEBYRANK", "z", idx(r), idx(r)}
		}
	}, (*diffDB).zset, []string{"ZRANGE", "z", "0", "-1", "WITHSCORES"})
}
