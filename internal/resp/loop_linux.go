//go:build linux

package resp

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
)

// An event loop serves many plain-TCP connections from one goroutine, the
// way Redis does: it waits on its own epoll instance (level-triggered), reads
// once from each connection that has input, executes every complete command,
// runs the shard operations of all those connections as one batch — one
// message per shard per round, however many connections were ready — and
// then writes each connection's replies.
//
// Why: with a goroutine per connection, every request of an unpipelined
// client costs a read that finds nothing (Go's poller is edge-triggered, so
// a read must fail before the goroutine parks), a park and wake-up on the
// network poller, and a park and wake-up around the shard round trip; under
// load from 50 such clients those were a third of the server's CPU
// (docs/performance.md). A loop pays one read and one write per request, and
// one shard round trip and one wait per round, shared by every connection
// ready in it.
//
// The loop never blocks an OS thread: its epoll descriptor is itself
// registered with Go's network poller, so an idle loop parks like any
// goroutine. Connections are accepted by the server's accept goroutine and
// handed over through a queue and a wake-up pipe; from then on a
// connection's state belongs to its loop alone.
type eventLoop struct {
	srv   *Server
	ep    int             // the loop's epoll instance
	epf   *os.File        // ep, registered with Go's poller
	raw   syscall.RawConn // waits on epf
	wakeR int             // read end of the wake-up pipe, in ep
	wakeW int             // write end: new connections, shutdown
	batch *batch          // the shard operations of one round, every connection's

	mu       sync.Mutex
	incoming []*client // accepted, not yet adopted by the loop

	conns    []*client // by file descriptor; nil where none
	open     int       // connections the loop owns
	events   []syscall.EpollEvent
	ready    []*client          // connections with replies to write this round
	again    []*client          // readers stalled on a malformed command: serve next round
	poll     func(uintptr) bool // pollOnce, bound once
	polled   int                // events pollOnce collected
	deadline time.Time          // when the wait gives up to check timeouts; zero: never
	swept    int64              // when timeouts were last checked, ns on the loop's clock
	blocked  int                // connections whose replies wait for the socket to drain
}

// loopConn is the part of a client only its event loop touches.
type loopConn struct {
	fd           int
	rd           *reader
	written      int   // bytes of client.out already written
	blocked      bool  // replies are waiting for the socket to take them
	blockedSince int64 // ns on the loop's clock
	lastRead     int64 // ns on the loop's clock, for the idle timeout
}

// errWouldBlock is a loop connection's read finding no input.
var errWouldBlock = errors.New("no input ready")

// fdReader reads from a non-blocking socket without waiting.
type fdReader int

func (fd fdReader) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return 0, errWouldBlock
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// startLoops starts n event loops. It reports false (and starts nothing)
// when the listener is not a TCP listener.
func (s *Server) startLoops(n int) (bool, error) {
	tl, ok := s.ln.(*net.TCPListener)
	if !ok {
		return false, nil
	}
	// Accepting raw descriptors needs to wait on the listening socket, which
	// a net.Listener's raw connection cannot do; a duplicate of it, as an
	// os.File, can (it shares the socket's non-blocking mode, so Go's
	// poller takes it). Shutdown closes both.
	dup, err := tl.File()
	if err != nil {
		return false, err
	}
	s.lnFile = dup
	for range n {
		l, err := s.newEventLoop()
		if err != nil {
			for _, l := range s.loops {
				l.release()
			}
			s.loops = nil
			s.lnFile.Close()
			s.lnFile = nil
			return false, err
		}
		s.loops = append(s.loops, l)
	}
	for _, l := range s.loops {
		s.loopsDone.Add(1)
		go l.run()
	}
	return true, nil
}

