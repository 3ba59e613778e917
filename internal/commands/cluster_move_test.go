package commands_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/commands"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/testserver"
)

// TestClusterImportInParts: a node taking slots over stores the bulk
// (IMPORT … FIRST MORE) without serving the slots, which it still sends to
// their old owner; the final transfer (the keys written since, a deleted
// one as a deletion) replaces what the bulk gave and makes it serve them.
func TestClusterImportInParts(t *testing.T) {
	def := testserver.Def("r", "token_bucket", "10", "24h", "")
	st, err := cluster.NewState(cluster.Config{Mode: cluster.On, SelfID: selfID, HandOver: true})
	if err != nil {
		t.Fatal(err)
	}
	m1, err := cluster.NewMap(1, []cluster.Node{
		{ID: selfID, Host: "127.0.0.1", Port: 7001, Slots: []cluster.Range{{Start: 0, End: 8191}}},
		{ID: otherID, Host: "127.0.0.1", Port: 7002, Slots: []cluster.Range{{Start: 8192, End: cluster.Slots - 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(m1); err != nil {
		t.Fatal(err)
	}
	ts := testserver.Start(t, testserver.Options{Rules: []rules.Def{def}, Cluster: &commands.ClusterConfig{State: st}})
	src := testserver.Start(t, testserver.Options{Rules: []rules.Def{def}})
	// Import restores at the wall clock's instant: both nodes' clocks are
	// there, so that nothing refills.
	now := time.Now().UnixNano()
	ts.Clock.Set(now)
	src.Clock.Set(now)
	ctx := context.Background()

	// Slots 8192-8300 move from the other node to this one.
	m2, err := cluster.NewMap(2, []cluster.Node{
		{ID: selfID, Host: "127.0.0.1", Port: 7001, Slots: []cluster.Range{{Start: 0, End: 8300}}},
		{ID: otherID, Host: "127.0.0.1", Port: 7002, Slots: []cluster.Range{{Start: 8301, End: cluster.Slots - 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(m2); err != nil {
		t.Fatal(err)
	}
	key := func(prefix string) string {
		for i := 0; ; i++ {
			if k := prefix + strings.Repeat("x", i); cluster.KeySlotString(k) >= 8192 && cluster.KeySlotString(k) <= 8300 {
				return k
			}
		}
	}
	spent, gone := key("spent"), key("gone")
	s := src.Client(t, 2)
	for _, cmd := range [][]any{{"RL.ALLOW", spent, "r", 3}, {"SET", gone, "v"}} {
		if err := s.Do(ctx, cmd...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	src.Service.TrackWrites(func([]byte) bool { return true })
	bulk, _, err := src.Service.ExportKeys(func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]any{{"RL.ALLOW", spent, "r", 2}, {"DEL", gone}} {
		if err := s.Do(ctx, cmd...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	written, _ := src.Service.WrittenKeys()
	delta, _, err := src.Service.ExportNamed(written)
	if err != nil {
		t.Fatal(err)
	}

	c := ts.Client(t, 2)
	for _, step := range []struct {
		args []any
		want string // the reply, or the error's start
	}{
		{[]any{"RL.CLUSTER", "IMPORT", 2, "8192-8300", bulk, "FIRST", "NOPE"}, "ERR syntax error"},
		{[]any{"RL.CLUSTER", "IMPORT", 1, "8192-8300", bulk, "FIRST", "MORE"}, "ERR this node holds cluster map version 2"},
		{[]any{"RL.CLUSTER", "IMPORT", 2, "8192-8300", bulk, "FIRST", "MORE"}, "OK"},
		{[]any{"GET", gone}, "ASK "}, // not served before the last transfer
		{[]any{"RL.CLUSTER", "IMPORT", 2, "8192-8300", delta}, "OK"},
		{[]any{"GET", gone}, "redis: nil"},
		{[]any{"RL.PEEK", spent, "r"}, "[1 10 5 "},
		{[]any{"RL.CLUSTER", "IMPORT", 2, "8192-8300", delta}, "ERR slot 8192 is not waiting for its state here"},
	} {
		got, err := c.Do(ctx, step.args...).Result()
		text := ""
		if err != nil {
			text = err.Error()
		} else {
			text = fmt.Sprint(got)
		}
		if !strings.HasPrefix(text, step.want) {
			t.Errorf("%v: %q, want %q…", step.args[:min(len(step.args), 2)], text, step.want)
		}
	}
}
