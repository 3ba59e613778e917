package scripting

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestRerun: a Caller's Rerun before any write stops the script at once —
// even one that catches errors — and Run returns it with nothing appended;
// after a write the script sees the Rerun's error as any failed call, and
// the run goes on.
func TestRerun(t *testing.T) {
	undeclared := errors.New("undeclared key")
	// caller refuses "far" with a Rerun, and counts what it ran.
	type counts struct{ far, writes, after int }
	caller := func(n *counts) Caller {
		return func(args [][]byte, proto int, readOnly bool, reply []byte) ([]byte, bool, error) {
			switch string(args[0]) {
			case "far":
				n.far++
				return reply, false, &Rerun{Err: undeclared}
			case "set":
				n.writes++
				return append(reply, "+OK\r\n"...), true, nil
			case "after":
				n.after++
			}
			return append(reply, ":1\r\n"...), false, nil
		}
	}
	for _, tc := range []struct {
		src    string
		rerun  bool   // Run returns the Rerun
		reply  string // otherwise
		counts counts
	}{
		{src: "redis.call('get') redis.call('far') redis.call('after') return 1", rerun: true,
			counts: counts{far: 1}},
		// Caught by the script: it stops all the same, and runs nothing more.
		{src: "redis.pcall('far') redis.call('after') return 2", rerun: true, counts: counts{far: 1}},
		{src: "pcall(redis.call, 'far') redis.call('after') return 3", rerun: true, counts: counts{far: 1}},
		{src: "pcall(redis.call, 'far') return 4", rerun: true, counts: counts{far: 1}},
		// After a write: the script sees the error.
		{src: "redis.call('set') return redis.pcall('far')", reply: "-ERR undeclared key\r\n",
			counts: counts{far: 1, writes: 1}},
		{src: "redis.call('set') local ok = pcall(redis.call, 'far') redis.call('after') return ok and 1 or 0", reply: ":0\r\n",
			counts: counts{far: 1, writes: 1, after: 1}},
	} {
		t.Run(tc.src, func(t *testing.T) {
			e := New(Options{})
			var n counts
			out, err := e.Run(context.Background(), mustLoad(t, tc.src), nil, nil, 2, caller(&n), false, []byte("kept"))
			var rerun *Rerun
			switch {
			case tc.rerun && (!errors.As(err, &rerun) || rerun.Err != undeclared || string(out) != "kept"):
				t.Errorf("Run = %q, %v; want the Rerun, nothing appended", out, err)
			case !tc.rerun && (err != nil || string(out) != "kept"+tc.reply):
				t.Errorf("Run = %q, %v; want %q", out, err, tc.reply)
			}
			if n != tc.counts {
				t.Errorf("calls %+v, want %+v", n, tc.counts)
			}
			// The state is reused: the next run starts afresh.
			if out, err := e.Run(context.Background(), mustLoad(t, "return redis.call('get')"), nil, nil, 2, caller(&n), false, nil); err != nil || string(out) != ":1\r\n" {
				t.Errorf("the next run: %q, %v", out, err)
			}
		})
	}
}

// TestWholeKeyspaceMark: the mark lives on the cached script, so every
// later lookup of the same SHA1 sees it, until SCRIPT FLUSH.
func TestWholeKeyspaceMark(t *testing.T) {
	c := NewCache(CacheLimits{})
	s, err := c.Load([]byte("return 1"))
	if err != nil {
		t.Fatal(err)
	}
	if s.WholeKeyspace() {
		t.Fatal("a new script is marked")
	}
	s.MarkWholeKeyspace()
	if again := c.Get([]byte(strings.ToUpper(s.SHA()))); again == nil || !again.WholeKeyspace() {
		t.Fatal("the mark is not on the cached script")
	}
	if again, _ := c.Load([]byte("return 1")); !again.WholeKeyspace() {
		t.Fatal("EVAL of the same source does not see the mark")
	}
	c.Flush()
	if again, _ := c.Load([]byte("return 1")); again.WholeKeyspace() {
		t.Fatal("the mark outlived SCRIPT FLUSH")
	}
}
