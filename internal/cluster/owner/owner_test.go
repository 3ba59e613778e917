package owner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/cluster/forward"
	"github.com/rlserver/rlserver/internal/cluster/internal/fakenode"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/service"
)

var (
	selfID  = strings.Repeat("a1", 20)
	otherID = strings.Repeat("b2", 20)
)

// fakeLocal decides every request allowed with 3 remaining, and records
// what it was asked.
type fakeLocal struct {
	mu    sync.Mutex
	calls [][]service.Check
	alls  []bool
}

func (f *fakeLocal) SetRules([]rules.Def) error { return nil }

func (f *fakeLocal) Decide(_ context.Context, reqs []service.Check, all bool) ([]algorithms.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls, f.alls = append(f.calls, reqs), append(f.alls, all)
	out := make([]algorithms.Decision, len(reqs))
	for i := range out {
		out[i] = algorithms.Decision{Allowed: true, Limit: 7, Remaining: 3}
	}
	return out, nil
}

// remoteNode is a fake other node: RL.ALLOW and RL.PEEK answer allowed,
// limit 10, remaining 4, reset 1.5 s; RL.ALLOWALL the same per pair; what
// it was sent is recorded. reply, if set, replaces the answer.
type remoteNode struct {
	srv   *fakenode.Server
	mu    sync.Mutex
	got   []string
	reply []byte
}

const decisionReply = "*6\r\n:1\r\n:10\r\n:4\r\n:0\r\n:1500\r\n:0\r\n"

func startRemote(t *testing.T) *remoteNode {
	r := &remoteNode{}
	r.srv = fakenode.Start(t, func(_ *fakenode.Conn, args [][]byte) []byte {
		var words []string
		for _, a := range args {
			words = append(words, string(a))
		}
		cmd := strings.Join(words, " ")
		if cmd == "RL.CLUSTER PEER" {
			return fakenode.Simple("OK")
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, cmd)
		if r.reply != nil {
			return r.reply
		}
		if words[0] == "RL.ALLOWALL" {
			n := (len(words) - 3) / 2
			return []byte(fmt.Sprintf("*%d\r\n:1\r\n%s", n+1, strings.Repeat(decisionReply, n)))
		}
		return []byte(decisionReply)
	}, nil)
	return r
}

func (r *remoteNode) answer(reply string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reply = []byte(reply)
}

func (r *remoteNode) sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// node returns a map node at addr owning the given ranges.
func node(id, addr string, rs ...cluster.Range) cluster.Node {
	host, port, _ := cluster.SplitAddr(addr)
	return cluster.Node{ID: id, Host: host, Port: port, Slots: rs}
}

// newLimiter is this node's Limiter: it owns slots 0-8191 of map version
// 1, the remote node the rest; later maps are applied in order.
func newLimiter(t *testing.T, remote string, later ...[]cluster.Node) (*Limiter, *fakeLocal, *cluster.State) {
	t.Helper()
	st, err := cluster.NewState(cluster.Config{Mode: cluster.On, SelfID: selfID, HandOver: true})
	if err != nil {
		t.Fatal(err)
	}
	maps := append([][]cluster.Node{{
		node(selfID, "127.0.0.1:1", cluster.Range{Start: 0, End: 8191}),
		node(otherID, remote, cluster.Range{Start: 8192, End: cluster.Slots - 1}),
	}}, later...)
	for i, nodes := range maps {
		m, err := cluster.NewMap(uint64(i+1), nodes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Apply(m); err != nil {
			t.Fatal(err)
		}
	}
	pool := forward.New(forward.Options{Init: [][]string{forward.PeerCommand}, Timeout: time.Second})
	t.Cleanup(func() { pool.Close() })
	local := &fakeLocal{}
	return &Limiter{Local: local, State: st, Peers: pool}, local, st
}

// keyIn returns a key prefix:N whose slot is in [lo, hi].
func keyIn(prefix string, lo, hi uint16) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s:%d", prefix, i)
		if s := cluster.KeySlotString(k); s >= lo && s <= hi {
			return k
		}
	}
}

