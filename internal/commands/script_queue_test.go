package commands_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/rlserver/rlserver/internal/testserver"
)

// pipeline sends cmds in one write, so the server reads them as one
// pipeline, and returns their replies.
func (r *rawConn) pipeline(cmds ...[]string) []string {
	r.t.Helper()
	var b []byte
	for _, c := range cmds {
		b = append(b, testserver.EncodeCommand(c)...)
	}
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatal(err)
	}
	out := make([]string, len(cmds))
	for i := range cmds {
		out[i] = r.read()
	}
	return out
}

// hookCounts counts the handler hooks' calls by kind and command.
type hookCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *hookCounts) hook(kind, name string) {
	h.mu.Lock()
	h.n[kind+" "+name]++
	h.mu.Unlock()
}

func (h *hookCounts) take(kind, name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.n[kind+" "+name]
	delete(h.n, kind+" "+name)
	return n
}

// TestQueuedScripts: a script proven to reach only its declared keys, all
// on one shard, is queued in the pipeline's batch (not run alone after the
// pending work); the replies keep the order sent, and each command sees
// the effects of every one before it on the same keys, scripts or not. A
// script that reaches beyond its keys (ARGV[1] as a key) still runs alone.
func TestQueuedScripts(t *testing.T) { testserver.Models(t, testQueuedScripts) }

func testQueuedScripts(t *testing.T) {
	hooks := &hookCounts{n: map[string]int{}}
	ts := testserver.Start(t, testserver.Options{Shards: 4, Hook: hooks.hook})
	c := dialScript(t, ts)
	k1, k2 := "k1", otherShardKey(ts, "k1")
	const incr = "return redis.call('incrby', KEYS[1], ARGV[1])"
	const beyond = "return redis.call('get', ARGV[1])"
	if got := c.do("SCRIPT", "LOAD", incr); got != "$40 "+sha(incr) {
		t.Fatal(got)
	}
	hooks.take("run", "script|load")
	got := c.pipeline(
		[]string{"SET", k1, "0"},
		[]string{"EVAL", incr, "1", k1, "1"},
		[]string{"GET", k1},
		[]string{"EVALSHA", sha(incr), "1", k2, "5"},
		[]string{"SET", k1, "10"},
		[]string{"EVALSHA", sha(incr), "1", k1, "2"},
		[]string{"GET", k1},
		[]string{"EVAL", beyond, "1", k1, k2},
		[]string{"EVALSHA", sha(incr), "1", k2, "1"},
		[]string{"GET", k2},
	)
	want := []string{"+OK", ":1", "$1 1", ":5", "+OK", ":12", "$2 12", "$1 5", ":6", "$1 6"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("replies\n got %q\nwant %q", got, want)
	}
	if q := hooks.take("queue", "eval") + hooks.take("queue", "evalsha"); q != 4 {
		t.Errorf("%d scripts queued, want 4 (every one but the one reaching ARGV[1])", q)
	}
	if r := hooks.take("run", "eval"); r != 1 {
		t.Errorf("%d scripts run alone, want 1", r)
	}
}
