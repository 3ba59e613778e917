package scripting

import (
	"context"
	"fmt"
	"testing"
)

// statusCaller answers "set" with +OK and anything else with +PONG.
func statusCaller(args [][]byte, proto int, ro bool, out []byte) ([]byte, bool, error) {
	if string(args[0]) == "set" {
		return append(out, "+OK\r\n"...), true, nil
	}
	return append(out, "+PONG\r\n"...), false, nil
}

// TestStatusTablesAreReused: a status reply's table is lent again in later
// runs (so a status reply costs no allocation) unless the run changed it
// beyond its ok field, and each run sees a table exactly like a fresh one
// whatever the runs before it did to theirs.
func TestStatusTablesAreReused(t *testing.T) {
	if !ltableLayout.ok {
		t.Fatal("gopher-lua's LTable no longer has the fields reusable reads: status tables are never reused")
	}
	e := New(Options{MaxIdleStates: 1})
	run := func(src string) string {
		t.Helper()
		out, err := e.Run(context.Background(), mustLoad(t, src), nil, nil, 2, statusCaller, false, nil)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		return string(out)
	}
	check := "local t = redis.call('%s') local n = 0 for k, v in pairs(t) do n = n + 1 end " +
		"return {n, t.ok, #t, getmetatable(t) == nil, rawget(t, 'x') == nil, t[1] == nil, t[2.5] == nil}"
	for _, attempt := range []string{
		"return 1",
		"local t = redis.call('set') t.x = 1",
		"local t = redis.call('set') t.x = 1 t.x = nil",
		"local t = redis.call('set') t[1] = 1",
		"local t = redis.call('set') t[1] = 1 t[1] = nil",
		"local t = redis.call('set') t[2.5] = 1",
		"local t = redis.call('set') setmetatable(t, {__index = function() return 'meta' end})",
		"local t = redis.call('set') t.ok = nil",
		"local t = redis.call('set') t.ok = 5",
		"local t = redis.call('set') t.ok = {}",
		"local t = redis.call('set') t.ok = 'changed'",
		"local a, b = redis.call('set'), redis.call('ping') a.ok, b.ok = b.ok, a.ok",
		"for i = 1, 40 do redis.call('set') end",
	} {
		run(attempt)
		for cmd, text := range map[string]string{"set": "OK", "ping": "PONG"} {
			want := fmt.Sprintf("*7\r\n:1\r\n$%d\r\n%s\r\n:0\r\n:1\r\n:1\r\n:1\r\n:1\r\n", len(text), text)
			if got := run(fmt.Sprintf(check, cmd)); got != want {
				t.Errorf("after %s: %s's table: %q, want %q", attempt, cmd, got, want)
			}
		}
	}
	// "OK", the usual text, is converted once; other texts cost their
	// conversion.
	s := mustLoad(t, "redis.call('set') redis.call('set') return 1")
	reply := make([]byte, 0, 64)
	if allocs := testing.AllocsPerRun(100, func() {
		if _, err := e.Run(context.Background(), s, nil, nil, 2, statusCaller, false, reply[:0]); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("a run with two +OK replies allocates %v times, want 0", allocs)
	}
}