func TestDecideRoutesEachRequestToItsOwner(t *testing.T) {
	r := startRemote(t)
	l, local, _ := newLimiter(t, r.srv.Addr)
	mine, theirs := keyIn("k", 0, 8191), keyIn("k", 8192, cluster.Slots-1)
	reqs := []service.Check{
		{Key: mine, Rule: "r", Cost: 1},
		{Key: theirs, Rule: "r", Cost: 2},
		{Key: theirs, Rule: "r", Cost: 1, Peek: true},
	}
	dec, err := l.Decide(context.Background(), reqs, false)
	if err != nil {
		t.Fatal(err)
	}
	remote := algorithms.Decision{Allowed: true, Limit: 10, Remaining: 4, ResetAfter: 1500 * ms}
	localDec := algorithms.Decision{Allowed: true, Limit: 7, Remaining: 3}
	if want := []algorithms.Decision{localDec, remote, remote}; fmt.Sprint(dec) != fmt.Sprint(want) {
		t.Errorf("decisions %v, want %v", dec, want)
	}
	if want := []string{"RL.ALLOW " + theirs + " r 2", "RL.PEEK " + theirs + " r 1"}; fmt.Sprint(r.sent()) != fmt.Sprint(want) {
		t.Errorf("the owner was sent %q, want %q", r.sent(), want)
	}
	if len(local.calls) != 1 || len(local.calls[0]) != 1 {
		t.Errorf("local calls %v: want one with the request served here", local.calls)
	}
}

func TestDecideGroups(t *testing.T) {
	r := startRemote(t)
	l, local, _ := newLimiter(t, r.srv.Addr)
	ctx := context.Background()
	tag := "{" + keyIn("t", 8192, cluster.Slots-1) + "}"
	dec, err := l.Decide(ctx, []service.Check{{Key: tag + ":a", Rule: "r", Cost: 2}, {Key: tag + ":b", Rule: "s", Cost: 2}}, true)
	if err != nil || len(dec) != 2 || dec[1].Remaining != 4 {
		t.Fatalf("a group owned elsewhere: %v %v", dec, err)
	}
	if want := "RL.ALLOWALL " + tag + ":a r " + tag + ":b s COST 2"; fmt.Sprint(r.sent()) != "["+want+"]" {
		t.Errorf("sent %q, want %q", r.sent(), want)
	}
	_, err = l.Decide(ctx, []service.Check{{Key: tag + ":a", Rule: "r", Cost: 1}, {Key: tag + ":b", Rule: "s", Cost: 2}}, true)
	if !errors.Is(err, ErrUnequalCosts) {
		t.Errorf("unequal costs: %v", err)
	}
	_, err = l.Decide(ctx, []service.Check{{Key: keyIn("x", 0, 8191), Rule: "r", Cost: 1}, {Key: tag, Rule: "s", Cost: 1}}, true)
	if !errors.Is(err, ErrCrossNode) {
		t.Errorf("a group over two nodes: %v", err)
	}
	mine := "{" + keyIn("t", 0, 8191) + "}"
	if _, err := l.Decide(ctx, []service.Check{{Key: mine + ":a", Rule: "r", Cost: 1}, {Key: keyIn("y", 0, 8191), Rule: "s", Cost: 3}}, true); err != nil {
		t.Fatal(err)
	}
	if n := len(local.alls); n != 1 || !local.alls[0] {
		t.Errorf("a group served here: local calls %v (all_or_nothing %v)", local.calls, local.alls)
	}
}