func (s *Server) newEventLoop() (*eventLoop, error) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		syscall.Close(ep)
		return nil, os.NewSyscallError("pipe2", err)
	}
	l := &eventLoop{srv: s, ep: ep, wakeR: p[0], wakeW: p[1], batch: s.newBatch(),
		events: make([]syscall.EpollEvent, 256)}
	l.poll = l.pollOnce
	if err := l.control(syscall.EPOLL_CTL_ADD, l.wakeR, syscall.EPOLLIN); err != nil {
		l.release()
		return nil, err
	}
	// A non-blocking epoll descriptor is pollable: Go's poller reports it
	// readable when it has events, so the loop can park instead of holding
	// a thread in epoll_wait.
	if err := syscall.SetNonblock(ep, true); err != nil {
		l.release()
		return nil, os.NewSyscallError("fcntl", err)
	}
	l.epf = os.NewFile(uintptr(ep), "epoll")
	if err := l.epf.SetReadDeadline(time.Time{}); err != nil {
		l.release() // not pollable after all: the loop could not park
		return nil, err
	}
	if l.raw, err = l.epf.SyscallConn(); err != nil {
		l.release()
		return nil, err
	}
	return l, nil
}

// release closes the loop's descriptors.
func (l *eventLoop) release() {
	if l.epf != nil {
		l.epf.Close() // closes ep
	} else {
		syscall.Close(l.ep)
	}
	syscall.Close(l.wakeR)
	syscall.Close(l.wakeW)
}

func (l *eventLoop) control(op, fd int, events uint32) error {
	ev := syscall.EpollEvent{Events: events, Fd: int32(fd)}
	return os.NewSyscallError("epoll_ctl", syscall.EpollCtl(l.ep, op, fd, &ev))
}

// wake makes the loop look at its queue and the server's state. Safe from
// any goroutine.
func (l *eventLoop) wake() {
	// A full pipe already holds a wake-up: the error is not needed.
	syscall.Write(l.wakeW, []byte{0})
}

// acceptToLoops accepts connections and hands them to the loops in turn.
func (s *Server) acceptToLoops() {
	defer func() {
		close(s.serveDone)
		for _, l := range s.loops {
			l.wake() // a draining loop waits for this before it may exit
		}
	}()
	raw, err := s.lnFile.SyscallConn()
	if err != nil {
		s.log.Error("cannot accept connections", "err", err)
		return
	}
	backoff := 5 * time.Millisecond
	for next := 0; ; {
		var fd int
		var sa syscall.Sockaddr
		var aerr error
		err := raw.Read(func(lfd uintptr) bool {
			fd, sa, aerr = syscall.Accept4(int(lfd), syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
			return aerr != syscall.EAGAIN
		})
		if err != nil {
			return // the listener was closed: Shutdown
		}
		if aerr != nil {
			if aerr == syscall.EINTR || aerr == syscall.ECONNABORTED {
				continue
			}
			if s.draining.Load() {
				return
			}
			s.log.Warn("accept failed", "err", os.NewSyscallError("accept4", aerr))
			time.Sleep(backoff) // bounded back-off on a failing accept, not a timing assumption
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if s.full() {
			syscall.Write(fd, errMaxClients) // best effort: the socket buffer is empty
			syscall.Close(fd)
			continue
		}
		// As Go's own listener does for its connections.
		syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
		syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1)
		syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE, 15)
		syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, 15)
		local, _ := syscall.Getsockname(fd)
		l := s.loops[next%len(s.loops)]
		next++
		c := s.newClient(sockaddrString(sa), sockaddrString(local), l.batch)
		c.conn = &loopConn{fd: fd, rd: newReader(fdReader(fd), &s.limits)}
		s.opened(c)
		l.mu.Lock()
		l.incoming = append(l.incoming, c)
		l.mu.Unlock()
		l.wake()
	}
}

func sockaddrString(sa syscall.Sockaddr) string {
	switch sa := sa.(type) {
	case *syscall.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port)).String()
	case *syscall.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port)).String()
	}
	return "?"
}

