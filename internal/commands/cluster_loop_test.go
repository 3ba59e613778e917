package commands_test

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/cluster/forward"
	"github.com/rlserver/rlserver/internal/commands"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/testserver"
)

// silentPeer listens like a node that accepts connections and never
// answers. hangUp closes its connections (so a request waiting on one fails
// at once) and its listener; it runs at the end of the test too.
func silentPeer(t *testing.T) (addr *net.TCPAddr, hangUp func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	var once sync.Once
	hangUp = func() {
		once.Do(func() {
			ln.Close()
			<-done
			mu.Lock()
			defer mu.Unlock()
			for _, c := range conns {
				c.Close()
			}
		})
	}
	t.Cleanup(hangUp)
	return ln.Addr().(*net.TCPAddr), hangUp
}

// TestClusterForwardDoesNotStallItsLoop: with one event loop serving every
// connection of a node in cluster mode, a command forwarded to a peer that
// does not answer holds up no other connection: PING and a decision for a
// slot the node owns are answered within 2 s while the forwarded command
// waits (for up to the pool's 30 s timeout), and the forwarded command gets
// its CLUSTERDOWN once the peer hangs up.
func TestClusterForwardDoesNotStallItsLoop(t *testing.T) {
	peer, hangUp := silentPeer(t)
	st, err := cluster.NewState(cluster.Config{Mode: cluster.On, SelfID: selfID})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cluster.NewMap(1, []cluster.Node{
		{ID: selfID, Host: "127.0.0.1", Port: 7001, Slots: []cluster.Range{{Start: 0, End: 8191}}},
		{ID: otherID, Host: "127.0.0.1", Port: peer.Port, Slots: []cluster.Range{{Start: 8192, End: cluster.Slots - 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(m); err != nil {
		t.Fatal(err)
	}
	pool := forward.New(forward.Options{Timeout: 30 * time.Second})
	t.Cleanup(func() { pool.Close() })
	ts := testserver.Start(t, testserver.Options{EventLoops: 1, Model: true,
		Rules:   []rules.Def{testserver.Def("r", "token_bucket", "10", "24h", "")},
		Cluster: &commands.ClusterConfig{State: st, Forward: pool, Peers: pool}})
	t.Cleanup(hangUp) // before the server's shutdown, which waits for the forwarded command
	if ts.Server.EventLoops() != 1 {
		t.Skip("no event loops on this platform")
	}
	waiting, other := dialScript(t, ts), dialScript(t, ts)
	waiting.send("RL.ALLOW", keyIn("far", false), "r")

	other.c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if got := other.do("PING"); got != "+PONG" {
		t.Fatalf("PING while a forwarded command waits: %q", got)
	}
	if got := other.do("RL.ALLOW", keyIn("near", true), "r"); !strings.HasPrefix(got, "*6 :1") {
		t.Fatalf("a local decision while a forwarded command waits: %q", got)
	}
	hangUp() // the waiting request fails now
	waiting.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if got := waiting.read(); !strings.HasPrefix(got, "-CLUSTERDOWN") {
		t.Fatalf("the forwarded command to a silent peer: %q", got)
	}
}
