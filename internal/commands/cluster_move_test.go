package commands_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/cluster/forward"
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

// lockedBuffer is a log destination safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestClusterHandOverWhileWriting: node A hands slots 0-4095 to node B
// (two nodes in this process, real sockets) while a client keeps
// overwriting and deleting keys in them on A until A answers MOVED; with
// every written key copied again before the pause (SetPauseKeys(0)), the
// hand-over makes up to three copies without pausing, then the paused one.
// Every key ends on B as the client last left it on A: written, or
// deleted.
func TestClusterHandOverWhileWriting(t *testing.T) {
	t.Cleanup(commands.SetPauseKeys(0))
	def := testserver.Def("r", "token_bucket", "10", "24h", "")
	var logA lockedBuffer
	start := func(id string, log *lockedBuffer) (*testserver.Server, *cluster.State) {
		st, err := cluster.NewState(cluster.Config{Mode: cluster.On, SelfID: id, HandOver: true})
		if err != nil {
			t.Fatal(err)
		}
		peers := forward.New(forward.Options{})
		t.Cleanup(func() { peers.Close() })
		opts := testserver.Options{Rules: []rules.Def{def}, Cluster: &commands.ClusterConfig{State: st, Peers: peers}}
		if log != nil {
			opts.Logger = slog.New(slog.NewTextHandler(log, nil))
		}
		ts := testserver.Start(t, opts)
		now := time.Now().UnixNano() // imports restore at the wall clock's instant
		ts.Clock.Set(now)
		return ts, st
	}
	a, stA := start(selfID, &logA)
	b, stB := start(otherID, nil)
	node := func(id string, ts *testserver.Server, r ...cluster.Range) cluster.Node {
		host, port, _ := net.SplitHostPort(ts.Addr)
		p, _ := strconv.Atoi(port)
		return cluster.Node{ID: id, Host: host, Port: p, Slots: r}
	}
	m1, err := cluster.NewMap(1, []cluster.Node{node(selfID, a, cluster.Range{Start: 0, End: 8191}),
		node(otherID, b, cluster.Range{Start: 8192, End: cluster.Slots - 1})})
	if err != nil {
		t.Fatal(err)
	}
	m2, err := cluster.NewMap(2, []cluster.Node{node(selfID, a, cluster.Range{Start: 4096, End: 8191}),
		node(otherID, b, cluster.Range{Start: 0, End: 4095}, cluster.Range{Start: 8192, End: cluster.Slots - 1})})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*cluster.State{stA, stB} {
		if _, err := st.Apply(m1); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	ca, cb := a.Client(t, 2), b.Client(t, 2)
	var keys []string
	for i := 0; len(keys) < 2000; i++ {
		if k := "w:" + strconv.Itoa(i); cluster.KeySlotString(k) <= 4095 {
			keys = append(keys, k)
		}
	}
	pipe := ca.Pipeline()
	for _, k := range keys {
		pipe.Set(ctx, k, "seed", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}

	// The writer: key i%len(keys) gets i, every seventh write a DEL,
	// until A sends it to B.
	last := map[string]string{}
	for _, k := range keys {
		last[k] = "seed"
	}
	started, done := make(chan struct{}), make(chan error, 1)
	w := a.Client(t, 2)
	go func() {
		for i := range 200_000 {
			if i == 100 {
				close(started)
			}
			k := keys[i%len(keys)]
			var err error
			if i%7 == 0 {
				err = w.Del(ctx, k).Err()
			} else {
				err = w.Set(ctx, k, i, 0).Err()
			}
			switch {
			case err != nil && strings.HasPrefix(err.Error(), "MOVED "):
				done <- nil
				return
			case err != nil:
				done <- err
				return
			case i%7 == 0:
				last[k] = ""
			default:
				last[k] = strconv.Itoa(i)
			}
		}
		done <- errors.New("the writer never saw MOVED")
	}()
	<-started
	if _, err := stB.Apply(m2); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(m2)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Do(ctx, "RL.CLUSTER", "SETCONFIG", string(js)).Err(); err != nil {
		t.Fatalf("push to A: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	pipe = cb.Pipeline()
	for _, k := range keys {
		pipe.Get(ctx, k)
	}
	cmds, _ := pipe.Exec(ctx)
	wrong := 0
	for i, c := range cmds {
		got, err := c.(*redis.StringCmd).Result()
		if err == redis.Nil {
			got, err = "", nil
		}
		if err != nil || got != last[keys[i]] {
			if wrong++; wrong <= 5 {
				t.Errorf("%s on B: %q %v, want %q", keys[i], got, err, last[keys[i]])
			}
		}
	}
	line := ""
	for _, l := range strings.Split(logA.String(), "\n") {
		if strings.Contains(l, "slots handed over") {
			line = l
		}
	}
	// How many copies were made depends on how many writes land during
	// each: logged, not asserted (it is 3 or 4 on an idle machine).
	t.Log(line)
	if line == "" {
		t.Error("A logged no hand-over")
	}
}
