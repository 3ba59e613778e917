package resp

import (
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/internal/keyspace"
)

// client is one connection's state. It belongs to the goroutine that serves
// the connection (its own, or its event loop's): nothing else writes it,
// and nothing else reads it except killed and pub (made for that: how CLIENT
// KILL, CLIENT LIST and Shutdown reach a connection they do not own) and the
// fields set before the connection is registered with the server (srv, nc,
// loop, id, addr, laddr, fd, created, accepted), which never change.
type client struct {
	srv      *Server
	nc       net.Conn    // nil when an event loop serves the connection
	loop     *eventLoop  // the event loop serving it, nil otherwise
	conn     *loopConn   // the event loop's state for it, nil otherwise
	rd       *reader     // its requests
	id       uint64      // CLIENT ID: unique, ascending in accept order
	addr     string      // remote
	laddr    string      // local
	fd       int         // the socket's descriptor, for CLIENT LIST; -1 if unknown
	created  int64       // ns since the epoch, on the server's Clock (CLIENT LIST age)
	accepted int64       // ns on the server's monotonic clock (Server.mono)
	lastRead int64       // ns on the monotonic clock: when input last arrived
	name     string      // CLIENT SETNAME
	libName  string      // CLIENT SETINFO LIB-NAME
	libVer   string      // CLIENT SETINFO LIB-VER
	lastCmd  string      // the last command's name, for CLIENT LIST
	quit     bool        // close after this pipeline's replies are written
	authed   bool        // AUTH succeeded, or no password is required
	authFail int         // failed AUTH attempts on this connection
	panicked bool        // the handler just called panicked (recoverHandler)
	killed   atomic.Bool // CLIENT KILL: close now (set by any goroutine)
	pub      publication // what CLIENT LIST shows of it to other connections

	out      replyWriter
	batch    *batch        // where this client's shard operations wait to be run
	groupOps []keyspace.Op // DEL's, EXISTS's and RL.ALLOWALL's operations, reused
	// pendingValue is set while one of this client's operations whose
	// reply carries a stored value (GET, SET ... GET) waits in the batch;
	// a second one runs the batch first, so at most one such reply is held
	// beyond the output buffer (see replyWriter).
	pendingValue bool

	// MULTI state: queued commands, whether one was refused (EXEC then
	// aborts), and the transaction while EXEC runs them. queuedArgs and
	// queuedBytes count the queue against MaxArgs and QueryBufferLimit.
	inMulti     bool
	multiErr    bool
	queue       [][][]byte
	queuedArgs  int64
	queuedBytes int64
	tx          *keyspace.Tx
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
// local address laddr, reading its requests from src, whose shard
// operations wait in b.
func (s *Server) newClient(addr, laddr string, src io.Reader, b *batch) *client {
	now := s.mono()
	c := &client{
		srv:      s,
		id:       s.nextClientID.Add(1),
		addr:     addr,
		laddr:    laddr,
		fd:       -1,
		created:  s.cfg.Clock(),
		accepted: now,
		lastRead: now,
		rd:       newReader(src, &s.limits),
		out:      replyWriter{proto: 2, limit: int(s.limits.OutputLimit)},
		batch:    b,
	}
	c.setAuthed(s.cfg.Password == "")
	return c
}

// setAuthed records whether the connection is authenticated; until it is,
// its requests are read under the unauthenticated limits. A success also
// restarts the count of failed attempts (authFailed).
func (c *client) setAuthed(ok bool) {
	c.authed = ok
	c.rd.preAuth = !ok
	if ok {
		c.authFail = 0
	}
}

// stopped reports whether the client's remaining commands are to be
// dropped: it sent QUIT, broke a limit, or a handler panicked.
func (c *client) stopped() bool { return c.quit || c.out.over }

// execute runs one pipeline. Shard operations accumulate in the batch, and
// the caller runs it (flush) once it has executed every pipeline sharing
// the batch; before any other command (or error) is answered, the batch is
// run and answered first, so replies always come back in the order sent and
// a command sees the effects of every command before it.
func (c *client) execute(cmds [][][]byte) {
	for _, args := range cmds {
		if c.stopped() {
			break // Redis ignores what follows QUIT; a client over a limit is closed
		}
		cmd, err := c.admit(args)
		if cmd != nil {
			c.lastCmd = cmd.name
		}
		if err != nil {
			c.reject(cmd, err)
			continue
		}
		if c.inMulti && cmd.flags&flagTxControl == 0 {
			if c.flushPending() {
				c.queueCommand(args)
				c.out.overLimit()
			}
			continue
		}
		if cmd.prepare != nil {
			op, ok, err := c.prepare(cmd, args)
			switch {
			case !ok: // the handler panicked: answer after the replies pending before it
				c.panicked = false
				if c.flushPending() {
					c.panicked = true
					c.answerPanic(cmd)
				}
				continue
			case err != nil:
				c.fail(err)
				continue
			case carriesValue(&op):
				if c.pendingValue && !c.flushPending() {
					continue
				}
				c.pendingValue = true
			}
			c.batch.pending = append(c.batch.pending, pendingReply{c, c.batch.disp.Add(op), cmd})
			continue
		}
		if c.flushPending() {
			c.run(cmd, args)
			c.answerPanic(cmd)
			c.out.overLimit()
		}
	}
}

// carriesValue reports whether op's reply holds a stored value, whose size
// only the value's writer bounded.
func carriesValue(op *keyspace.Op) bool {
	return op.Kind == keyspace.Get || (op.Kind == keyspace.Set && op.Args.Flags&keyspace.SetGet != 0)
}

// The three ways into a command's handlers. Each recovers a panic in the
// handler (recoverHandler), so a bug in one command closes one connection
// instead of the server; each has a single defer, which Go compiles inline,
// so the guard costs no allocation.

// run runs an immediate command and writes its reply or error.
func (c *client) run(cmd *command, args [][]byte) {
	defer c.recoverHandler(cmd, len(c.out.b))
	if h := c.srv.handlerHook; h != nil {
		h("run", cmd.name)
	}
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
}

// prepare builds a shard operation's Op; ok is false if the handler
// panicked.
func (c *client) prepare(cmd *command, args [][]byte) (op keyspace.Op, ok bool, err error) {
	defer c.recoverHandler(cmd, len(c.out.b))
	if h := c.srv.handlerHook; h != nil {
		h("prepare", cmd.name)
	}
	op, err = cmd.prepare(c, args)
	return op, true, err
}

// reply writes a shard operation's reply from its results.
func (c *client) reply(cmd *command, op *keyspace.Op) {
	defer c.recoverHandler(cmd, len(c.out.b))
	if h := c.srv.handlerHook; h != nil {
		h("reply", cmd.name)
	}
	if op.Err != nil {
		c.out.errorReply(errorText(op.Err))
		return
	}
	cmd.reply(c, op)
}

// recoverHandler is deferred around every handler call. After a panic it
// drops whatever the handler had written (from mark on) and marks the
// client panicked; the caller then answers the command with an error, in
// its place among the replies (answerPanic). The panic is logged and
// counted by the server.
func (c *client) recoverHandler(cmd *command, mark int) {
	r := recover()
	if r == nil {
		return
	}
	c.srv.handlerPanicked(cmd.name, c.addr, r)
	if !c.out.over && mark <= len(c.out.b) {
		c.out.b = c.out.b[:mark]
	}
	c.panicked = true
}

// answerPanic answers cmd with an error if its handler panicked, and
// closes the connection once the replies before it are written: the handler
// may have left the connection's state (a transaction, a half-built reply)
// inconsistent.
func (c *client) answerPanic(cmd *command) {
	if !c.panicked {
		return
	}
	c.panicked = false
	c.out.errorReply("ERR internal error in '" + cmd.name + "'; the connection is closed (the server log has the details)")
	c.quit = true
}

// fail answers the current command with err, after the pending replies.
func (c *client) fail(err error) {
	if c.flushPending() {
		c.out.errorReply(errorText(err))
	}
}

// flushPending runs the batch the client's operations wait in, so that
// what comes next is answered after them. It reports whether the client
// still runs commands: one of those replies may have crossed the output
// limit, or its handler panicked.
func (c *client) flushPending() bool {
	c.batch.flush()
	return !c.stopped()
}

// flush runs the accumulated shard operations and writes each reply to its
// client's buffer. A client that stopped (over the output limit, or a
// handler panicked) gets no more replies: its operations ran, as a command
// a closed Redis client sent before it was closed still runs.
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
		p.c.pendingValue = false
		if p.c.stopped() {
			continue
		}
		p.c.reply(p.cmd, b.disp.Op(p.ticket))
		p.c.answerPanic(p.cmd)
		p.c.out.overLimit()
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
