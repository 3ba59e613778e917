package commands

import (
	"github.com/rlserver/rlserver/internal/resp"
	"github.com/rlserver/rlserver/internal/service"
)

// batch gathers the work — decisions and keyed commands — of one
// connection's pipeline, or of every connection an event loop found ready,
// so each shard receives it as one message. It belongs to one goroutine.
type batch struct {
	h       *Handler
	ss      *service.Session
	pending []pending // work awaiting its replies, in the order added
	// calls are the keyed commands' Tasks, reused round after round; the
	// first ncalls are in use. Pointers, so a Task the shards hold stays
	// where it is while pending grows.
	calls  []*keyedCall
	ncalls int
	// scripts are the queued scripts' Tasks (script_queue.go), reused as
	// calls are; the first nscripts are in use.
	scripts  []*queuedScript
	nscripts int
	// gate, when set, is the cluster hand-over gate this batch holds while
	// it runs keyed commands in cluster mode; Flush releases it once the
	// pipeline is done (cmd_cluster_route.go).
	gate interface{ Leave() }
}

// pending is work whose reply is written to its connection after the batch
// has run: a decision (call and script nil), a keyed command, or a script.
type pending struct {
	s      *session
	ticket int
	cmd    *command
	call   *keyedCall
	script *queuedScript
}

// keyedCall is a keyed command batched as a Task: it runs on the shard
// owning its key, writing its reply into its own Writer, which Flush then
// copies to the connection's.
type keyedCall struct {
	keyed
	w resp.Writer
}

// call returns a keyedCall for s's command, ready to be added.
func (b *batch) call(s *session, cmd *command, args [][]byte) *keyedCall {
	if b.ncalls == len(b.calls) {
		b.calls = append(b.calls, &keyedCall{})
	}
	k := b.calls[b.ncalls]
	b.ncalls++
	k.w.Reuse(s.out.Proto(), s.out.Limit())
	k.args, k.cmd, k.out, k.hook = args, cmd, &k.w, s.h.cfg.HandlerHook
	return k
}

// Flush implements server.Batch: it runs the gathered work and writes each
// reply to its connection. A connection that stopped (over the output
// limit, or a handler panicked) gets no more replies: its work ran, as a
// command a closed Redis client sent before it was closed still runs.
//
// A cluster hand-over gate the batch holds is released here, once the
// pipeline is done (not by the runs within it: see cmd_cluster_route.go).
func (b *batch) Flush() {
	b.run()
	if b.gate != nil {
		b.leaveGate()
	}
}

// run runs the gathered work and writes each reply (see Flush).
func (b *batch) run() {
	if len(b.pending) == 0 {
		return
	}
	start := b.h.now()
	b.ss.Run()
	if b.h.observers != nil {
		// Each operation waited for the whole batch: that is its latency.
		for _, p := range b.pending {
			b.h.observe(p.cmd, start)
		}
	}
	for _, p := range b.pending {
		c := p.s
		c.pendingValue = false
		if c.stopped() {
			continue
		}
		switch {
		case p.script != nil:
			c.scriptReply(p)
		case p.call != nil:
			c.keyedReply(p)
		default:
			c.reply(p.cmd, b.ss.Op(p.ticket))
		}
		c.answerPanic(p.cmd)
		c.out.OverLimit()
	}
	b.ss.Reset()
	clear(b.pending)
	b.pending = b.pending[:0]
	for _, k := range b.calls[:b.ncalls] {
		k.args, k.cmd, k.out, k.panicked = nil, nil, nil, nil
		k.w.Release()
	}
	b.ncalls = 0
	b.releaseScripts()
}

// keyedReply copies a batched keyed command's reply to its connection: the
// reply, or the error the command returned or the shard gave, or (if its
// handler panicked) the answer to the panic.
func (c *session) keyedReply(p pending) {
	k := p.call
	op := c.batch.ss.Op(p.ticket)
	switch {
	case k.panicked != nil:
		c.h.handlerPanicked(c, p.cmd, k.panicked)
	case op.Err != nil: // the shard failed: the command never ran
		c.out.Error(errorText(op.Err))
	case k.w.Over():
		c.out.Overflow()
	default:
		c.out.Raw(k.w.Bytes())
	}
}

// leaveGate releases the cluster hand-over gate the batch holds.
func (b *batch) leaveGate() {
	b.gate.Leave()
	b.gate = nil
}
