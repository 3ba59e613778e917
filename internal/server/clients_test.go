package server_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/testserver"
)

// redis72Fields are the fields of a CLIENT LIST line in Redis 7.2, in its
// order.
var redis72Fields = strings.Fields("id addr laddr fd name age idle flags db sub psub ssub multi qbuf qbuf-free " +
	"argv-mem multi-mem rbs rbp obl oll omem tot-mem events cmd user redir resp lib-name lib-ver")

// parseClientLine checks that line has Redis 7.2's fields in its order and
// returns them.
func parseClientLine(t *testing.T, line string) map[string]string {
	t.Helper()
	pairs := strings.Split(line, " ")
	if len(pairs) != len(redis72Fields) {
		t.Fatalf("%d fields, want %d: %q", len(pairs), len(redis72Fields), line)
	}
	m := map[string]string{}
	for i, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k != redis72Fields[i] {
			t.Fatalf("field %d is %q, want %s=: %q", i, p, redis72Fields[i], line)
		}
		m[k] = v
	}
	return m
}

// clientLines runs CLIENT LIST (with args) on conn and parses its lines.
func clientLines(t *testing.T, ctx context.Context, conn *redis.Conn, args ...any) []map[string]string {
	t.Helper()
	text, err := conn.Do(ctx, append([]any{"CLIENT", "LIST"}, args...)...).Text()
	if err != nil {
		t.Fatal(err)
	}
	if text == "" {
		return nil
	}
	if !strings.HasSuffix(text, "\n") {
		t.Fatalf("CLIENT LIST does not end in a newline: %q", text)
	}
	var out []map[string]string
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		out = append(out, parseClientLine(t, line))
	}
	return out
}

func TestClientListAndInfo(t *testing.T) { testserver.Models(t, testClientListAndInfo) }

