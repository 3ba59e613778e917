package commands

import (
	"sync/atomic"

	"github.com/rlserver/rlserver/internal/resp"
	"github.com/rlserver/rlserver/internal/server"
	"github.com/rlserver/rlserver/internal/service"
)

// session is one connection's command state. It belongs to the goroutine
// that serves the connection (see server.Conn).
type session struct {
	h     *Handler
	conn  *server.Conn
	out   *resp.Writer // the connection's replies
	batch *batch       // where this connection's work waits to be run

	groupOps []service.Op // RL.ALLOWALL's operations, reused
	keys     [][]byte     // a multi-key command's keys, reused
	held     keyed        // a keyed command run in place (inside EXEC, or over several shards)
	// pendingValue is set while one of this connection's commands whose
	// reply may carry a stored value (GET, SET ... GET) waits in the
	// batch; a second one runs the batch first, so at most one such reply
	// is held beyond the output buffer (see resp.Writer).
	pendingValue bool
	// queuedReplies counts the bytes of reply this connection's queued
	// scripts hold until the batch has run (script_queue.go): at most the
	// output limit, past which the client would be cut off anyway once they
	// were copied to its output. Queued scripts add to it on their shards.
	queuedReplies atomic.Int64
	panicked      bool // the handler just called panicked (recoverHandler)

	// MULTI state: queued commands, whether one was refused (EXEC then
	// aborts), and the keyspace while EXEC runs them (held: every shard).
	// queuedArgs and queuedBytes count the queue against MaxArgs and
	// QueryBufferLimit.
	inMulti     bool
	multiErr    bool
	queue       [][][]byte
	queuedArgs  int64
	queuedBytes int64
	db          *service.DB

	cl     clusterConn // cluster mode's per-connection state
	script *scriptTask // the running script's state, reused (script_run.go)
	// observed, in a script's session, keeps its commands' durations
	// until the script's run is final (script_run.go).
	observed *[]observation
}

// Multi implements server.Session.
func (c *session) Multi() (queued, bytes int) {
	if !c.inMulti {
		return -1, 0
	}
	return len(c.queue), int(c.queuedBytes) + int(c.queuedArgs)*int(resp.SliceHeaderSize)
}

// Shrink implements server.Session: it drops reusable buffers a big command
// grew past resp.KeepBuffer.
func (c *session) Shrink() {
	if cap(c.groupOps)*int(opSize) > resp.KeepBuffer {
		c.groupOps = nil
	}
	if cap(c.keys)*int(resp.SliceHeaderSize) > resp.KeepBuffer {
		c.keys = nil
	}
	if cap(c.held.scratch) > resp.KeepBuffer {
		c.held.scratch = nil
	}
	if !c.inMulti && cap(c.queue)*int(resp.SliceHeaderSize) > resp.KeepBuffer {
		c.queue = nil
	}
}

// handle is the keyspace as the running command sees it: the session's
// batch (pooled: a message to the shards), or while EXEC runs the held
// shards, which messages would never reach.
func (c *session) handle() service.Handle {
	if c.db != nil {
		return c.db
	}
	return c.batch.ss
}

// stopped reports whether the connection's remaining commands are to be
// dropped: it quit, broke a limit, or a handler panicked.
func (c *session) stopped() bool { return c.conn.Stopped() }

// Execute implements server.Session: it runs one pipeline. Work for the
// shards accumulates in the batch, and the server runs it (Flush) once it
// has executed every pipeline sharing the batch; before any other command
// (or error) is answered, the batch is run and answered first, so replies
// always come back in the order sent and a command sees the effects of
// every command before it.
func (c *session) Execute(cmds [][][]byte) {
	for _, args := range cmds {
		if c.stopped() {
			break // Redis ignores what follows QUIT; a client over a limit is closed
		}
		cmd, err := c.admit(args)
		if cmd != nil {
			c.conn.SetLastCommand(cmd.name)
		}
		if err == nil {
			err = c.gateCommand(cmd, args) // BUSY while a script holds its shards
		}
		switch {
		case err != nil:
			c.reject(cmd, err)
		case c.h.cfg.Cluster != nil && c.routeCluster(cmd, args):
			// Answered: redirected, refused or forwarded (cmd_cluster_route.go).
		case c.inMulti && cmd.flags&flagTxControl == 0:
			if c.flushPending() {
				c.queueCommand(args)
				c.out.OverLimit()
			}
		case cmd.queue != nil && cmd.queue(c, cmd, args):
			// Queued in the batch (script_queue.go).
		case cmd.prepare != nil:
			c.addDecision(cmd, args)
		case cmd.exec != nil:
			c.addKeyed(cmd, args)
		default:
			if c.flushPending() {
				c.run(cmd, args)
				c.answerPanic(cmd)
				c.out.OverLimit()
			}
		}
	}
}

// addDecision prepares a decision and adds it to the batch.
func (c *session) addDecision(cmd *command, args [][]byte) {
	op, ok, err := c.prepare(cmd, args)
	switch {
	case !ok: // the handler panicked: answer after the replies pending before it
		c.panicked = false
		if c.flushPending() {
			c.panicked = true
			c.answerPanic(cmd)
		}
		return
	case err != nil:
		c.fail(err)
		return
	}
	if err := c.gateDecision(&op); err != nil {
		c.fail(err)
		return
	}
	b := c.batch
	b.pending = append(b.pending, pending{s: c, ticket: b.ss.Add(op), cmd: cmd})
}

// addKeyed adds a keyed command to the batch, to run on the shard owning its
// one key; a command over several keys runs now, holding their shards, once
// what is pending has been answered.
func (c *session) addKeyed(cmd *command, args [][]byte) {
	if !cmd.singleKey() || len(args) <= cmd.keys.first {
		if c.flushPending() {
			c.runKeyed(cmd, args)
			c.answerPanic(cmd)
			c.out.OverLimit()
		}
		return
	}
	if cmd.valueReply != nil && cmd.valueReply(args) {
		if c.pendingValue && !c.flushPending() {
			return
		}
		c.pendingValue = true
	}
	b := c.batch
	call := b.call(c, cmd, args)
	b.pending = append(b.pending, pending{s: c, ticket: b.ss.AddTask(args[cmd.keys.first], call), cmd: cmd, call: call})
}

// runKeyed runs a keyed command in place: inside EXEC on the held
// keyspace, or holding the shards of its keys. Its reply goes straight to
// the connection's.
func (c *session) runKeyed(cmd *command, args [][]byte) {
	x := &c.held
	x.args, x.out, x.cmd, x.panicked, x.hook = args, c.out, cmd, nil, c.h.cfg.HandlerHook
	var err error
	if c.db != nil {
		x.Run(c.db)
	} else {
		c.keys = c.keys[:0]
		for _, i := range cmd.keyPositions(args) {
			c.keys = append(c.keys, args[i])
		}
		err = c.batch.ss.Do(c.keys, x)
	}
	switch {
	case x.panicked != nil:
		c.h.handlerPanicked(c, cmd, x.panicked)
	case err != nil:
		c.out.Error(errorText(err))
	}
	clear(c.keys)
	x.args, x.out, x.cmd, x.panicked = nil, nil, nil, nil
}

// fail answers the current command with err, after the pending replies.
func (c *session) fail(err error) {
	if c.flushPending() {
		c.out.Error(errorText(err))
	}
}

// flushPending runs the batch the connection's work waits in, so that what
// comes next is answered after it. It reports whether the connection still
// runs commands: one of those replies may have crossed the output limit, or
// its handler panicked.
func (c *session) flushPending() bool {
	c.batch.run()
	return !c.stopped()
}
