package scripting

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// runAsync starts a script and returns a channel with its outcome.
func runAsync(e *Engine, ctx context.Context, s *Script, call Caller) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, s, nil, nil, 2, call, false, nil)
		done <- err
	}()
	return done
}

func waitDone(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the script did not stop within 10 s")
		return nil
	}
}

// TestKillStopsRunawayScript walks the time limit with an injected clock:
// within the limit a runaway script is not busy and SCRIPT KILL finds
// nothing; past it, it is busy and SCRIPT KILL stops it.
func TestKillStopsRunawayScript(t *testing.T) {
	for _, src := range []string{
		"while true do end",
		// pcall catches the kill's error; the next instruction raises it again.
		"local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end",
		"local co = coroutine.wrap(function() while true do end end) co()",
		"while true do pcall(string.rep, 'x', 10) end",
	} {
		t.Run(src, func(t *testing.T) {
			clock := newTestClock()
			e := New(Options{Now: clock.Now, TimeLimit: 5 * time.Second})
			s := mustLoad(t, src)
			start := clock.Now()
			done := runAsync(e, context.Background(), s, newFakeRedis(start).Call)
			waitRunning(t, e)

			clock.Advance(5*time.Second - time.Millisecond)
			if _, busy := e.Busy(); busy {
				t.Fatal("busy before the time limit")
			}
			if err := e.Kill(); err != ErrNotBusy {
				t.Fatalf("Kill within the limit: %v, want ErrNotBusy", err)
			}
			clock.Advance(time.Millisecond)
			b, busy := e.Busy()
			if !busy || !b.Since.Equal(start) || b.Written || b.SHA != s.SHA() {
				t.Fatalf("Busy() = %+v, %v; want busy since %v, not written", b, busy, start)
			}
			if err := e.Kill(); err != nil {
				t.Fatalf("Kill: %v", err)
			}
			err := waitDone(t, done)
			var se *Error
			if !errors.As(err, &se) || !strings.HasPrefix(se.Text, "ERR Script killed by user with SCRIPT KILL... script: "+s.SHA()+", on @user_script:") {
				t.Fatalf("killed script returned %v", err)
			}
			if _, busy := e.Busy(); busy || e.Kill() != ErrNotBusy {
				t.Fatal("still busy after the script was killed")
			}
		})
	}
}

// TestKillWithRealTimeLimit uses the real clock: after a 20 ms limit the
// script is reported busy, and Kill stops it.
func TestKillWithRealTimeLimit(t *testing.T) {
	e := New(Options{TimeLimit: 20 * time.Millisecond})
	done := runAsync(e, context.Background(), mustLoad(t, "while true do end"), newFakeRedis(time.Now()).Call)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, busy := e.Busy(); busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not busy 10 s after a 20 ms limit")
		}
	}
	if err := e.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := waitDone(t, done); err == nil || !strings.Contains(err.Error(), "Script killed") {
		t.Fatalf("got %v", err)
	}
}

// TestScriptThatWroteIsUnkillable: SCRIPT KILL refuses a script that has
// written, and only cancelling Run's context (SHUTDOWN NOSAVE) stops it.
func TestScriptThatWroteIsUnkillable(t *testing.T) {
	clock := newTestClock()
	e := New(Options{Now: clock.Now})
	f := newFakeRedis(clock.Now())
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(e, ctx, mustLoad(t, "redis.call('set', 'x', 'y') while true do end"), f.Call)
	waitRunning(t, e)
	clock.Advance(DefaultTimeLimit)
	for { // the script may not have reached its write yet
		b, _ := e.Busy()
		if b.Written {
			break
		}
		runtime.Gosched()
	}
	if err := e.Kill(); err != ErrUnkillable {
		t.Fatalf("Kill of a script that wrote: %v, want ErrUnkillable", err)
	}
	cancel()
	err := waitDone(t, done)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled script returned %v", err)
	}
	if f.strings["x"] != "y" {
		t.Fatal("the write was lost")
	}
}

