package commands

import (
	"unsafe"

	"github.com/rlserver/rlserver/internal/resp"
	"github.com/rlserver/rlserver/internal/service"
)

// The ways into a command's handlers. Each recovers a panic in the handler,
// so a bug in one command closes one connection instead of the server; each
// has a single defer, which Go compiles inline, so the guard costs no
// allocation. A keyed command's panic on a shard is recovered there too
// when it came from the command's own code (keyed.Run); one from inside the
// keyspace fails the shard (see service.DB.Consistent).

// opSize is the size of a service.Op, in bytes: what a command spends per
// key it decides beyond the key's bytes.
const opSize = unsafe.Sizeof(service.Op{})

// argOverhead is the most memory, in bytes, one argument of a command costs
// beyond its own bytes: the reader's slice header for it, and, for a
// command that touches one key per argument (DEL, EXISTS, RL.ALLOWALL), the
// service.Op built for it and the keyspace's note of its shard. Each lives
// in a slice grown by append, so up to twice that is allocated at the
// moment a slice doubles. resp.Limits.MaxArgs × argOverhead bounds one
// command's bookkeeping.
const argOverhead = 2 * (resp.SliceHeaderSize + opSize + unsafe.Sizeof(uintptr(0)))

// run runs an immediate command and writes its reply or error.
func (c *session) run(cmd *command, args [][]byte) {
	defer c.recoverHandler(cmd, c.out.Len())
	if h := c.h.cfg.HandlerHook; h != nil {
		h("run", cmd.name)
	}
	start := c.h.now()
	if err := cmd.run(c, args); err != nil {
		c.out.Error(errorText(err))
	}
	c.observe(cmd, start)
}

// prepare builds a decision's Op; ok is false if the handler panicked.
func (c *session) prepare(cmd *command, args [][]byte) (op service.Op, ok bool, err error) {
	defer c.recoverHandler(cmd, c.out.Len())
	if h := c.h.cfg.HandlerHook; h != nil {
		h("prepare", cmd.name)
	}
	op, err = cmd.prepare(c, args)
	return op, true, err
}

// reply writes a decision's reply from its results.
func (c *session) reply(cmd *command, op *service.Op) {
	defer c.recoverHandler(cmd, c.out.Len())
	if h := c.h.cfg.HandlerHook; h != nil {
		h("reply", cmd.name)
	}
	if op.Err != nil {
		c.out.Error(errorText(op.Err))
		return
	}
	cmd.reply(c, op)
}

// recoverHandler is deferred around every handler call on the connection's
// goroutine. After a panic it drops whatever the handler had written (from
// mark on) and marks the session panicked; the caller then answers the
// command with an error, in its place among the replies (answerPanic).
func (c *session) recoverHandler(cmd *command, mark int) {
	r := recover()
	if r == nil {
		return
	}
	c.conn.Server().HandlerPanicked(cmd.name, c.conn.RemoteAddr(), r)
	c.out.Truncate(mark)
	c.panicked = true
}

// handlerPanicked answers a command whose handler panicked elsewhere (a
// keyed command, on a shard or a coordinator) with r.
func (h *Handler) handlerPanicked(c *session, cmd *command, r any) {
	c.conn.Server().HandlerPanicked(cmd.name, c.conn.RemoteAddr(), r)
	c.panicked = true
	c.answerPanic(cmd)
}

// answerPanic answers cmd with an error if its handler panicked, and
// closes the connection once the replies before it are written: the handler
// may have left the connection's state (a transaction, a half-built reply)
// inconsistent.
func (c *session) answerPanic(cmd *command) {
	if !c.panicked {
		return
	}
	c.panicked = false
	c.out.Error("ERR internal error in '" + cmd.name + "'; the connection is closed (the server log has the details)")
	c.conn.Quit()
}

// keyed is one execution of a keyed command: its words, where its reply
// goes, and scratch space. It runs on the goroutine that has exclusive use
// of its keys' shards, through a service.DB (as a Task in a batch, or in
// place).
type keyed struct {
	cmd     *command
	args    [][]byte
	out     *resp.Writer
	scratch []byte
	hook    func(kind, name string)
	// panicked is what the command's own code panicked with, recovered
	// on the goroutine that ran it; nil if it did not.
	panicked any
}

// Run implements service.Task.
func (x *keyed) Run(db *service.DB) {
	defer x.recover(db, x.out.Len())
	if x.hook != nil {
		x.hook("exec", x.cmd.name)
	}
	if err := x.cmd.exec(x, db); err != nil {
		x.out.Error(errorText(err))
	}
}

// recover is deferred by Run: a panic from the command's own code (the
// keyspace consistent) is kept for the connection to answer; one from
// inside the keyspace goes on unwinding, to fail the shards the work held.
func (x *keyed) recover(db *service.DB, mark int) {
	r := recover()
	if r == nil {
		return
	}
	if !db.Consistent() {
		panic(r)
	}
	x.out.Truncate(mark)
	x.panicked = r
}
