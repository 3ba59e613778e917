//go:build linux

package server

import "golang.org/x/sys/unix"

// A pipeline that may run long (LongRunner) leaves the event loop: a
// goroutine of its own executes it and runs its batch, then hands the
// connection back to the loop, which writes the replies and watches the
// socket again. Meanwhile the goroutine owns the connection's state (its
// reader, session and replies) and the loop touches none of it: the socket
// is out of the epoll set (input waits in the kernel; level-triggered epoll
// reports it once the socket is back), no deadline is swept (the
// connection is running a command, not idle), CLIENT KILL's close waits for
// the return (write then finds it killed), and drain waits for it, as
// Shutdown waits for a connection goroutine's command.

// handoff is a connection whose long pipeline has run, with the batch it
// ran in, queued for its loop to take back.
type handoff struct {
	c *Conn
	b Batch
}

// maxSpareBatches bounds the batches a loop keeps for long pipelines.
const maxSpareBatches = 16

// handOff runs c's pipeline cmds on a goroutine of its own.
func (l *eventLoop) handOff(c *Conn, cmds [][][]byte, now int64) {
	if err := l.control(unix.EPOLL_CTL_DEL, c.conn.fd, 0); err != nil {
		l.srv.log.Warn("cannot stop watching connection", "addr", c.addr, "err", err)
		l.close(c)
		return
	}
	var b Batch
	if n := len(l.spare); n > 0 {
		b = l.spare[n-1]
		l.spare[n-1] = nil
		l.spare = l.spare[:n-1]
	} else {
		b = l.srv.cfg.Handler.NewBatch()
	}
	c.conn.handedOff = true
	c.long.UseBatch(b)
	l.srv.handoffs.Add(1)
	l.started = true // yieldIfDue: let it start at the end of the round
	go l.runHandedOff(c, b, cmds, now)
}

// runHandedOff is the goroutine of a handed-off pipeline.
func (l *eventLoop) runHandedOff(c *Conn, b Batch, cmds [][][]byte, now int64) {
	defer l.srv.handoffs.Done() // after the wake-up: Shutdown waits for it before closing the pipe
	c.ingest(cmds, nil, now)
	b.Flush()
	l.mu.Lock()
	l.returned = append(l.returned, handoff{c, b})
	l.mu.Unlock()
	l.wake()
}

// takeBack takes the connections whose long pipelines have run back into
// the loop, and writes their replies.
func (l *eventLoop) takeBack() {
	l.mu.Lock()
	l.taking = append(l.taking[:0], l.returned...)
	clear(l.returned)
	l.returned = l.returned[:0]
	l.mu.Unlock()
	if len(l.taking) == 0 {
		return
	}
	now := l.srv.mono()
	for _, h := range l.taking {
		c := h.c
		c.conn.handedOff = false
		c.long.UseBatch(l.batch)
		if len(l.spare) < maxSpareBatches {
			l.spare = append(l.spare, h.b)
		}
		if err := l.control(unix.EPOLL_CTL_ADD, c.conn.fd, unix.EPOLLIN); err != nil {
			l.srv.log.Warn("cannot watch connection", "addr", c.addr, "err", err)
			l.close(c)
			continue
		}
		l.write(c, now)
	}
	clear(l.taking)
}
