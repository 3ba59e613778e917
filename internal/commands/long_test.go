package commands

import (
	"strings"
	"testing"
)

func splitArgs(line string) [][]byte {
	var args [][]byte
	for _, w := range strings.Fields(line) {
		args = append(args, []byte(w))
	}
	return args
}

// TestMayRunLong: the pipelines an event loop hands to a goroutine of their
// own are those holding a script, a whole-keyspace command, or an EXEC of a
// transaction that queued one.
func TestMayRunLong(t *testing.T) {
	for _, tc := range []struct {
		queued []string // the transaction's queue, if in MULTI
		cmds   []string
		want   bool
	}{
		{cmds: []string{"RL.ALLOW k api", "GET k", "SET k v", "EXPIRE k 1", "PING"}, want: false},
		{cmds: []string{"GET k", "EVAL x 0"}, want: true},
		{cmds: []string{"evalsha abc 1 k"}, want: true},
		{cmds: []string{"EvalSha_RO abc 0"}, want: true},
		{cmds: []string{"KEYS *"}, want: true},
		{cmds: []string{"SAVE"}, want: true},
		{cmds: []string{"flushall"}, want: true},
		{cmds: []string{"SCRIPT KILL"}, want: false},
		{cmds: []string{"EXEC"}, want: false},
		{queued: []string{"INCR k"}, cmds: []string{"EXEC"}, want: false},
		{queued: []string{"INCR k", "EVAL x 0"}, cmds: []string{"EXEC"}, want: true},
		{cmds: []string{"EXPIRE k 1", "NOSUCH", "SCAN 0", "EXISTS k"}, want: false},
	} {
		c := &session{h: &Handler{}, inMulti: tc.queued != nil}
		for _, q := range tc.queued {
			c.queue = append(c.queue, splitArgs(q))
		}
		var cmds [][][]byte
		for _, line := range tc.cmds {
			cmds = append(cmds, splitArgs(line))
		}
		if got := c.MayRunLong(cmds); got != tc.want {
			t.Errorf("%q after %q: %v, want %v", tc.cmds, tc.queued, got, tc.want)
		}
	}
}

// BenchmarkMayRunLong is what an event loop pays per pipeline for the check:
// 16 RL.ALLOW, and 16 GET/SET/EXPIRE (whose initials need a lookup for
// some).
func BenchmarkMayRunLong(b *testing.B) {
	for _, line := range []string{"RL.ALLOW key api", "GET key", "SET key v", "EXPIRE key 10"} {
		cmds := make([][][]byte, 16)
		for i := range cmds {
			cmds[i] = splitArgs(line)
		}
		c := &session{h: &Handler{}}
		b.Run(strings.Fields(line)[0]+"/P16", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if c.MayRunLong(cmds) {
					b.Fatal("long")
				}
			}
		})
	}
}