func testClientListAndInfo(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	me := ts.Client(t, 3).Conn()
	defer me.Close()
	if err := me.Do(ctx, "CLIENT", "SETINFO", "LIB-NAME", "mylib").Err(); err != nil {
		t.Fatal(err)
	}
	named := ts.Client(t, 2).Conn()
	defer named.Close()
	named.ClientSetName(ctx, "worker-1")
	inTx := ts.Client(t, 2).Conn()
	defer inTx.Close()
	inTx.Do(ctx, "MULTI")
	inTx.Do(ctx, "SET", "k", "v")
	inTx.Do(ctx, "INCR", "n")
	raw := testserver.DialRaw(t, ts.Addr) // has sent nothing
	for deadline := time.Now().Add(10 * time.Second); ts.Server.Connected() < 4; {
		if time.Now().After(deadline) {
			t.Fatal("the silent connection was never accepted")
		}
		time.Sleep(time.Millisecond) // polling a counter the server changes, not waiting for time to pass
	}

	myID, _ := me.ClientID(ctx).Result()
	info, err := me.Do(ctx, "CLIENT", "INFO").Text()
	if err != nil || !strings.HasSuffix(info, "\n") || strings.Count(info, "\n") != 1 {
		t.Fatalf("CLIENT INFO: %q %v", info, err)
	}
	self := parseClientLine(t, strings.TrimSuffix(info, "\n"))
	for k, want := range map[string]string{"id": fmt.Sprint(myID), "cmd": "client|info", "resp": "3", "flags": "N",
		"multi": "-1", "lib-name": "mylib", "user": "default", "db": "0", "psub": "0", "redir": "-1", "events": "r"} {
		if self[k] != want {
			t.Errorf("CLIENT INFO %s=%q, want %q", k, self[k], want)
		}
	}
	if self["argv-mem"] != "10" { // "CLIENT" and "INFO"
		t.Errorf("CLIENT INFO argv-mem=%s, want 10", self["argv-mem"])
	}

	lines := clientLines(t, ctx, me)
	if len(lines) != 4 {
		t.Fatalf("%d clients listed, want 4", len(lines))
	}
	byName := map[string]map[string]string{}
	for i, l := range lines {
		if i > 0 {
			prev, _ := strconv.Atoi(lines[i-1]["id"])
			if id, _ := strconv.Atoi(l["id"]); id <= prev {
				t.Errorf("ids not ascending: %s after %d", l["id"], prev)
			}
		}
		if fd, err := strconv.Atoi(l["fd"]); err != nil || fd < 0 {
			t.Errorf("fd=%s", l["fd"])
		}
		if l["laddr"] != ts.Addr {
			t.Errorf("laddr=%s, want %s", l["laddr"], ts.Addr)
		}
		byName[l["id"]] = l
	}
	mine := byName[fmt.Sprint(myID)]
	if mine["cmd"] != "client|list" || mine["resp"] != "3" || mine["lib-name"] != "mylib" {
		t.Errorf("own line: %v", mine)
	}
	var sawNamed, sawTx, sawRaw bool
	for _, l := range lines {
		switch {
		case l["name"] == "worker-1":
			sawNamed = l["cmd"] == "client|setname" && l["resp"] == "2"
		case l["flags"] == "x":
			sawTx = l["multi"] == "2" && l["cmd"] == "incr" && l["multi-mem"] != "0"
		case l["cmd"] == "NULL":
			sawRaw = l["addr"] == raw.LocalAddr().String()
		}
	}
	if !sawNamed || !sawTx || !sawRaw {
		t.Errorf("named %v, in MULTI %v, silent %v:\n%v", sawNamed, sawTx, sawRaw, lines)
	}

	if got := clientLines(t, ctx, me, "TYPE", "normal"); len(got) != 4 {
		t.Errorf("TYPE normal: %d clients", len(got))
	}
	for _, typ := range []string{"master", "replica", "slave", "pubsub"} {
		if got := clientLines(t, ctx, me, "TYPE", typ); len(got) != 0 {
			t.Errorf("TYPE %s: %d clients", typ, len(got))
		}
	}
	if got := clientLines(t, ctx, me, "ID", myID, 0, -1, 999999); len(got) != 1 || got[0]["id"] != fmt.Sprint(myID) {
		t.Errorf("ID %d: %v", myID, got)
	}
	for _, tt := range []struct {
		args []any
		want string
	}{
		{[]any{"CLIENT", "LIST", "TYPE", "foo"}, "ERR Unknown client type 'foo'"},
		{[]any{"CLIENT", "LIST", "TYPE"}, "ERR syntax error"},
		{[]any{"CLIENT", "LIST", "ID"}, "ERR syntax error"},
		{[]any{"CLIENT", "LIST", "ID", "3", "x"}, "ERR Invalid client ID"},
		{[]any{"CLIENT", "LIST", "TYPE", "normal", "ID", "1"}, "ERR syntax error"},
		{[]any{"CLIENT", "INFO", "x"}, "ERR wrong number of arguments for 'client|info' command"},
	} {
		if err := me.Do(ctx, tt.args...).Err(); err == nil || err.Error() != tt.want {
			t.Errorf("%v: %v, want %s", tt.args, err, tt.want)
		}
	}
}

// TestClientKill kills connections of both models' owners from another
// connection: ones blocked reading, one blocked writing, ones on the other
// event loop, and itself.
func TestClientKill(t *testing.T) { testserver.Models(t, testClientKill) }

