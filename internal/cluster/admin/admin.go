// Package admin is `rlserver cluster create` and `rlserver cluster check`:
// the operator's tools that compute a slot map, push it to every node with
// RL.CLUSTER SETCONFIG, and compare what each node holds. They talk to
// nodes as any client does (go-redis), so they run from anywhere that can
// reach the nodes' announced addresses.
package admin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/cluster/forward"
)

// Options configure how the tools reach the nodes.
type Options struct {
	// Username and Password authenticate to every node (the cluster's
	// --requirepass); no password: no AUTH.
	Username, Password string
	// TLS, if set, connects over TLS, to the nodes' TLS ports.
	TLS *tls.Config
	// Timeout bounds each call to a node. Default 5s.
	Timeout time.Duration
}

// ErrFailed: the tool finished, and what it printed says what went wrong
// (a node refused or could not be reached, nodes disagree). The command's
// exit status should be non-zero.
var ErrFailed = errors.New("cluster check failed")

// node is a connection to one node, by address.
type node struct {
	addr string
	p    *forward.Pool
}

func dial(addr string, opt Options) *node {
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &node{addr: addr, p: forward.New(forward.Options{
		Username: opt.Username, Password: opt.Password, TLS: opt.TLS,
		DialTimeout: timeout, Timeout: timeout, MaxConns: 1, MaxReplyBytes: 2 * cluster.MaxMapBytes,
	})}
}

func (n *node) close() { n.p.Close() }

// errNull is a null reply.
var errNull = errors.New("null reply")

// do sends one command and returns its reply's text: a simple string, a
// bulk string or an integer; an error reply or a null is an error.
func (n *node) do(ctx context.Context, args ...string) (string, error) {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	reply, err := n.p.Do(ctx, n.addr, 2, bs, nil)
	if err != nil {
		var fe *forward.Error
		if errors.As(err, &fe) {
			return "", fe.Err // the address is the caller's to add
		}
		return "", err
	}
	body := string(reply[1 : len(reply)-2])
	switch reply[0] {
	case '+', ':':
		return body, nil
	case '-':
		return "", errors.New(body)
	case '$':
		if body == "-1" {
			return "", errNull
		}
		_, text, _ := strings.Cut(string(reply[:len(reply)-2]), "\r\n")
		return text, nil
	}
	return "", fmt.Errorf("unexpected reply %.40q", reply)
}

// myID asks the node its id, explaining the usual reason it fails.
func (n *node) myID(ctx context.Context) (string, error) {
	id, err := n.do(ctx, "CLUSTER", "MYID")
	if err != nil {
		if strings.Contains(err.Error(), "cluster support disabled") {
			return "", fmt.Errorf("cluster mode is off on this node: start it with --cluster on")
		}
		return "", fmt.Errorf("CLUSTER MYID: %w", err)
	}
	if !cluster.ValidNodeID(id) {
		return "", fmt.Errorf("CLUSTER MYID answered %q, not a node id", id)
	}
	return id, nil
}

// config fetches the node's map: nil if it has none.
func (n *node) config(ctx context.Context) (*cluster.Map, error) {
	text, err := n.do(ctx, "RL.CLUSTER", "GETCONFIG")
	if errors.Is(err, errNull) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("RL.CLUSTER GETCONFIG: %w", err)
	}
	m, err := cluster.ParseMap([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("RL.CLUSTER GETCONFIG: %w", err)
	}
	return m, nil
}

// rules reads the rule set's version and digest from RL.INFO; digest is ""
// when the node does not report one.
func (n *node) rules(ctx context.Context) (version, digest string, err error) {
	text, err := n.do(ctx, "RL.INFO")
	if err != nil {
		return "", "", fmt.Errorf("RL.INFO: %w", err)
	}
	for _, line := range strings.Split(text, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "rl_rules_version":
			version = v
		case "rl_rules_digest":
			digest = v
		}
	}
	return version, digest, nil
}

// parseAddrs checks the node addresses given on the command line.
func parseAddrs(args []string) ([]cluster.Node, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("no node addresses given (host:port ...)")
	}
	seen := map[string]bool{}
	var nodes []cluster.Node
	for _, a := range args {
		host, port, err := cluster.SplitAddr(a)
		if err != nil {
			return nil, fmt.Errorf("node address %s: %v", a, err)
		}
		if seen[a] {
			return nil, fmt.Errorf("node address %s is given twice", a)
		}
		seen[a] = true
		nodes = append(nodes, cluster.Node{Host: host, Port: port})
	}
	return nodes, nil
}

// rangesText writes a node's slots as CLUSTER NODES does: "0-5460 7000".
func rangesText(rs []cluster.Range) string {
	if len(rs) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(int(r.Start)))
		if r.End != r.Start {
			b.WriteString("-" + strconv.Itoa(int(r.End)))
		}
	}
	return b.String()
}

func printNode(w io.Writer, n *cluster.Node, tls bool) {
	fmt.Fprintf(w, "  %s %s slots %s (%d)\n", n.ID, n.ClientAddr(tls), rangesText(n.Slots), n.SlotCount())
}
