package commands

import "github.com/rlserver/rlserver/internal/cluster"

// clusterMayWait reports whether cmds, in cluster mode, hold a command that
// may wait for another node, so that an event loop hands the pipeline to a
// goroutine of its own (server.LongRunner) rather than stall its other
// connections on a peer's round trip: a command forwarded to its slot's
// owner, one for a slot paused while it is handed over, an EXEC whose
// transaction's slot is paused, a rule change broadcast to every node, and
// the map push and slot import of a move. It routes each keyed command
// against the current view; a view that changes before the pipeline runs
// can still make it wait on the loop, for as long as a pause lasts (a
// hand-over's last round trip, bounded by the peer pool's timeouts).
//
// It costs a lookup and, for a keyed command, a CRC16 of its keys; it
// allocates only for commands with movable keys (as routing does).
func (c *session) clusterMayWait(cmds [][][]byte) bool {
	cl := c.h.cfg.Cluster
	if cl == nil {
		return false
	}
	v := cl.State.View()
	if v.Mode() != cluster.On {
		return false
	}
	inMulti, txKeyed, txSlot := c.inMulti, c.cl.txKeyed, c.cl.txSlot
	for _, args := range cmds {
		if len(args) == 0 {
			continue
		}
		cmd, err := commands.resolve(args)
		if err != nil {
			continue
		}
		switch cmd.name {
		case "rl.rule|set", "rl.rule|del", "rl.cluster|setconfig", "rl.cluster|import":
			return true
		case "multi":
			if !inMulti {
				inMulti, txKeyed = true, false
			}
			continue
		case "exec":
			if inMulti && txKeyed && v.Route(txSlot, false).Action == cluster.Wait {
				return true
			}
			inMulti = false
			continue
		case "discard":
			inMulti = false
			continue
		}
		slot, ok, err := commandSlot(cmd, args)
		if err != nil || !ok {
			continue
		}
		if inMulti {
			txKeyed, txSlot = true, slot
		}
		mayForward := cluster.MayForward(cl.Forward != nil, !forwardable(cmd), c.cl.peer, inMulti)
		switch v.Route(slot, mayForward).Action {
		case cluster.Forward, cluster.Wait:
			return true
		case cluster.Ask:
			if c.cl.peer && cl.Forward != nil && forwardable(cmd) && !inMulti {
				return true // relayed on to the old owner (routeSlot)
			}
		}
	}
	return false
}