func testClientKill(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	admin := ts.Client(t, 2).Conn()
	defer admin.Close()
	adminAddr := ""
	for _, l := range clientLines(t, ctx, admin) {
		if l["cmd"] == "client|list" {
			adminAddr = l["addr"]
		}
	}
	// id returns the id of the raw connection from local address addr.
	id := func(addr string) int64 {
		for _, l := range clientLines(t, ctx, admin) {
			if l["addr"] == addr {
				n, _ := strconv.ParseInt(l["id"], 10, 64)
				return n
			}
		}
		t.Fatalf("no client from %s", addr)
		return 0
	}
	opened := func() (conn *bufio.Reader, addr string, closed func() string) {
		c := testserver.DialRaw(t, ts.Addr)
		c.Write([]byte("PING\r\n"))
		rd := bufio.NewReader(c)
		if line, _ := rd.ReadString('\n'); line != "+PONG\r\n" {
			t.Fatalf("PING: %q", line)
		}
		return rd, c.LocalAddr().String(), func() string { return readUntilClosed(t, c) }
	}

	_, a, aClosed := opened()
	if n, err := admin.Do(ctx, "CLIENT", "KILL", "ID", id(a)).Int(); err != nil || n != 1 {
		t.Fatalf("KILL ID: %d %v", n, err)
	}
	if got := aClosed(); got != "" {
		t.Fatalf("killed connection got %q", got)
	}

	_, b, bClosed := opened()
	if s, err := admin.Do(ctx, "CLIENT", "KILL", b).Text(); err != nil || s != "OK" {
		t.Fatalf("KILL addr: %q %v", s, err)
	}
	bClosed()
	if err := admin.Do(ctx, "CLIENT", "KILL", b).Err(); err == nil || err.Error() != "ERR No such client" {
		t.Fatalf("KILL of a closed addr: %v", err)
	}

	// One blocked writing: replies it never reads.
	if err := admin.Set(ctx, "big", strings.Repeat("v", 1<<20), 0).Err(); err != nil {
		t.Fatal(err)
	}
	slow := testserver.DialRaw(t, ts.Addr)
	slow.Write([]byte(strings.Repeat("*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n", 16)))
	for deadline := time.Now().Add(10 * time.Second); ; {
		var writing bool
		for _, l := range clientLines(t, ctx, admin) {
			writing = writing || (l["addr"] == slow.LocalAddr().String() && l["events"] == "rw")
		}
		if writing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow reader never showed events=rw")
		}
		time.Sleep(time.Millisecond) // polling what the server publishes
	}
	if n, _ := admin.Do(ctx, "CLIENT", "KILL", "ADDR", slow.LocalAddr().String(), "SKIPME", "yes").Int(); n != 1 {
		t.Fatalf("KILL ADDR of a blocked writer: %d", n)
	}
	waitConnected(t, ts.Server, 1)

	// Several on both loops (or goroutines), by LADDR and by USER.
	var closers []func() string
	for range 4 {
		_, _, cl := opened()
		closers = append(closers, cl)
	}
	if n, err := admin.Do(ctx, "CLIENT", "KILL", "LADDR", ts.Addr).Int(); err != nil || n != 4 {
		t.Fatalf("KILL LADDR (skipping me): %d %v", n, err)
	}
	for _, cl := range closers {
		cl()
	}
	_, _, cClosed := opened()
	if n, _ := admin.Do(ctx, "CLIENT", "KILL", "USER", "default").Int(); n != 1 {
		t.Fatalf("KILL USER default: %d", n)
	}
	cClosed()

	for _, tt := range []struct {
		args []any
		want string
	}{
		{[]any{"CLIENT", "KILL", "ID", "0"}, "ERR client-id should be greater than 0"},
		{[]any{"CLIENT", "KILL", "ID", "x"}, "ERR client-id should be greater than 0"},
		{[]any{"CLIENT", "KILL", "TYPE", "foo"}, "ERR Unknown client type 'foo'"},
		{[]any{"CLIENT", "KILL", "USER", "bob"}, "ERR No such user 'bob'"},
		{[]any{"CLIENT", "KILL", "SKIPME", "maybe"}, "ERR syntax error"},
		{[]any{"CLIENT", "KILL", "MAXAGE", "5"}, "ERR syntax error"},
		{[]any{"CLIENT", "KILL", "a", "b", "c"}, "ERR syntax error"},
		{[]any{"CLIENT", "KILL"}, "ERR wrong number of arguments for 'client|kill' command"},
	} {
		if err := admin.Do(ctx, tt.args...).Err(); err == nil || err.Error() != tt.want {
			t.Errorf("%v: %v, want %s", tt.args, err, tt.want)
		}
	}
	if n, _ := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub", "SKIPME", "no").Int(); n != 0 {
		t.Fatalf("KILL TYPE pubsub: %d", n)
	}
	if n, _ := admin.Do(ctx, "CLIENT", "KILL", "ADDR", adminAddr).Int(); n != 0 {
		t.Fatalf("KILL of my own address with SKIPME yes: %d", n)
	}
	// Killing itself: the reply comes, then the connection closes.
	raw := testserver.DialRaw(t, ts.Addr)
	raw.Write([]byte("CLIENT KILL SKIPME no\r\nPING\r\n"))
	if got := readUntilClosed(t, raw); got != ":2\r\n" { // itself and admin
		t.Fatalf("KILL SKIPME no: %q", got)
	}
	if err := admin.Ping(ctx).Err(); err == nil {
		t.Fatal("admin survived KILL SKIPME no")
	}
}