// TestDecideDuringAMove: slots this node waits for (incoming) go to
// their old owner until their state arrives, then are decided here;
// slots it gives away (outgoing) are decided here until handed over.
func TestDecideDuringAMove(t *testing.T) {
	r := startRemote(t)
	// Version 2: this node takes 8192-12287 from the remote node and
	// gives it 4096-8191.
	l, local, st := newLimiter(t, r.srv.Addr, []cluster.Node{
		node(selfID, "127.0.0.1:1", cluster.Range{Start: 0, End: 4095}, cluster.Range{Start: 8192, End: 12287}),
		node(otherID, r.srv.Addr, cluster.Range{Start: 4096, End: 8191}, cluster.Range{Start: 12288, End: cluster.Slots - 1}),
	})
	ctx := context.Background()
	incoming, outgoing := keyIn("in", 8192, 12287), keyIn("out", 4096, 8191)
	if _, err := l.Decide(ctx, []service.Check{{Key: incoming, Rule: "r", Cost: 1}, {Key: outgoing, Rule: "r", Cost: 1}}, false); err != nil {
		t.Fatal(err)
	}
	if want := "[RL.ALLOW " + incoming + " r 1]"; fmt.Sprint(r.sent()) != want {
		t.Errorf("while incoming: the old owner was sent %q, want %s", r.sent(), want)
	}
	if len(local.calls) != 1 || local.calls[0][0].Key != outgoing {
		t.Errorf("while outgoing: local calls %v, want the outgoing key", local.calls)
	}
	var in []uint16
	for s := uint16(8192); s <= 12287; s++ {
		in = append(in, s)
	}
	if err := st.FinishIncoming(in); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Decide(ctx, []service.Check{{Key: incoming, Rule: "r", Cost: 1}}, false); err != nil {
		t.Fatal(err)
	}
	if len(r.sent()) != 1 || len(local.calls) != 2 {
		t.Errorf("once the state arrived: sent %q, local calls %v; want it decided here", r.sent(), local.calls)
	}
}

func TestDecideFailures(t *testing.T) {
	r := startRemote(t)
	l, _, _ := newLimiter(t, r.srv.Addr)
	ctx := context.Background()
	theirs := []service.Check{{Key: keyIn("k", 8192, cluster.Slots-1), Rule: "r", Cost: 1}}

	r.answer("-ERR unknown rule 'r'\r\n")
	if _, err := l.Decide(ctx, theirs, false); err == nil || !strings.Contains(err.Error(), "unknown rule 'r'") {
		t.Errorf("an error reply: %v", err)
	}
	// The owner's map says another node: this one routes again, and gives
	// up rather than loop.
	r.answer("-MOVED 9000 127.0.0.1:1\r\n")
	if _, err := l.Decide(ctx, theirs, false); !errors.Is(err, errRerouted) {
		t.Errorf("MOVED every time: %v", err)
	}
	r.answer("*2\r\n:1\r\n:2\r\n")
	if _, err := l.Decide(ctx, theirs, false); !errors.Is(err, errMalformed) {
		t.Errorf("a malformed reply: %v", err)
	}
	// An owner that does not answer: the call's deadline, else the pool's
	// timeout (1 s here), bounds the wait.
	r.answer("") // an empty reply: the fake node sends nothing
	ctx200, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := l.Decide(ctx200, theirs, false); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a silent owner, a call with a deadline: %v", err)
	}
	var silent *cluster.OwnerUnreachableError
	if _, err := l.Decide(ctx, theirs, false); !errors.As(err, &silent) || !silent.Sent {
		t.Errorf("a silent owner, a call without a deadline: %v", err)
	}
	r.srv.Close()
	start := time.Now()
	_, err := l.Decide(ctx, theirs, false)
	var oe *cluster.OwnerUnreachableError
	if !errors.As(err, &oe) || time.Since(start) > 5*time.Second {
		t.Errorf("owner down: %v after %v", err, time.Since(start))
	}
}

func TestDecideWithoutAMap(t *testing.T) {
	st, err := cluster.NewState(cluster.Config{Mode: cluster.On, SelfID: selfID})
	if err != nil {
		t.Fatal(err)
	}
	l := &Limiter{Local: &fakeLocal{}, State: st}
	if _, err := l.Decide(context.Background(), []service.Check{{Key: "k", Rule: "r", Cost: 1}}, false); !errors.Is(err, cluster.ErrClusterDown) {
		t.Errorf("no map: %v", err)
	}
}
