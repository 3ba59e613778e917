package commands

import (
	"context"
	"strings"

	"github.com/rlserver/rlserver/internal/cluster"
)

// broadcastRule runs RL.RULE SET or DEL here and then on every other node
// of the map, so that every node keeps applying the same rules (a key's
// decision is made by its owner, with the owner's rules). It reports
// whether it answered the command; false (cluster mode not On, no map, or
// the command came from a peer, which applies it alone) leaves it to run
// as usual.
//
// The reply is this node's, if it refused the change (a bad rule,
// --rules-authoritative); else +OK once every node applied it, or an error
// naming the nodes that did not (those that did keep it: setting a rule to
// the definition it has changes nothing, so a retry converges). Inside
// MULTI it is refused: a transaction runs on one node.
func (c *session) broadcastRule(cmd *command, args [][]byte) bool {
	cl := c.h.cfg.Cluster
	v := cl.State.View()
	if v.Mode() != cluster.On || v.Map() == nil || c.cl.peer || cl.Peers == nil {
		return false
	}
	verb := strings.ToUpper(strings.TrimPrefix(cmd.name, "rl.rule|"))
	if c.inMulti {
		c.reject(cmd, errf("RL.RULE %s is not queued in cluster mode: it is sent to every node, which a transaction cannot do; send it alone", verb))
		return true
	}
	if !c.flushAndLeaveGate() {
		return true
	}
	mark := c.out.Len()
	c.run(cmd, args)
	c.answerPanic(cmd)
	if c.stopped() || c.out.Len() == mark || c.out.Bytes()[mark] == '-' {
		return true // refused here: nothing to send
	}
	m := v.Map()
	var failed []string
	for i := range m.Len() {
		n := m.Node(i)
		if n.ID == v.SelfID() {
			continue
		}
		addr := n.PeerAddr(cl.TLS)
		reply, err := cl.Peers.Do(context.Background(), addr, 2, args, nil)
		switch {
		case err != nil:
			failed = append(failed, addr+" (unreachable)")
		case reply[0] == '-':
			failed = append(failed, addr+" ("+strings.TrimSpace(string(reply[1:]))+")")
		}
	}
	if len(failed) > 0 {
		c.out.Truncate(mark)
		c.out.Error(errf("rule %s on %d of %d nodes; not on %s: retry, or see rlserver cluster check",
			strings.ToLower(verb), m.Len()-len(failed), m.Len(), strings.Join(failed, ", ")).Error())
	}
	return true
}