// TestClientKillUnderLoad: connections pipelining commands are killed by
// another while they run; the race detector checks that no connection's
// state is touched by the killer, and the server keeps serving.
func TestClientKillUnderLoad(t *testing.T) { testserver.Models(t, testClientKillUnderLoad) }

func testClientKillUnderLoad(t *testing.T) {
	ts := startServer(t, testserver.Def("r", "token_bucket", "1000000000", "1s", ""))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range 8 {
		wg.Go(func() {
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				c := redis.NewClient(&redis.Options{Addr: ts.Addr, Protocol: 2 + i%2, PoolSize: 1, MaxRetries: -1})
				for range 20 {
					p := c.Pipeline()
					for range 8 {
						p.Do(ctx, "RL.ALLOW", fmt.Sprint("k", i), "r")
					}
					p.Do(ctx, "CLIENT", "SETNAME", fmt.Sprint("w", i, "-", j))
					if _, err := p.Exec(ctx); err != nil {
						break // killed
					}
				}
				c.Close()
			}
		})
	}
	killer := ts.Client(t, 2).Conn()
	defer killer.Close()
	killed := 0
	for killed < 40 {
		if ctx.Err() != nil {
			t.Fatalf("only %d kills before the deadline", killed)
		}
		for _, l := range clientLines(t, ctx, killer) {
			if strings.HasPrefix(l["name"], "w") {
				n, err := killer.Do(ctx, "CLIENT", "KILL", "ID", l["id"]).Int()
				if err != nil {
					t.Fatal(err)
				}
				killed += n
			}
		}
	}
	close(stop)
	wg.Wait()
	if err := killer.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestRedisPyClientCommands: redis-py parses CLIENT INFO and CLIENT LIST
// (client_info() read the fields it converts to integers, and failed with
// KeyError: 'psub'), and kills with both of its CLIENT KILL forms.
func TestRedisPyClientCommands(t *testing.T) { testserver.Models(t, testRedisPyClientCommands) }

func testRedisPyClientCommands(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import redis").Run(); err != nil {
		t.Skip("redis-py not installed for /usr/bin/python3 (apt-get install python3-redis); .ci/run installs it")
	}
	ts := startServer(t)
	victim := testserver.DialRaw(t, ts.Addr)
	victim.Write([]byte("CLIENT SETNAME victim\r\n"))
	bufio.NewReader(victim).ReadString('\n')
	script := `
import os, sys, redis
host, port = os.environ["RLSERVER_ADDR"].rsplit(":", 1)
r = redis.Redis(host=host, port=int(port), decode_responses=True)
info = r.client_info()
assert isinstance(info["psub"], int) and isinstance(info["tot-mem"], int) and info["cmd"] == "client|info", info
clients = r.client_list()
assert len(clients) == 2, clients
victim = [c for c in clients if c["name"] == "victim"][0]
assert r.client_kill_filter(_id=victim["id"]) == 1
assert len(r.client_list()) == 1
assert r.client_kill_filter(addr=info["addr"], skipme=True) == 0
assert r.client_list(_type="normal")[0]["id"] == str(info["id"])
print("redis-py: CLIENT INFO, LIST and KILL passed")
`
	cmd := exec.Command(py, "-c", script)
	cmd.Env = append(os.Environ(), "RLSERVER_ADDR="+ts.Addr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := readUntilClosed(t, victim); got != "" {
		t.Fatalf("killed connection got %q", got)
	}
}
