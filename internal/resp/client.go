package resp

import (
	"net"
	"time"

	"github.com/rlserver/rlserver/internal/keyspace"
)

// client is one connection's state. It belongs to the connection's
// goroutine: nothing else reads or writes it.
type client struct {
	srv     *Server
	nc      net.Conn  // nil when an event loop serves the connection
	conn    *loopConn // the event loop's state for it, nil otherwise
	id      uint64
	addr    string // remote
	laddr   string // local
	created int64  // ns since the epoch
	name    string // CLIENT SETNAME
	libName string // CLIENT SETINFO LIB-NAME
	libVer  string // CLIENT SETINFO LIB-VER
	quit    bool   // close after this pipeline's replies are written
	authed  bool   // AUTH succeeded, or no password is required

	out      replyWriter
	batch    *batch      // where this client's shard operations wait to be run
	groupOps []keyspace.Op // RL.ALLOWALL's pairs, reused

	// MULTI state: queued commands, whether one was refused (EXEC then
	// aborts), and the transaction while EXEC runs them.
	inMulti  bool
	multiErr bool
	queue    [][][]byte
	tx       *keyspace.Tx
}

// batch gathers shard operations — of one connection's pipeline, or of
// every connection an event loop found ready — so each shard receives them
// as one message. It belongs to one goroutine.
type batch struct {
	srv     *Server
	disp    *keyspace.Dispatcher
	pending []pendingReply // operations awaiting their replies, in the order added
}

// pendingReply is a shard operation whose reply is written to its client
// after the dispatcher has run.
type pendingReply struct {
	c      *client
	ticket int
	cmd    *command
}

func (s *Server) newBatch() *batch {
	return &batch{srv: s, disp: s.cfg.Shards.NewDispatcher()}
}

// newClient returns the state of a connection from remote address addr to
// local address laddr, whose shard operations wait in b.
func (s *Server) newClient(addr, laddr string, b *batch) *client {
	return &client{
		srv:     s,
		id:      s.nextClientID.Add(1),
		addr:    addr,
		laddr:   laddr,
		created: s.cfg.Clock(),
		out:     replyWriter{proto: 2},
		authed:  s.cfg.Password == "",
		batch:   b,
	}
}

// execute runs one pipeline. Shard operations accumulate in the batch, and
// the caller runs it (flush) once it has executed every pipeline sharing
// the batch; before any other command (or error) is answered, the batch is
// run and answered first, so replies always come back in the order sent and
// a command sees the effects of every command before it.
func (c *client) execute(cmds [][][]byte) {
	for _, args := range cmds {
		cmd, err := c.admit(args)
		if err != nil {
			c.reject(cmd, err)
			continue
		}
		if c.inMulti && cmd.flags&flagTxControl == 0 {
			c.flushPending()
			c.queueCommand(args)
			continue
		}
		if cmd.prepare != nil {
			op, err := cmd.prepare(c, args)
			if err != nil {
				c.fail(err)
				continue
			}
			c.batch.pending = append(c.batch.pending, pendingReply{c, c.batch.disp.Add(op), cmd})
			continue
		}
		c.flushPending()
		var start time.Time
		if c.srv.observers != nil {
			start = time.Now()
		}
		if err := cmd.run(c, args); err != nil {
			c.out.errorReply(errorText(err))
		}
		if c.srv.observers != nil {
			c.srv.observers[cmd.index].Observe(time.Since(start).Seconds())
		}
		if c.quit {
			break // Redis ignores what follows QUIT
		}
		if len(c.out.b) > int(c.srv.limits.OutputLimit) {
			break // the connection is cut once the batch has run
		}
	}
}

// fail answers the current command with err, after the pending replies.
func (c *client) fail(err error) {
	c.flushPending()
	c.out.errorReply(errorText(err))
}

// flushPending runs the batch the client's operations wait in.
func (c *client) flushPending() { c.batch.flush() }

// flush runs the accumulated shard operations and writes each reply to its
// client's buffer.
func (b *batch) flush() {
	if len(b.pending) == 0 {
		return
	}
	observers := b.srv.observers
	var start time.Time
	if observers != nil {
		start = time.Now()
	}
	b.disp.Run()
	if observers != nil {
		// Each operation waited for the whole batch: that is its latency.
		d := time.Since(start).Seconds()
		for _, p := range b.pending {
			observers[p.cmd.index].Observe(d)
		}
	}
	for _, p := range b.pending {
		op := b.disp.Op(p.ticket)
		if op.Err != nil {
			p.c.out.errorReply(errorText(op.Err))
			continue
		}
		p.cmd.reply(p.c, op)
	}
	b.disp.Reset()
	clear(b.pending)
	b.pending = b.pending[:0]
}

// The keyspace, as a command sees it: through the dispatcher normally, and
// directly through the transaction while EXEC runs (the shards are then held
// by this connection, so messages to them would never be answered).

// atomic performs ops in order as one step.
func (c *client) atomic(ops []keyspace.Op) {
	if c.tx != nil {
		for i := range ops {
			c.tx.Apply(&ops[i])
		}
		return
	}
	c.batch.disp.Atomic(ops)
}

func (c *client) allowAll(ops []keyspace.Op) (bool, error) {
	if c.tx != nil {
		return c.tx.AllowAll(ops)
	}
	return c.batch.disp.AllowAll(ops)
}

func (c *client) stats() keyspace.Stats {
	if c.tx != nil {
		return c.tx.Stats()
	}
	return c.srv.cfg.Shards.Stats()
}

func (c *client) flushAll() {
	if c.tx != nil {
		c.tx.Flush()
		return
	}
	c.srv.cfg.Shards.Flush()
}

func (c *client) reconcile() {
	if c.tx != nil {
		c.tx.Reconcile()
		return
	}
	c.srv.cfg.Shards.Reconcile()
}