// run is the loop's goroutine.
func (l *eventLoop) run() {
	defer l.srv.loopsDone.Done()
	defer l.release()
	for {
		n := l.wait()
		now := l.now()
		// Connections whose replies were written up to a malformed command
		// they sent: their reader reports it now, without input (serve
		// never adds to again, so the slice is stable here).
		for _, c := range l.again {
			if l.conns[c.conn.fd] == c {
				l.serve(c, now)
			}
		}
		clear(l.again)
		l.again = l.again[:0]
		for _, ev := range l.events[:n] {
			fd := int(ev.Fd)
			if fd == l.wakeR {
				l.adopt()
				continue
			}
			c := l.conns[fd]
			if c == nil {
				continue
			}
			if c.conn.blocked {
				// Only EPOLLOUT is asked for; an error or hang-up
				// makes the write fail and close.
				l.write(c, now)
				continue
			}
			l.serve(c, now) // input, end of input, or an error the read returns
		}
		// One round trip to the shards for every connection's operations.
		l.batch.flush()
		for _, c := range l.ready {
			l.write(c, now)
		}
		clear(l.ready)
		l.ready = l.ready[:0]

		if l.srv.limits.OutputTimeout > 0 || l.srv.cfg.IdleTimeout > 0 {
			l.sweep(now)
		}
		if l.srv.draining.Load() && l.drain() {
			return
		}
	}
}

// now returns the loop's clock, ns since the server started (monotonic).
func (l *eventLoop) now() int64 { return int64(time.Since(l.srv.started)) }

// wait blocks until a connection, the wake-up pipe or a timeout needs the
// loop, and returns how many events it filled in.
func (l *eventLoop) wait() int {
	if len(l.again) > 0 {
		n, _ := syscall.EpollWait(l.ep, l.events, 0)
		return max(n, 0)
	}
	l.setDeadline()
	l.polled = 0
	err := l.raw.Read(l.poll)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			l.deadline = time.Time{}
			return 0
		}
		l.srv.log.Error("event loop wait failed", "err", err)
		time.Sleep(time.Millisecond) // never spin on a broken descriptor
		return 0
	}
	return l.polled
}

// pollOnce is the check the loop makes before parking (and again each time
// Go's poller says the epoll descriptor is readable): it collects ready
// events without blocking and reports whether there were any. It is bound
// once, in newEventLoop, so waiting allocates nothing.
func (l *eventLoop) pollOnce(uintptr) bool {
	n, err := syscall.EpollWait(l.ep, l.events, 0)
	l.polled = max(n, 0)
	// Any error but an interruption is a bug in the loop; returning
	// lets wait log it rather than hang the connections.
	return n > 0 || (err != nil && err != syscall.EINTR)
}

// sweepEvery bounds how late an idle or output timeout is noticed.
const sweepEvery = 100 * time.Millisecond

// setDeadline arms the wait's timeout when a timeout check may come due.
func (l *eventLoop) setDeadline() {
	need := (l.srv.cfg.IdleTimeout > 0 && l.open > 0) || (l.srv.limits.OutputTimeout > 0 && l.blocked > 0)
	if l.srv.draining.Load() || !need {
		if !l.deadline.IsZero() {
			l.epf.SetReadDeadline(time.Time{})
			l.deadline = time.Time{}
		}
		return
	}
	if l.deadline.IsZero() {
		l.deadline = time.Now().Add(sweepEvery)
		l.epf.SetReadDeadline(l.deadline)
	}
}

// adopt takes the connections the accept goroutine queued.
func (l *eventLoop) adopt() {
	var buf [64]byte
	for {
		if n, _ := syscall.Read(l.wakeR, buf[:]); n < len(buf) {
			break
		}
	}
	l.mu.Lock()
	incoming := l.incoming
	l.incoming = nil
	l.mu.Unlock()
	now := l.now()
	for _, c := range incoming {
		fd := c.conn.fd
		if fd >= len(l.conns) {
			l.conns = append(l.conns, make([]*client, fd+1-len(l.conns))...)
		}
		l.conns[fd] = c
		l.open++
		c.conn.lastRead = now
		if err := l.control(syscall.EPOLL_CTL_ADD, fd, syscall.EPOLLIN); err != nil {
			l.srv.log.Warn("cannot watch connection", "addr", c.addr, "err", err)
			l.close(c)
		}
	}
}

