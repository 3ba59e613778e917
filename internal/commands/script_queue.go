package commands

import (
	"errors"
	"fmt"

	"github.com/rlserver/rlserver/internal/scripting"
	"github.com/rlserver/rlserver/internal/service"
)

// Scripts queued in the batch.
//
// A script that can only reach the keys it declared, all of them on one
// shard, is queued as a Task on that shard beside the pipeline's other
// work, as a GET is, so a pipeline of such scripts costs one message per
// shard rather than one round trip per script. It still runs alone on the
// shard: nothing interleaves with it. Which scripts qualify is read from
// their syntax once (scripting.Script.MayReachUndeclared, with keyWords
// below): a script the reading cannot prove confined runs as before,
// alone, after the pending work has been answered. That proof is what
// makes queueing safe: a queued script stopped to be rerun holding every
// shard would rerun after the commands the client sent after it had
// already run on other shards.

// queuedScript is a script queued in a batch: its run, the shard it runs
// on (for the gate), and the session whose reply budget it spends.
type queuedScript struct {
	scriptTask
	shard int
}

// errQueuedOverLimit marks a queued script whose reply would have taken
// its connection's queued replies past the output limit.
var errQueuedOverLimit = errors.New("queued script replies over the output limit")

// queueScript queues EVAL, EVALSHA, EVAL_RO or EVALSHA_RO in the batch if
// it qualifies (see the top of this file), reporting whether it did; if
// not, the command runs as usual (and answers any error itself).
func (c *session) queueScript(cmd *command, args [][]byte, bySHA, readOnly bool) bool {
	keys, argv, err := scripting.SplitKeys(args[2:])
	if err != nil || len(keys) == 0 {
		return false
	}
	shard := c.h.svc.ShardOf(nil, keys[0])
	for _, k := range keys[1:] {
		if c.h.svc.ShardOf(nil, k) != shard {
			return false
		}
	}
	hs := c.h.scripts
	var script *scripting.Script
	if bySHA {
		script = hs.cache.Get(args[1])
	} else {
		script, _ = hs.cache.Load(args[1])
	}
	if script == nil || script.WholeKeyspace() || script.MayReachUndeclared(keyWords) {
		return false
	}
	if hs.gate(false, shard) != nil {
		return false // BUSY: the usual path answers it, in order
	}
	if h := c.h.cfg.HandlerHook; h != nil {
		h("queue", cmd.name)
	}
	b := c.batch
	q := b.queuedScript(c)
	q.script, q.keys, q.argv, q.readOnly, q.shard = script, keys, argv, readOnly, shard
	q.proto, q.limit = c.out.Proto(), c.out.Limit()
	b.pending = append(b.pending, pending{s: c, ticket: b.ss.AddTask(keys[0], q), cmd: cmd, script: q})
	return true
}

// queuedScript returns a queuedScript of the batch for s's script.
func (b *batch) queuedScript(s *session) *queuedScript {
	if b.nscripts == len(b.scripts) {
		q := &queuedScript{}
		q.caller = q.call
		b.scripts = append(b.scripts, q)
	}
	q := b.scripts[b.nscripts]
	b.nscripts++
	q.c = s
	return q
}

// releaseScripts makes the round's queued scripts ready for the next.
func (b *batch) releaseScripts() {
	for _, q := range b.scripts[:b.nscripts] {
		q.c.queuedReplies.Store(0)
		q.clear()
		q.c = nil
	}
	b.nscripts = 0
}

// Run implements service.Task: the script runs on its shard, seen by the
// gate while it does (so that other clients get BUSY once it is past the
// time limit), and keeps its reply if the connection's budget allows.
//
// Once the connection's queued replies are past the output limit, its
// scripts still queued do not run: the client is cut off when the batch
// has run, as a client over the limit is before its next command.
func (q *queuedScript) Run(db *service.DB) {
	budget, limit := &q.c.queuedReplies, int64(q.limit)
	if budget.Load() > limit {
		q.err = errQueuedOverLimit
		return
	}
	hs := q.c.h.scripts
	f := &q.flight
	f.all, f.shards = false, append(f.shards[:0], q.shard)
	f.since = hs.now()
	hs.start(f)
	defer hs.end(f)
	q.scriptTask.Run(db)
	q.w.Release() // the script's commands' replies: only its own reply waits
	if q.err == nil && q.panicked == nil && budget.Add(int64(len(q.reply))) > limit {
		q.reply, q.err = nil, errQueuedOverLimit
	}
}

// scriptReply answers a queued script: its reply or error, the shard's
// failure if it never ran, or the end of the connection if the queued
// replies passed the output limit.
func (c *session) scriptReply(p pending) {
	q := p.script
	op := c.batch.ss.Op(p.ticket)
	switch {
	case op.Err != nil: // the shard failed: the script never ran
		c.out.Error(errorText(op.Err))
		return
	case q.err == errQueuedOverLimit:
		c.out.Overflow()
		return
	}
	if _, rerun := q.err.(*scripting.Rerun); rerun {
		// Unreachable while MayReachUndeclared is right: the script was
		// proven never to leave its keys. Should it happen, run it again
		// holding every shard, as an unqueued script would be, rather
		// than fail the client.
		c.h.log.Error(fmt.Sprintf("script %s was queued as confined to its keys but reached beyond them; rerunning it holding every shard", q.script.SHA()))
		q.dropObserved()
		q.reply, q.err = q.reply[:0], nil
		if err := q.dispatch(true); err != nil {
			c.out.Error(errorText(err))
			return
		}
	}
	if err := q.answer(c); err != nil {
		c.out.Error(errorText(err))
	}
}

// keyWords is the command table as scripting.Script.MayReachUndeclared
// reads it: for a command run from a script, the words holding its keys,
// or !ok when it may reach keys other than its words (a decision, whose
// shard is its rule's and key's; a command over the whole keyspace; keys
// found by parsing) or its keys are not known without its words.
func keyWords(name string, words int) ([]int, bool) {
	cmd := commands.byName[name]
	switch {
	case cmd == nil:
		return nil, true // an unknown command: the script's call fails
	case cmd.subByName != nil || cmd.prepare != nil || cmd.movableKeys != nil:
		return nil, false
	case cmd.exec == nil:
		return nil, !wholeKeyspace(cmd) && cmd.keys.first == 0
	case cmd.keys.first == 0:
		return nil, true
	case words < 0 && cmd.keys.last < 0:
		return nil, false // the keys run to the end of an expansion
	}
	k, last := cmd.keys, cmd.keys.last
	if words >= 0 {
		last = k.lastIn(make([][]byte, words))
	}
	var positions []int
	for i := k.first; i <= last; i += k.step {
		positions = append(positions, i)
	}
	return positions, true
}
