package resp

import (
	"errors"

	"github.com/rlserver/rlserver/internal/keyspace"
)

// MULTI/EXEC: commands queued after MULTI run at EXEC as one step — the
// connection holds every shard while they run (keyspace.Tx), so no other
// client's command interleaves with them, across shards too. A command
// that would message a shard itself (SAVE, RL.RULE RELOAD, ...) could never
// be answered while the shards are held: such commands carry flagNoMulti
// and are refused when queued.

var (
	errNestedMulti = errors.New("MULTI calls can not be nested")
	errExecNoMulti = errors.New("EXEC without MULTI")
	errDiscardNoTx = errors.New("DISCARD without MULTI")
	errExecAbort   = &codedError{"EXECABORT", "Transaction discarded because of previous errors."}
	// errNotInMulti refuses, while queueing, a command with flagNoMulti.
	errNotInMulti   = errors.New("Command not allowed inside a transaction")
	errWatchInMulti = errors.New("WATCH inside MULTI is not allowed")
	// WATCH would need a version on every key and a check of them all at
	// EXEC; rlserver's transactions instead run with every shard held, and
	// its RL.* and CL.THROTTLE commands are atomic on their own, which
	// covers what rate limiters use WATCH for.
	errWatch = errors.New("WATCH is not supported: MULTI/EXEC here always runs as one atomic step, and RL.* and CL.THROTTLE are atomic on their own")
)

func cmdMulti(c *client, args [][]byte) error {
	if c.inMulti {
		return errNestedMulti
	}
	c.inMulti, c.multiErr = true, false
	c.queue = c.queue[:0]
	c.out.ok()
	return nil
}

func cmdDiscard(c *client, args [][]byte) error {
	if !c.inMulti {
		return errDiscardNoTx
	}
	c.endMulti()
	c.out.ok()
	return nil
}

func (c *client) endMulti() {
	c.inMulti, c.multiErr = false, false
	clear(c.queue)
	c.queue = c.queue[:0]
}

// queueCommand answers a command admitted inside MULTI: QUEUED, to run at
// EXEC. As in Redis, only what admit checks (existence, arity, flags) can
// fail now, and the queue's size (reserveQueued: a transaction runs as one
// command, so it is bounded as one); any other error is the command's reply
// inside EXEC's.
func (c *client) queueCommand(args [][]byte) {
	if err := c.reserveQueued(args); err != nil {
		c.multiErr = true
		c.out.errorReply(errorText(err))
		return
	}
	// The arguments point into the connection's read buffer, which the
	// next pipeline reuses: keep a copy until EXEC.
	kept := make([][]byte, len(args))
	for i, a := range args {
		kept[i] = append([]byte(nil), a...)
	}
	c.queue = append(c.queue, kept)
	c.out.simple("QUEUED")
}

func cmdExec(c *client, args [][]byte) error {
	if !c.inMulti {
		return errExecNoMulti
	}
	defer c.endMulti()
	if c.multiErr {
		return errExecAbort
	}
	c.out.array(len(c.queue))
	c.batch.disp.Exec(func(tx *keyspace.Tx) {
		c.tx = tx
		defer func() { c.tx = nil }()
		for _, args := range c.queue {
			// Admitted when queued, so it resolves now as it did then.
			cmd, _ := commands.resolve(args)
			c.runQueued(cmd, args)
		}
	})
	return nil
}

// runQueued runs one queued command inside EXEC and writes its reply.
func (c *client) runQueued(cmd *command, args [][]byte) {
	if cmd.prepare != nil {
		op, err := cmd.prepare(c, args)
		if err == nil {
			c.tx.Apply(&op)
			err = op.Err
		}
		if err != nil {
			c.out.errorReply(errorText(err))
			return
		}
		cmd.reply(c, &op)
		return
	}
	if err := cmd.run(c, args); err != nil {
		c.out.errorReply(errorText(err))
	}
}

func cmdWatch(c *client, args [][]byte) error {
	if c.inMulti {
		return errWatchInMulti
	}
	return errWatch
}

// cmdUnwatch succeeds: with no WATCH there is nothing to forget, and client
// libraries send it when they reset a connection.
func cmdUnwatch(c *client, args [][]byte) error {
	c.out.ok()
	return nil
}