// serve reads what c sent and executes every complete command; the replies
// of shard operations arrive when the round's batch is flushed.
func (l *eventLoop) serve(c *client, now int64) {
	if c.quit {
		return // closes once its replies are written; ignore what follows
	}
	cmds, err := c.conn.rd.next()
	if err == errWouldBlock {
		return
	}
	if err != nil {
		var pe *protocolError
		if errors.As(err, &pe) {
			l.srv.limitHits.Add(1)
			c.out.errorReply("ERR " + pe.Error())
			c.quit = true
			l.ready = append(l.ready, c)
			return
		}
		if !errors.Is(err, io.EOF) {
			l.srv.log.Debug("connection closed", "addr", c.addr, "err", err)
		}
		l.close(c)
		return
	}
	c.conn.lastRead = now
	l.srv.totalCommands.Add(uint64(len(cmds)))
	c.execute(cmds)
	l.ready = append(l.ready, c)
}

// write sends c's replies, as much as the socket takes. What it does not
// take waits for EPOLLOUT, and c's input waits with it, as a blocking write
// would make a goroutine wait: a client that does not read its replies gets
// no more commands run, and is cut after the output timeout.
func (l *eventLoop) write(c *client, now int64) {
	if l.conns[c.conn.fd] != c {
		return // closed earlier this round
	}
	if c.overOutputLimit() {
		l.close(c)
		return
	}
	for c.conn.written < len(c.out.b) {
		n, err := syscall.Write(c.conn.fd, c.out.b[c.conn.written:])
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			if !c.conn.blocked {
				c.conn.blocked, c.conn.blockedSince = true, now
				l.blocked++
				if err := l.control(syscall.EPOLL_CTL_MOD, c.conn.fd, syscall.EPOLLOUT); err != nil {
					l.close(c)
				}
			}
			return
		}
		if err != nil {
			l.close(c)
			return
		}
		c.conn.written += n
	}
	c.conn.written = 0
	if cap(c.out.b) > 1<<20 {
		c.out.b = nil // do not keep a large buffer for an idle connection
	}
	c.out.reset()
	if c.quit {
		l.close(c)
		return
	}
	if c.conn.blocked {
		c.conn.blocked = false
		l.blocked--
		if err := l.control(syscall.EPOLL_CTL_MOD, c.conn.fd, syscall.EPOLLIN); err != nil {
			l.close(c)
			return
		}
	}
	if c.conn.rd.stalled {
		// The replies before a malformed command are out: next round,
		// the reader reports the command (no input will announce it).
		l.again = append(l.again, c)
	}
}

// sweep cuts connections idle past the idle timeout and ones whose replies
// have waited past the output timeout; it runs at most every sweepEvery.
func (l *eventLoop) sweep(now int64) {
	if now-l.swept < int64(sweepEvery) {
		return
	}
	l.swept = now
	idle, stuck := int64(l.srv.cfg.IdleTimeout), int64(l.srv.limits.OutputTimeout)
	for _, c := range l.conns {
		switch {
		case c == nil:
		case c.conn.blocked && stuck > 0 && now-c.conn.blockedSince >= stuck:
			l.srv.limitHits.Add(1)
			l.srv.log.Warn("disconnecting client that does not read its replies", "addr", c.addr, "timeout", l.srv.limits.OutputTimeout)
			l.close(c)
		case !c.conn.blocked && idle > 0 && now-c.conn.lastRead >= idle:
			l.close(c)
		}
	}
}

// drain closes the connections with no replies left to write (all of them
// once Shutdown's deadline has passed) and reports whether the loop may
// exit: none is left, and the accept goroutine, which may still be handing
// over one it accepted just before the listener closed, has finished.
func (l *eventLoop) drain() bool {
	accepting := true
	select {
	case <-l.srv.serveDone:
		accepting = false // checked before adopt, so adopt sees its last hand-over
	default:
	}
	l.adopt()
	cut := l.srv.cut.Load()
	for _, c := range l.conns {
		if c != nil && (cut || !c.conn.blocked) {
			l.close(c)
		}
	}
	return l.open == 0 && !accepting
}

// close ends c's connection.
func (l *eventLoop) close(c *client) {
	fd := c.conn.fd
	if l.conns[fd] != c {
		return
	}
	l.conns[fd] = nil
	l.open--
	if c.conn.blocked {
		l.blocked--
	}
	syscall.Close(fd) // also removes it from the epoll set
	l.srv.closed(c)
}
