package commands_test

import (
	"bufio"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/testserver"
)

// TestAdmitOrder: the checks run in Redis's order, so an unauthenticated
// client hears about an unknown command or a wrong arity before NOAUTH, and
// a refused EXEC is an EXECABORT saying why.
func TestAdmitOrder(t *testing.T) { testserver.Models(t, testAdmitOrder) }

func testAdmitOrder(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Password: "pw"})
	conn := testserver.DialRaw(t, ts.Addr)
	rd := bufio.NewReader(conn)
	for _, step := range []struct{ cmd, want string }{
		{"NOSUCH a", "-ERR unknown command 'NOSUCH', with args beginning with: 'a' "},
		{"CLIENT NOSUCH", "-ERR unknown subcommand 'NOSUCH'. Try CLIENT HELP."},
		{"GET", "-ERR wrong number of arguments for 'get' command"},
		{"GET k", "-NOAUTH Authentication required."},
		{"EXEC", "-EXECABORT Transaction discarded because of: NOAUTH Authentication required."},
		{"EXEC x", "-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command"},
		{"AUTH a b c", "-ERR syntax error"},
		{"AUTH pw", "+OK"},
		{"GET k", "$-1"},
	} {
		conn.Write(testserver.EncodeCommand(strings.Fields(step.cmd)))
		got, err := testserver.ReadReply(rd)
		if err != nil {
			t.Fatalf("%s: %v", step.cmd, err)
		}
		if strings.Join(got, "\n") != step.want {
			t.Errorf("%s: got %q, want %q", step.cmd, got, step.want)
		}
	}
}

// TestCommandParsesInClients: go-redis parses COMMAND's reply (cluster
// clients read key positions from it) in both protocols.
func TestCommandParsesInClients(t *testing.T) { testserver.Models(t, testCommandParsesInClients) }

func testCommandParsesInClients(t *testing.T) {
	testserver.EachProtocol(t, func(t *testing.T, protocol int) {
		c := startServer(t).Client(t, protocol)
		cmds, err := c.Command(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]redis.CommandInfo{
			"rl.allow":    {Name: "rl.allow", Arity: -3, FirstKeyPos: 1, LastKeyPos: 1, StepCount: 1},
			"rl.allowall": {Name: "rl.allowall", Arity: -3, FirstKeyPos: 1, LastKeyPos: 1, StepCount: 1},
			"del":         {Name: "del", Arity: -2, FirstKeyPos: 1, LastKeyPos: -1, StepCount: 1},
			"ping":        {Name: "ping", Arity: -1},
		} {
			got := cmds[name]
			if got == nil || got.Arity != want.Arity || got.FirstKeyPos != want.FirstKeyPos ||
				got.LastKeyPos != want.LastKeyPos || got.StepCount != want.StepCount {
				t.Errorf("%s: %+v, want %+v", name, got, want)
			}
		}
		if !slices.Contains(cmds["rl.allowall"].Flags, "movablekeys") || !cmds["get"].ReadOnly {
			t.Errorf("flags: rl.allowall %v, get %v", cmds["rl.allowall"].Flags, cmds["get"].Flags)
		}
		keys, err := c.CommandGetKeys(context.Background(), "RL.ALLOWALL", "a", "r1", "b", "r2", "COST", "2").Result()
		if err != nil || !slices.Equal(keys, []string{"a", "b"}) {
			t.Errorf("COMMAND GETKEYS RL.ALLOWALL: %v %v", keys, err)
		}
	})
}