// TestKillWaitsForAWriteInProgress: a SCRIPT KILL that arrives while the
// script's first write is being executed must not report the script killed:
// it waits for the command and then refuses, the script having written.
func TestKillWaitsForAWriteInProgress(t *testing.T) {
	clock := newTestClock()
	e := New(Options{Now: clock.Now})
	inWrite, release := make(chan struct{}), make(chan struct{})
	call := func(args [][]byte, proto int, ro bool, out []byte) ([]byte, bool, error) {
		close(inWrite)
		<-release
		return append(out, "+OK\r\n"...), true, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(e, ctx, mustLoad(t, "redis.call('set', 'x', 'y') while true do end"), call)
	<-inWrite
	clock.Advance(DefaultTimeLimit)
	killed := make(chan error, 1)
	go func() { killed <- e.Kill() }()
	// Give a Kill that does not wait for the write time to return wrongly.
	select {
	case err := <-killed:
		t.Fatalf("Kill returned %v while the write was in progress", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-killed; err != ErrUnkillable {
		t.Fatalf("Kill after the write: %v, want ErrUnkillable", err)
	}
	cancel()
	if err := waitDone(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

// TestNeverBusyWithoutTimeLimit: a negative limit (Redis's lua-time-limit 0)
// never reports busy.
func TestNeverBusyWithoutTimeLimit(t *testing.T) {
	clock := newTestClock()
	e := New(Options{Now: clock.Now, TimeLimit: -1})
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(e, ctx, mustLoad(t, "while true do end"), newFakeRedis(clock.Now()).Call)
	waitRunning(t, e)
	clock.Advance(time.Hour)
	if _, busy := e.Busy(); busy || e.Kill() != ErrNotBusy {
		t.Error("busy without a time limit")
	}
	cancel()
	if err := waitDone(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

// TestRunHonoursCancelledContext: a context cancelled before Run runs
// nothing.
func TestRunHonoursCancelledContext(t *testing.T) {
	e := New(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := newFakeRedis(time.Now())
	if _, err := e.Run(ctx, mustLoad(t, "redis.call('set','x','y')"), nil, nil, 2, f.Call, false, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if len(f.calls) != 0 {
		t.Fatal("a command ran under a cancelled context")
	}
}

// TestPooledStateIsCleanForTheNextScript: with one pooled state, nothing one
// script does is visible to the next.
func TestPooledStateIsCleanForTheNextScript(t *testing.T) {
	e := New(Options{MaxIdleStates: 1})
	f := newFakeRedis(time.Now())
	run := func(src string, keys ...string) string {
		t.Helper()
		out, err := e.Run(context.Background(), mustLoad(t, src), bytesOf(keys), nil, 2, f.Call, false, nil)
		if err != nil {
			return "error: " + err.Error()
		}
		return string(out)
	}
	first := e.getState()
	e.putState(first)
	for _, attempt := range []string{
		"x = 1", "rawset(_G, 'x', 1)", "string.x = 1", "redis.call = nil", "setmetatable(1, {__index = function() return 'hijacked' end})",
		"getmetatable('').__index = {}", "setmetatable(_G, {__index = function() return 1 end})", "redis.setresp(3)",
		"KEYS[1] = 'changed'; KEYS.extra = 1", "math.x = 1", "local t = getmetatable(_G); t.__newindex = nil",
		"KEYS[1] = 'changed'", "KEYS[2] = 'added'", "table.insert(KEYS, 'x')", "KEYS[5] = 'gap'", "setmetatable(KEYS, {__index = function() return 'meta' end})",
		"rawset(ARGV, 'x', 1)", "KEYS[1] = nil",
	} {
		run(attempt, "k1")
	}
	check := "return {rawget(_G, 'x') == nil, string.x == nil, type(redis.call), #KEYS, KEYS[1], KEYS.extra == nil, KEYS[2] == nil, KEYS[5] == nil, getmetatable(KEYS) == nil, #ARGV, ARGV.x == nil}"
	want := "*11\r\n:1\r\n:1\r\n$8\r\nfunction\r\n:1\r\n$2\r\nk2\r\n:1\r\n:1\r\n:1\r\n:1\r\n:0\r\n:1\r\n"
	for _, attempt := range []string{"KEYS.extra = 1", "KEYS[2] = 'added'", "table.insert(KEYS, 'x')", "KEYS[5] = 'gap'",
		"setmetatable(KEYS, {__index = function() return 'meta' end})", "rawset(ARGV, 'x', 1)", "KEYS[1] = nil", "return 1"} {
		run(attempt, "k1")
		if got := run(check, "k2"); got != want {
			t.Errorf("after %s: state leaked: %q", attempt, got)
		}
	}
	if got := run("local ok = pcall(function() return (5).x end) return ok"); got != "$-1\r\n" {
		t.Errorf("a number metatable survived: %q", got)
	}
	if got := run("return true"); got != ":1\r\n" {
		t.Errorf("redis.setresp(3) survived: %q", got)
	}
	if st := e.getState(); st != first {
		t.Error("the state was not reused")
	}
}

// TestCoroutinesLeaveNothingBehind: a run that leaves coroutines suspended
// leaks neither goroutines nor context registrations.
func TestCoroutinesLeaveNothingBehind(t *testing.T) {
	e := New(Options{MaxIdleStates: 1})
	s := mustLoad(t, "for i = 1, 100 do local co = coroutine.create(function() coroutine.yield(1) end) coroutine.resume(co) end return 1")
	before := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		if _, err := e.Run(context.Background(), s, nil, nil, 2, newFakeRedis(time.Now()).Call, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("goroutines %d → %d", before, after)
	}
	many := mustLoad(t, "for i = 1, 2000 do coroutine.wrap(function() end)() end")
	if _, err := e.Run(context.Background(), many, nil, nil, 2, newFakeRedis(time.Now()).Call, false, nil); err == nil || !strings.Contains(err.Error(), "too many coroutines") {
		t.Errorf("2000 coroutines: %v", err)
	}
}

// TestCallerPanicIsAnInternalError: a panicking Caller is a server bug; Run
// reports it as a Go error (not a script error), even if the script catches
// the failure with pcall, and the state stays usable.
func TestCallerPanicIsAnInternalError(t *testing.T) {
	e := New(Options{MaxIdleStates: 1})
	call := func(args [][]byte, proto int, ro bool, out []byte) ([]byte, bool, error) { panic("boom") }
	for _, src := range []string{"return redis.call('get', 'x')", "pcall(redis.call, 'get', 'x') return 1"} {
		_, err := e.Run(context.Background(), mustLoad(t, src), nil, nil, 2, call, false, nil)
		var se *Error
		if err == nil || errors.As(err, &se) || !strings.Contains(err.Error(), "panicked") {
			t.Errorf("%s: %v", src, err)
		}
	}
	if out, err := e.Run(context.Background(), mustLoad(t, "return 1"), nil, nil, 2, call, false, nil); err != nil || string(out) != ":1\r\n" {
		t.Fatalf("after a panic: %q %v", out, err)
	}
}

// TestReadOnlyIsPassedToTheCaller: EVAL_RO and a no-writes shebang tell the
// Caller to refuse writes; a shebang without no-writes cannot run as _RO.
func TestReadOnlyIsPassedToTheCaller(t *testing.T) {
	e := New(Options{})
	f := newFakeRedis(time.Now())
	for _, c := range []struct {
		src  string
		ro   bool
		want string
	}{
		{"return redis.pcall('set', 'a', 'b')", true, "-ERR Write commands are not allowed from read-only scripts.\r\n"},
		{"return redis.pcall('set', 'a', 'b')", false, "+OK\r\n"},
		{"#!lua flags=no-writes\nreturn redis.pcall('set', 'a', 'b')", false, "-ERR Write commands are not allowed from read-only scripts.\r\n"},
		{"#!lua flags=no-writes\nreturn redis.pcall('get', 'a')", true, "$1\r\nb\r\n"},
		{"#!lua\nreturn 1", true, "-" + ErrWriteScriptReadOnly.Text + "\r\n"},
	} {
		out, err := e.Run(context.Background(), mustLoad(t, c.src), nil, nil, 2, f.Call, c.ro, nil)
		if err != nil {
			out = appendErrorReply(nil, err.Error())
		}
		if string(out) != c.want {
			t.Errorf("%q ro=%v: %q, want %q", c.src, c.ro, out, c.want)
		}
	}
}

// TestRunAppendsAndKeepsDstOnError: the reply is appended to dst; an error
// leaves dst as it was.
func TestRunAppendsAndKeepsDstOnError(t *testing.T) {
	e := New(Options{})
	dst := []byte("+previous\r\n")
	out, err := e.Run(context.Background(), mustLoad(t, "return 'x'"), nil, nil, 2, nil, false, dst)
	if err != nil || string(out) != "+previous\r\n$1\r\nx\r\n" {
		t.Fatalf("%q %v", out, err)
	}
	out, err = e.Run(context.Background(), mustLoad(t, "error('x')"), nil, nil, 2, nil, false, dst)
	if err == nil || string(out) != "+previous\r\n" {
		t.Fatalf("%q %v", out, err)
	}
	if _, err := e.Run(context.Background(), mustLoad(t, "return 1"), nil, nil, 4, nil, false, nil); err == nil {
		t.Fatal("protocol 4 accepted")
	}
}

// TestArgsAreFreshEachRun: the KEYS and ARGV tables and their strings are
// reused from run to run; each run sees exactly its own arguments whatever
// the runs before it were given or did to the tables.
func TestArgsAreFreshEachRun(t *testing.T) {
	e := New(Options{MaxIdleStates: 1})
	f := newFakeRedis(time.Now())
	long := strings.Repeat("x", maxKeptArgBytes+1)
	many := make([]string, maxKeptArgs+3)
	for i := range many {
		many[i] = strconv.Itoa(i)
	}
	show := mustLoad(t, "return {#KEYS, #ARGV, table.concat(KEYS, ','), table.concat(ARGV, ',')}")
	for _, tc := range []struct {
		keys, argv []string
		before     string // a script run first with the same arguments
	}{
		{keys: []string{"k0", long, "k00"}, argv: []string{long, "1"}}, // a long item before any is kept
		{keys: []string{"k1"}, argv: []string{"1", "3600"}},
		{keys: []string{"k2"}, argv: []string{"1", "3600"}},
		{keys: []string{"k2"}, argv: []string{"2", "3600", "extra"}},
		{keys: nil, argv: []string{"2"}},
		{keys: []string{"k3"}, argv: []string{"1", "3600"}, before: "ARGV[1] = 'changed' KEYS[1] = 'changed'"},
		{keys: []string{"k3"}, argv: []string{"1", "3600"}, before: "ARGV.x = 1 KEYS[3] = 'gap'"},
		{keys: []string{long, "k"}, argv: many},
		{keys: []string{long + "y", "k"}, argv: append([]string{"9"}, many[1:]...)},
		{keys: []string{"k"}, argv: nil},
		{keys: []string{"k4"}, argv: []string{"1", "3600"}},
	} {
		if tc.before != "" {
			if _, err := e.Run(context.Background(), mustLoad(t, tc.before), bytesOf(tc.keys), bytesOf(tc.argv), 2, f.Call, false, nil); err != nil {
				t.Fatalf("%s: %v", tc.before, err)
			}
		}
		out, err := e.Run(context.Background(), show, bytesOf(tc.keys), bytesOf(tc.argv), 2, f.Call, false, nil)
		k, a := strings.Join(tc.keys, ","), strings.Join(tc.argv, ",")
		want := fmt.Sprintf("*4\r\n:%d\r\n:%d\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(tc.keys), len(tc.argv), len(k), k, len(a), a)
		if err != nil || string(out) != want {
			t.Errorf("keys %q argv %q after %q: %q, %v; want %q", tc.keys, tc.argv, tc.before, out, err, want)
		}
	}
	// A table the script changed beyond its values is not kept while idle.
	if _, err := e.Run(context.Background(), mustLoad(t, "KEYS.extra = string.rep('x', 1000)"), bytesOf([]string{"k"}), nil, 2, f.Call, false, nil); err != nil {
		t.Fatal(err)
	}
	st := e.getState()
	defer e.putState(st)
	if v := st.globals.RawGetString("KEYS"); v != lua.LNil {
		t.Errorf("an idle state keeps the KEYS table a script changed: %v", v)
	}
}
