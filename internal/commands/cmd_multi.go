package commands

import (
	"github.com/rlserver/rlserver/internal/service"
)

// MULTI/EXEC: commands queued after MULTI run at EXEC as one step — the
// connection holds every shard while they run (service.Session.Exec), so no other
// client's command interleaves with them, across shards too. A command
// that would message a shard itself (SAVE, RL.RULE RELOAD, ...) could never
// be answered while the shards are held: such commands carry flagNoMulti
// and are refused when queued.

var (
	errNestedMulti = replyError("ERR MULTI calls can not be nested")
	errExecNoMulti = replyError("ERR EXEC without MULTI")
	errDiscardNoTx = replyError("ERR DISCARD without MULTI")
	errExecAbort   = coded("EXECABORT", "Transaction discarded because of previous errors.")
	// errNotInMulti refuses, while queueing, a command with flagNoMulti.
	errNotInMulti   = replyError("ERR Command not allowed inside a transaction")
	errWatchInMulti = replyError("ERR WATCH inside MULTI is not allowed")
	// WATCH would need a version on every key and a check of them all at
	// EXEC; rlserver's transactions instead run with every shard held, and
	// its RL.* and CL.THROTTLE commands are atomic on their own, which
	// covers what rate limiters use WATCH for.
	errWatch = replyError("ERR WATCH is not supported: MULTI/EXEC here always runs as one atomic step, and RL.* and CL.THROTTLE are atomic on their own")
)

func cmdMulti(c *session, args [][]byte) error {
	if c.inMulti {
		return errNestedMulti
	}
	c.inMulti, c.multiErr = true, false
	c.queue = c.queue[:0]
	c.out.OK()
	return nil
}

func cmdDiscard(c *session, args [][]byte) error {
	if !c.inMulti {
		return errDiscardNoTx
	}
	c.endMulti()
	c.out.OK()
	return nil
}

func (c *session) endMulti() {
	c.inMulti, c.multiErr = false, false
	clear(c.queue)
	c.queue = c.queue[:0]
}

// queueCommand answers a command admitted inside MULTI: QUEUED, to run at
// EXEC. As in Redis, only what admit checks (existence, arity, flags) can
// fail now, and the queue's size (reserveQueued: a transaction runs as one
// command, so it is bounded as one); any other error is the command's reply
// inside EXEC's.
func (c *session) queueCommand(args [][]byte) {
	if err := c.reserveQueued(args); err != nil {
		c.multiErr = true
		c.out.Error(errorText(err))
		return
	}
	// The arguments point into the connection's read buffer, which the
	// next pipeline reuses: keep a copy until EXEC.
	kept := make([][]byte, len(args))
	for i, a := range args {
		kept[i] = append([]byte(nil), a...)
	}
	c.queue = append(c.queue, kept)
	c.out.Simple("QUEUED")
}

func cmdExec(c *session, args [][]byte) error {
	if !c.inMulti {
		return errExecNoMulti
	}
	defer c.endMulti()
	if c.multiErr {
		return errExecAbort
	}
	mark := c.out.Len()
	c.out.Array(len(c.queue))
	err := c.batch.ss.Exec(func(db *service.DB) {
		c.db = db
		defer func() { c.db = nil }()
		for _, args := range c.queue {
			// Admitted when queued, so it resolves now as it did then.
			cmd, _ := commands.resolve(args)
			c.runQueued(cmd, args)
			if c.panicked || c.stopped() {
				return // the connection closes; what follows is dropped
			}
		}
	})
	if err != nil { // a shard failed: nothing ran
		c.out.Truncate(mark)
		return err
	}
	return nil
}

// runQueued runs one queued command inside EXEC, on the held keyspace, and
// writes its reply.
func (c *session) runQueued(cmd *command, args [][]byte) {
	switch {
	case cmd.prepare != nil:
		op, ok, err := c.prepare(cmd, args)
		if !ok {
			c.answerPanic(cmd)
			return
		}
		if err == nil {
			c.db.Apply(&op)
		}
		if err != nil {
			c.out.Error(errorText(err))
			return
		}
		c.reply(cmd, &op)
		c.answerPanic(cmd)
	case cmd.exec != nil:
		c.runKeyed(cmd, args)
	default:
		c.run(cmd, args)
		c.answerPanic(cmd)
	}
}

// reserveQueued counts a command MULTI is about to queue against the limits
// of one command, since EXEC runs the whole queue as one: at most MaxArgs
// arguments and QueryBufferLimit bytes of them in all. Over either, the
// command is refused and the transaction will abort.
func (c *session) reserveQueued(args [][]byte) error {
	if len(c.queue) == 0 {
		c.queuedArgs, c.queuedBytes = 0, 0
	}
	n := int64(0)
	for _, a := range args {
		n += int64(len(a))
	}
	lim := c.conn.Server().Limits()
	if c.queuedArgs+int64(len(args)) > lim.MaxArgs || c.queuedBytes+n > lim.QueryBufferLimit {
		return errf("transaction too large: the commands queued since MULTI may hold at most --max-args %d arguments and --client-query-buffer-limit %d bytes", lim.MaxArgs, lim.QueryBufferLimit)
	}
	c.queuedArgs += int64(len(args))
	c.queuedBytes += n
	return nil
}

func cmdWatch(c *session, args [][]byte) error {
	if c.inMulti {
		return errWatchInMulti
	}
	return errWatch
}

// cmdUnwatch succeeds: with no WATCH there is nothing to forget, and client
// libraries send it when they reset a connection.
func cmdUnwatch(c *session, args [][]byte) error {
	c.out.OK()
	return nil
}
