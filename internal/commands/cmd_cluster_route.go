package commands

import (
	"bytes"
	"context"
	"errors"

	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/cluster/forward"
	"github.com/rlserver/rlserver/internal/resp"
)

// routeCluster checks, in cluster mode, that this node serves the slot of
// an admitted command's keys, as Redis Cluster does before running or
// queueing a command. It reports whether it answered the command itself:
// -CROSSSLOT (keys in two slots), -MOVED (another node owns the slot),
// -CLUSTERDOWN (no map yet), or the owner's reply to the command forwarded
// there. false: the command runs here as usual.
//
// The keys are found from the command table's key positions (movable keys
// through the command's key finder), so every keyed command, whoever adds
// it, is routed with no code here. Inside MULTI a refused command dooms the
// transaction, as Redis does; EXEC refuses a transaction whose queued keys
// span slots (CROSSSLOT), or whose slot the node no longer serves.
func (c *session) routeCluster(cmd *command, args [][]byte) bool {
	switch cmd.name {
	case "multi":
		if !c.inMulti {
			c.cl.txKeyed, c.cl.txCross = false, false
		}
		return false
	case "exec":
		return c.routeExec(cmd)
	case "rl.rule|set", "rl.rule|del":
		return c.broadcastRule(cmd, args)
	}
	slot, ok, err := commandSlot(cmd, args)
	switch {
	case err != nil:
		c.reject(cmd, replyError(err.Error()))
		return true
	case !ok:
		return false
	}
	if c.inMulti {
		if c.cl.txKeyed && slot != c.cl.txSlot {
			c.cl.txCross = true
		}
		c.cl.txKeyed, c.cl.txSlot = true, slot
	}
	answered, err := c.routeSlot(cmd, args, slot)
	if err != nil {
		c.reject(cmd, err)
	}
	return answered || err != nil
}

// routeSlot routes a command whose keys hash to slot (see routeCluster):
// it returns false and no error to run it here, true when it answered
// (forwarded), or the error to refuse it with.
func (c *session) routeSlot(cmd *command, args [][]byte, slot uint16) (bool, error) {
	cl := c.h.cfg.Cluster
	mayForward := cluster.MayForward(cl.Forward != nil, !forwardable(cmd), c.cl.peer, c.inMulti)
	for {
		v := cl.State.View()
		d := v.Route(slot, mayForward)
		switch d.Action {
		case cluster.Serve, cluster.ServeMoving:
			if c.batch.gate != nil || !cl.State.HandsOver() {
				return false, nil
			}
			// Hold the gate until the pipeline is done, so that a
			// hand-over that starts meanwhile waits for this command,
			// then route again: the map may have changed while waiting
			// for the gate.
			cl.State.Gate.Enter()
			c.batch.gate = &cl.State.Gate
			continue
		case cluster.Wait:
			// Run the batch and release the gate before waiting, so the
			// hand-over that paused the slot can proceed.
			if !c.flushAndLeaveGate() {
				return true, nil
			}
			<-v.Resumed()
			continue
		case cluster.Ask:
			// A peer's command for a slot this node waits for goes on to
			// the old owner, which never forwards a peer's command: at
			// most two hops, and the client need not know of the move.
			if c.cl.peer && cl.Forward != nil && forwardable(cmd) && !c.inMulti {
				if c.forward(d, args) {
					return true, nil
				}
				continue
			}
		case cluster.Forward:
			if c.forward(d, args) {
				return true, nil
			}
			continue // the owner sent it back: the slot is served here now
		}
		return false, routeError(d, cl.TLS)
	}
}

// routeExec checks a transaction at EXEC: its keys must share one slot,
// which this node must still serve. A refused EXEC discards the
// transaction and answers the reason itself (not EXECABORT), as Redis does.
func (c *session) routeExec(cmd *command) bool {
	if !c.inMulti || c.multiErr || !c.cl.txKeyed {
		return false // cmdExec answers
	}
	err := error(cluster.ErrCrossSlot)
	if !c.cl.txCross {
		// Routed as the transaction's commands were (never forwarded):
		// served here, or refused with the reason.
		var answered bool
		if answered, err = c.routeSlot(cmd, nil, c.cl.txSlot); err == nil {
			return answered
		}
	}
	if c.flushPending() {
		c.endMulti()
		c.out.Error(err.Error())
	}
	return true
}

