package scripting

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// wellFormed checks that b is exactly one well-formed RESP2/RESP3 reply, of
// any depth (a script's reply may nest thousands of levels), with a counter
// of values still expected instead of recursion.
func wellFormed(b []byte) error {
	pending := 1
	for pending > 0 {
		if len(b) == 0 {
			return errors.New("truncated")
		}
		i := bytes.Index(b, []byte("\r\n"))
		if i < 1 {
			return fmt.Errorf("no line at %.20q", b)
		}
		t, line := b[0], string(b[1:i])
		b = b[i+2:]
		pending--
		switch t {
		case '+', '-', ':', ',', '#', '_', '(':
			if strings.ContainsAny(line, "\r\n") {
				return fmt.Errorf("line break in %q", line)
			}
		case '$', '=':
			n, err := strconv.Atoi(line)
			if err != nil || n < -1 || (n >= 0 && (len(b) < n+2 || string(b[n:n+2]) != "\r\n")) {
				return fmt.Errorf("bad bulk %q", line)
			}
			if n >= 0 {
				b = b[n+2:]
			}
		case '*', '~', '%':
			n, err := strconv.Atoi(line)
			if err != nil || n < -1 {
				return fmt.Errorf("bad length %q", line)
			}
			if t == '%' {
				n *= 2
			}
			pending += max(n, 0)
		default:
			return fmt.Errorf("type %q", t)
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%d bytes after the reply", len(b))
	}
	return nil
}

// FuzzParseReply feeds arbitrary bytes to the reply parser: it must never
// panic or read past its input, and whatever it accepts, converted back by
// the reply writer under both protocols, must be one well-formed reply.
func FuzzParseReply(f *testing.F) {
	for _, seed := range []string{":5\r\n", "$3\r\nabc\r\n", "$-1\r\n", "*-1\r\n", "*2\r\n:1\r\n$1\r\nx\r\n", "+OK\r\n",
		"-ERR bad\r\n", "_\r\n", "#t\r\n", ",3.5\r\n", ",inf\r\n", "(123\r\n", "%1\r\n$1\r\na\r\n:1\r\n",
		"~2\r\n$1\r\na\r\n$1\r\nb\r\n", "=7\r\ntxt:abc\r\n", "|1\r\n+k\r\n+v\r\n:7\r\n", "*3\r\n:1\r\n_\r\n:3\r\n",
		"*1\r\n*1\r\n*1\r\n:1\r\n", "%1\r\n*1\r\n:1\r\n:2\r\n", "*99999999\r\n"} {
		f.Add([]byte(seed))
	}
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	f.Fuzz(func(t *testing.T, data []byte) {
		v, _, err := parseReply(L, data, nil)
		if err != nil {
			if !errors.Is(err, errBadReply) {
				t.Fatalf("%q: unexpected error %v", data, err)
			}
			return
		}
		for _, proto := range []int{2, 3} {
			for _, scriptResp := range []int{2, 3} {
				w := replyWriter{proto: proto, scriptResp: scriptResp, maxDepth: replyMaxDepth, limit: 1 << 20}
				out, err := w.write(nil, v, 0)
				if err != nil {
					continue // larger than the limit
				}
				if err := wellFormed(out); err != nil {
					t.Fatalf("%q parsed, then written under RESP%d as %.200q: %v", data, proto, out, err)
				}
			}
		}
	})
}

// FuzzLuaReply runs "return <expression>" for arbitrary expressions: any
// value a script can return must convert into one well-formed reply, under
// both protocols, or a Redis error; the engine must never panic.
func FuzzLuaReply(f *testing.F) {
	for _, seed := range []string{"1", "{1, nil, 2}", "{err='x\\r\\ny'}", "{ok=1}", "{double=0/0}", "{map={a={1,{b=2}}}}",
		"{set={[1]=true, x=true}}", "{big_number='1\\r\\n'}", "{verbatim_string={format='\\0', string='x'}}",
		"setmetatable({}, {__index=function() return 1 end})", "coroutine.create(function() end)", "redis",
		"{KEYS, ARGV}", "string.rep('\\r\\n', 3)", "{{{{{}}}}}", "(function() local a = {} a[1] = a return a end)()",
		"{redis.call('get', 'k')}", "redis.pcall('nosuch')", "-0.0", "2^63", "{true, false, nil}"} {
		f.Add(seed, 2)
	}
	e := New(Options{})
	f.Fuzz(func(t *testing.T, expr string, proto int) {
		if proto != 3 {
			proto = 2
		}
		s, err := NewCache(CacheLimits{}).Load([]byte("return " + expr))
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		out, err := e.Run(ctx, s, bytesOf([]string{"k"}), bytesOf([]string{"a"}), proto, newFakeRedis(time.Now()).Call, false, nil)
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("SLOW %v: %.300q", d, expr)
		}
		var se *Error
		switch {
		case err == nil:
			if err := wellFormed(out); err != nil {
				t.Fatalf("return %s: reply %.200q: %v", expr, out, err)
			}
		case errors.As(err, &se):
			if strings.ContainsAny(se.Text, "\r\n") {
				t.Fatalf("return %s: error text %q has a line break", expr, se.Text)
			}
		case errors.Is(err, context.DeadlineExceeded):
		default:
			t.Fatalf("return %s: %v", expr, err)
		}
	})
}

// FuzzPatterns runs the pattern functions on arbitrary subjects and
// patterns: errors are Lua errors, never Go runtime errors, and a slow
// match is stopped by the run's context.
func FuzzPatterns(f *testing.F) {
	for _, seed := range [][2]string{{"hello world", "o w"}, {"key=val", "(%w+)=(%w+)"}, {"(a(b)c)", "%b()"},
		{"THE (quick) fox", "%f[%a]%a+"}, {"abcabc", "(a)(b)%2"}, {"", "()"}, {"aaa", "a-b"}, {"x", "%"}, {"x", "[a"},
		{"]]", "[]]"}, {"a.b", "%."}, {"abab", "^(ab)%1$"}, {"a", "(()"}, {"aaaaaaaaaaaaaaaaaaaaaaaa", ".-.-.-.-b"}} {
		f.Add(seed[0], seed[1])
	}
	e := New(Options{})
	s := mustLoad(f, patternProbe)
	f.Fuzz(func(t *testing.T, subject, pattern string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		out, err := e.Run(ctx, s, nil, bytesOf([]string{subject, pattern}), 2, nil, false, nil)
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("SLOW %v: %q %q", d, subject, pattern)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return
		}
		if err != nil {
			t.Fatalf("%q %q: %v", subject, pattern, err)
		}
		if strings.Contains(string(out), "runtime error") {
			t.Fatalf("%q %q: a Go runtime error: %.300q", subject, pattern, out)
		}
	})
}
