package scripting

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestStringBuildersAreBounded: the library functions that can build a long
// string in one uninterruptible Go call refuse past MaxStringBytes.
func TestStringBuildersAreBounded(t *testing.T) {
	e := New(Options{Limits: Limits{MaxStringBytes: 1000, MaxReplyBytes: 1 << 20}})
	for _, src := range []string{
		"return string.rep('x', 1001)",
		"return string.rep('xy', 501)",
		"return string.rep('x', 2^40)",
		"local s = string.rep('x', 500) return s:rep(3)",
		"return (string.gsub(string.rep('a', 100), 'a', string.rep('b', 20)))",
		"return (string.gsub(string.rep('a', 100), 'a', function() return string.rep('b', 20) end))",
		"return (string.gsub(string.rep('a', 500), '(a)', '%1%1%1'))",
		"local t = {} for i = 1, 200 do t[i] = 'abcdefgh' end return table.concat(t)",
		"local t = {} for i = 1, 200 do t[i] = 'x' end return table.concat(t, string.rep('-', 10))",
		"local s = string.rep('x', 900) return string.format('%s%s', s, s)",
		"local s = string.rep('x', 100) local t = {} for i = 1, 50 do t[i] = s end return cjson.encode(t)",
	} {
		got := runOn(t, e, newFakeRedis(time.Now()), src, 2)
		if !strings.Contains(got, "resulting string too large (more than 1000 bytes)") {
			t.Errorf("%s: %.120q", src, got)
		}
	}
	for _, src := range []string{
		"return #string.rep('x', 1000)",
		"return #string.format('%99d', 1)",
		"local s = string.rep('x', 100) local t = {} for i = 1, 5 do t[i] = s end return #cjson.encode(t)",
	} {
		if got := runOn(t, e, newFakeRedis(time.Now()), src, 2); !strings.HasPrefix(got, ":") {
			t.Errorf("%s: %q", src, got)
		}
	}
	if got := runOn(t, e, newFakeRedis(time.Now()), "return string.format('%100d', 1)", 2); !strings.Contains(got, "invalid format (width or precision too long)") {
		t.Errorf("width 100: %q", got)
	}
}

// TestReplyIsBounded: a reply over MaxReplyBytes is an error, not bytes
// appended.
func TestReplyIsBounded(t *testing.T) {
	e := New(Options{Limits: Limits{MaxReplyBytes: 1000}})
	for _, src := range []string{
		"return string.rep('x', 1001)",
		"local t = {} for i = 1, 1000 do t[i] = i end return t",
		"local t = {} for i = 1, 100 do t[i] = string.rep('x', 20) end return t",
	} {
		out, err := e.Run(context.Background(), mustLoad(t, src), nil, nil, 2, nil, false, []byte("keep"))
		if err == nil || err.Error() != "ERR the script's reply exceeds 1000 bytes" || string(out) != "keep" {
			t.Errorf("%s: %q %v", src, out, err)
		}
	}
	if out, err := e.Run(context.Background(), mustLoad(t, "return string.rep('x', 900)"), nil, nil, 2, nil, false, nil); err != nil || len(out) != 908 {
		t.Errorf("900 bytes: %d %v", len(out), err)
	}
}

// TestLargeBuffersAreNotKeptIdle: a run that passed large arguments or
// replies does not leave them allocated in the pooled state.
func TestLargeBuffersAreNotKeptIdle(t *testing.T) {
	e := New(Options{MaxIdleStates: 1})
	f := newFakeRedis(time.Now())
	src := "redis.call('set', 'k', string.rep('x', 1000000)) return #redis.call('get', 'k')"
	if out, err := e.Run(context.Background(), mustLoad(t, src), nil, nil, 2, f.Call, false, nil); err != nil || string(out) != ":1000000\r\n" {
		t.Fatalf("%q %v", out, err)
	}
	st := e.getState()
	if cap(st.run.argBuf) > 64<<10 || cap(st.run.replyBuf) > 64<<10 {
		t.Errorf("idle state keeps %d argument and %d reply bytes", cap(st.run.argBuf), cap(st.run.replyBuf))
	}
}