// routeError is the reply to a command for a slot this node does not
// serve: MOVED to the owner, ASK to the old owner, or CLUSTERDOWN.
func routeError(d cluster.Decision, tls bool) error {
	if d.Action == cluster.Moved || d.Action == cluster.Ask {
		return replyError(d.Redirect(tls).Error())
	}
	return replyError(d.Err.Error())
}

// commandSlot returns the one slot args's keys hash to (ok false for a
// command with no key), or CROSSSLOT. It allocates only for commands with
// movable keys.
func commandSlot(cmd *command, args [][]byte) (slot uint16, ok bool, err error) {
	if cmd.movableKeys == nil {
		if cmd.keys.first == 0 {
			return 0, false, nil
		}
		return cluster.KeysSlot(args, cmd.keys.first, cmd.keys.last, cmd.keys.step)
	}
	for _, i := range cmd.movableKeys(args) {
		s := cluster.KeySlot(args[i])
		if ok && s != slot {
			return 0, false, cluster.ErrCrossSlot
		}
		slot, ok = s, true
	}
	return slot, ok, nil
}

// forwardable reports whether a command for a slot owned elsewhere is
// relayed to the owner rather than answered MOVED: rlserver's own commands
// (RL.*, CL.THROTTLE), which stock cluster clients do not know and so
// cannot route by key (ioredis sends them to any node). Commands every
// cluster client routes get MOVED, which also corrects a stale slot table
// (see cluster.MayForward).
func forwardable(cmd *command) bool {
	return cmd.group == groupRatelimit || cmd.group == groupModule
}

// forward relays the command to the slot's owner and writes the owner's
// reply, byte for byte, after the replies pending before it. The
// connection waits for the reply (bounded by the pool's timeouts), which
// keeps a pipeline's replies in order. A failure answers CLUSTERDOWN,
// saying whether the request may have run on the owner. It reports false,
// writing nothing, when the owner redirected the command (it never
// forwards a peer's) and this node now serves the slot itself: the slot
// was handed over to it while the command was in flight, so the caller
// routes it again.
func (c *session) forward(d cluster.Decision, args [][]byte) bool {
	// The owner may be waiting for this node's hand-over, which waits for
	// the gate: release it while waiting for the owner.
	if !c.flushAndLeaveGate() {
		return true
	}
	cl := c.h.cfg.Cluster
	addr := d.Owner.PeerAddr(cl.TLS)
	reply, err := cl.Forward.Do(context.Background(), addr, c.out.Proto(), args, c.cl.reply[:0])
	if err != nil {
		var fe *forward.Error
		sent := errors.As(err, &fe) && fe.Sent
		c.out.Error((&cluster.OwnerUnreachableError{Slot: d.Slot, Addr: addr, Sent: sent}).Error())
		return true
	}
	if redirected(reply) {
		if a := cl.State.View().Route(d.Slot, false).Action; a == cluster.Serve || a == cluster.ServeMoving {
			return false
		}
	}
	c.out.Raw(reply)
	c.out.OverLimit()
	if cap(reply) <= resp.KeepBuffer {
		c.cl.reply = reply[:0]
	} else {
		c.cl.reply = nil
	}
	return true
}

// redirected reports whether a reply is a MOVED or ASK error.
func redirected(reply []byte) bool {
	return bytes.HasPrefix(reply, []byte("-MOVED ")) || bytes.HasPrefix(reply, []byte("-ASK "))
}

// flushAndLeaveGate runs the pending work and releases the hand-over gate
// the batch holds, before the connection waits for another node or for a
// hand-over: what needed the gate has run. It reports what flushPending
// does.
func (c *session) flushAndLeaveGate() bool {
	ok := c.flushPending()
	if c.batch.gate != nil {
		c.batch.leaveGate()
	}
	return ok
}
