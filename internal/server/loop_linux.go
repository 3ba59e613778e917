//go:build linux

package server

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// An event loop serves many plain-TCP connections from one goroutine, the
// way Redis does: it waits on its own epoll instance (level-triggered), reads
// once from each connection that has input, executes every complete command,
// runs the shard operations of all those connections as one batch — one
// message per shard per round, however many connections were ready — and
// then writes each connection's replies. What each step means for a
// connection is conn.go's, shared with the goroutine model; this file does
// the I/O and the waiting.
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
// connection's state belongs to its loop alone. Other goroutines reach it
// the same way: CLIENT KILL queues a close request (requestClose), Shutdown
// sets a flag; both wake the loop.
type eventLoop struct {
	srv     *Server
	ep      int                               // the loop's epoll instance
	epf     *os.File                          // ep, registered with Go's poller
	rawRead func(func(fd uintptr) bool) error // waits on epf (its RawConn's Read)
	wakeR   int                               // read end of the wake-up pipe, in ep
	wakeW   int                               // write end: new connections, kills, shutdown
	batch   Batch                             // the shard operations of one round, every connection's
	sweeps  bool                              // some deadline is configured: sweep checks them

	mu       sync.Mutex
	incoming []*Conn   // accepted, not yet adopted by the loop
	kills    []*Conn   // CLIENT KILL requests for the loop's connections
	returned []handoff // connections whose long pipeline has run (handoff_linux.go)

	adopting []*Conn   // incoming or kills, being handled (reused)
	taking   []handoff // returned, being taken back (reused)
	spare    []Batch   // batches for long pipelines, reused
	conns    []*Conn   // by file descriptor; nil where none
	open     int       // connections the loop owns
	events   []unix.EpollEvent
	ready    []*Conn            // connections with replies to write this round
	again    []*Conn            // connections with buffered input to parse next round
	poll     func(uintptr) bool // pollOnce, bound once
	polled   int                // events pollOnce collected
	polls    int                // pollOnce's calls in this wait: > 1 if it parked
	// For yieldIfDue: when the loop last parked or yielded (monotonic ns),
	// and whether this round started a goroutine (a handed-off pipeline).
	yielded  int64
	started  bool
	yield    func()    // runtime.Gosched; a test's counter
	deadline time.Time // when the armed wait gives up to sweep; zero: not armed
	swept    int64     // when deadlines were last checked, monotonic ns
	blocked  int       // connections whose replies wait for the socket to drain
}

// loopConn is the part of a client only its event loop touches.
type loopConn struct {
	fd           int
	written      int   // bytes of client.out already written
	blocked      bool  // replies are waiting for the socket to take them
	blockedSince int64 // monotonic ns
	queued       bool  // served this round: in ready, replies not yet written
	// handedOff: a goroutine of its own runs the connection's pipeline
	// (handoff_linux.go); until it is back, the loop leaves the
	// connection alone and watches no event of its socket.
	handedOff bool
}

// errWouldBlock is a loop connection's read finding no input.
var errWouldBlock = errors.New("no input ready")

// fdReader reads from a non-blocking socket without waiting.
type fdReader int

func (fd fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(fd), p)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
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
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		unix.Close(ep)
		return nil, os.NewSyscallError("pipe2", err)
	}
	l := &eventLoop{srv: s, ep: ep, wakeR: p[0], wakeW: p[1], batch: s.cfg.Handler.NewBatch(),
		events: make([]unix.EpollEvent, 256),
		sweeps: s.cfg.IdleTimeout > 0 || s.limits.OutputTimeout > 0 || s.handshakeDeadlines()}
	l.poll = l.pollOnce
	l.yield = runtime.Gosched
	if err := l.control(unix.EPOLL_CTL_ADD, l.wakeR, unix.EPOLLIN); err != nil {
		l.release()
		return nil, err
	}
	// A non-blocking epoll descriptor is pollable: Go's poller reports it
	// readable when it has events, so the loop can park instead of holding
	// a thread in epoll_wait.
	if err := unix.SetNonblock(ep, true); err != nil {
		l.release()
		return nil, os.NewSyscallError("fcntl", err)
	}
	l.epf = os.NewFile(uintptr(ep), "epoll")
	if err := l.epf.SetReadDeadline(time.Time{}); err != nil {
		l.release() // not pollable after all: the loop could not park
		return nil, err
	}
	raw, err := l.epf.SyscallConn()
	if err != nil {
		l.release()
		return nil, err
	}
	l.rawRead = raw.Read
	return l, nil
}

// handshakeDeadlines reports whether unauthenticated connections have a
// deadline (Limits.HandshakeTimeout, with a password required).
func (s *Server) handshakeDeadlines() bool {
	return s.limits.HandshakeTimeout > 0 && s.cfg.Password != ""
}

// release closes the loop's descriptors. Only once nothing can wake the
// loop any more (see Shutdown): a wake-up written after would land on
// whatever reused the descriptor number.
func (l *eventLoop) release() {
	if l.epf != nil {
		l.epf.Close() // closes ep
	} else {
		unix.Close(l.ep)
	}
	unix.Close(l.wakeR)
	unix.Close(l.wakeW)
}

func (l *eventLoop) control(op, fd int, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	return os.NewSyscallError("epoll_ctl", unix.EpollCtl(l.ep, op, fd, &ev))
}

// wake makes the loop look at its queues and the server's state. Safe from
// any goroutine until release.
func (l *eventLoop) wake() {
	// A full pipe already holds a wake-up: the error is not needed.
	unix.Write(l.wakeW, []byte{0})
}

// requestClose asks the loop to close c (CLIENT KILL). The caller holds
// the server's mu, so c, and with it the loop, is still open.
func (l *eventLoop) requestClose(c *Conn) {
	l.mu.Lock()
	l.kills = append(l.kills, c)
	l.mu.Unlock()
	l.wake()
}

// acceptToLoops accepts connections and hands them to the loops in turn.
func (s *Server) acceptToLoops() {
	defer func() {
		close(s.serveDone)
		for _, l := range s.loops {
			l.wake() // a draining loop waits for this before it may exit
		}
		// Only now may Shutdown close the loops' descriptors: a wake-up
		// written after they are closed would land on whatever reuses
		// their numbers — another connection's socket, say.
		close(s.wakersDone)
	}()
	raw, err := s.lnFile.SyscallConn()
	if err != nil {
		s.log.Error("cannot accept connections", "err", err)
		return
	}
	var backoff acceptBackoff
	for next := 0; ; {
		var fd int
		var sa unix.Sockaddr
		var aerr error
		err := raw.Read(func(lfd uintptr) bool {
			fd, sa, aerr = unix.Accept4(int(lfd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
			return aerr != unix.EAGAIN
		})
		if err != nil {
			return // the listener was closed: Shutdown
		}
		if aerr != nil {
			if aerr == unix.EINTR || aerr == unix.ECONNABORTED {
				continue
			}
			if s.draining.Load() {
				return
			}
			backoff.failed(s, os.NewSyscallError("accept4", aerr))
			continue
		}
		backoff.succeeded()
		if !s.admit() {
			unix.Write(fd, errMaxClients) // best effort: the socket buffer is empty
			unix.Close(fd)
			continue
		}
		// As Go's own listener does for its connections.
		unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1)
		unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, 15)
		unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, 15)
		local, _ := unix.Getsockname(fd)
		l := s.loops[next%len(s.loops)]
		next++
		c := s.newConn(sockaddrString(sa), sockaddrString(local), fdReader(fd), l.batch)
		c.loop, c.conn, c.fd = l, &loopConn{fd: fd}, fd
		s.opened(c)
		l.mu.Lock()
		l.incoming = append(l.incoming, c)
		l.mu.Unlock()
		l.wake()
	}
}

func sockaddrString(sa unix.Sockaddr) string {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port)).String()
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port)).String()
	}
	return "?"
}

// run is the loop's goroutine.
func (l *eventLoop) run() {
	defer l.srv.loopsDone.Done()
	for {
		n := l.wait()
		now := l.srv.mono()
		// Connections with input buffered that no event will announce
		// (serve never adds to again, so the slice is stable here).
		for _, c := range l.again {
			if l.owns(c) {
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
		l.batch.Flush()
		for _, c := range l.ready {
			l.write(c, now)
		}
		clear(l.ready)
		l.ready = l.ready[:0]

		if l.sweeps {
			l.sweep(now)
		}
		if l.srv.draining.Load() && l.drain() {
			return
		}
		l.yieldIfDue(now)
	}
}

// yieldEvery bounds how long a loop that never parks keeps its processor
// from the goroutines readied behind it.
const yieldEvery = time.Millisecond

// yieldIfDue lets other goroutines run on the loop's processor when they
// could otherwise wait long. A loop with input every round never parks, and
// a goroutine made runnable on its processor meanwhile — one it started for
// a handed-off pipeline, a timer's, one the network poller woke (the accept
// loop's) — would wait for Go's scheduler to preempt the loop, 10 ms later.
// The loop yields after a round that started a goroutine, and at least every
// yieldEvery while it has not parked. (A shard's waiters get the processor
// at once: shard.release.) A yield that finds nothing else to run costs
// well under a microsecond.
func (l *eventLoop) yieldIfDue(now int64) {
	switch {
	case l.started:
	case l.polls > 1: // the wait parked: others ran meanwhile
		l.yielded = now
		return
	case now-l.yielded < int64(yieldEvery):
		return
	}
	l.yield()
	l.started, l.yielded = false, now
}

func (l *eventLoop) owns(c *Conn) bool { return l.conns[c.conn.fd] == c }

// wait blocks until a connection, the wake-up pipe or a sweep needs the
// loop, and returns how many events it filled in.
func (l *eventLoop) wait() int {
	if len(l.again) > 0 {
		l.polls = 0 // no parking
		n, _ := unix.EpollWait(l.ep, l.events, 0)
		return max(n, 0)
	}
	l.armDeadline()
	l.polled, l.polls = 0, 0
	if err := l.rawRead(l.poll); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return 0 // time to sweep; armDeadline re-arms or disarms next time
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
	n, err := unix.EpollWait(l.ep, l.events, 0)
	l.polled = max(n, 0)
	l.polls++
	// Any error but an interruption is a bug in the loop; returning
	// lets wait log it rather than hang the connections.
	return n > 0 || (err != nil && err != unix.EINTR)
}

// sweepEvery bounds how late a deadline is noticed.
const sweepEvery = 100 * time.Millisecond

// sweepDue reports whether a connection's deadline may come due while the
// loop waits: then the wait must give up in time to sweep.
func (l *eventLoop) sweepDue() bool {
	s := l.srv
	return !s.draining.Load() &&
		((l.open > 0 && (s.cfg.IdleTimeout > 0 || s.handshakeDeadlines())) || (l.blocked > 0 && s.limits.OutputTimeout > 0))
}

// armDeadline keeps the wait's deadline on the epoll file in step with
// sweepDue. The deadline on the file is what the wait obeys, and it stays
// set once passed (every wait then fails at once, and collects no events),
// so it is cleared whenever no sweep is due, and moved on whenever it has
// passed — l.deadline always mirrors what the file holds.
func (l *eventLoop) armDeadline() {
	if !l.sweepDue() {
		if !l.deadline.IsZero() {
			l.epf.SetReadDeadline(time.Time{})
			l.deadline = time.Time{}
		}
		return
	}
	if now := time.Now(); l.deadline.IsZero() || !now.Before(l.deadline) {
		l.deadline = now.Add(sweepEvery)
		l.epf.SetReadDeadline(l.deadline)
	}
}

// adopt takes what other goroutines queued: the connections the accept
// goroutine accepted, and CLIENT KILL's requests.
func (l *eventLoop) adopt() {
	var buf [64]byte
	for {
		if n, _ := unix.Read(l.wakeR, buf[:]); n < len(buf) {
			break
		}
	}
	l.mu.Lock()
	l.adopting = append(l.adopting[:0], l.incoming...)
	clear(l.incoming)
	l.incoming = l.incoming[:0]
	l.mu.Unlock()
	for _, c := range l.adopting {
		fd := c.conn.fd
		if fd >= len(l.conns) {
			l.conns = append(l.conns, make([]*Conn, fd+1-len(l.conns))...)
		}
		l.conns[fd] = c
		l.open++
		if err := l.control(unix.EPOLL_CTL_ADD, fd, unix.EPOLLIN); err != nil {
			l.srv.log.Warn("cannot watch connection", "addr", c.addr, "err", err)
			l.close(c)
		}
	}
	l.mu.Lock()
	l.adopting = append(l.adopting[:0], l.kills...)
	clear(l.kills)
	l.kills = l.kills[:0]
	l.mu.Unlock()
	for _, c := range l.adopting {
		if l.owns(c) && !c.conn.handedOff { // a handed-off one closes once back: it is killed
			l.close(c)
		}
	}
	clear(l.adopting)
	l.takeBack()
}

// serve reads what c sent and executes every complete command; the replies
// of shard operations arrive when the round's batch is flushed.
func (l *eventLoop) serve(c *Conn, now int64) {
	if c.quit || c.conn.queued || c.conn.handedOff {
		// Closing once its replies are written; or already served this
		// round (its arguments are in the batch: reading now would
		// overwrite them); or its pipeline runs elsewhere. Level-triggered
		// epoll reports the input again.
		return
	}
	cmds, err := c.rd.Next()
	if err == errWouldBlock {
		return
	}
	if err == nil && c.long != nil && c.long.MayRunLong(cmds) {
		l.handOff(c, cmds, now)
		return
	}
	if !c.ingest(cmds, err, now) {
		l.close(c)
		return
	}
	c.conn.queued = true
	l.ready = append(l.ready, c)
}

// write sends c's replies, as much as the socket takes. What it does not
// take waits for EPOLLOUT, and c's input waits with it, as a blocking write
// would make a goroutine wait: a client that does not read its replies gets
// no more commands run, and is cut after the output timeout.
func (l *eventLoop) write(c *Conn, now int64) {
	if !l.owns(c) {
		return // closed earlier this round
	}
	c.conn.queued = false
	if !c.sendable() {
		l.close(c)
		return
	}
	for c.conn.written < c.out.Len() {
		n, err := unix.Write(c.conn.fd, c.out.Bytes()[c.conn.written:])
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			if !c.conn.blocked {
				c.conn.blocked, c.conn.blockedSince = true, now
				l.blocked++
				if err := l.control(unix.EPOLL_CTL_MOD, c.conn.fd, unix.EPOLLOUT); err != nil {
					l.close(c)
					return
				}
				c.publish()
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
	if c.conn.blocked {
		c.conn.blocked = false
		l.blocked--
		if err := l.control(unix.EPOLL_CTL_MOD, c.conn.fd, unix.EPOLLIN); err != nil {
			l.close(c)
			return
		}
	}
	switch c.wrote() {
	case closeConn:
		l.close(c)
	case parseAgain:
		l.again = append(l.again, c)
	}
}

// sweep closes connections whose deadline has passed (conn.go says which
// deadline applies); it runs at most every sweepEvery.
func (l *eventLoop) sweep(now int64) {
	if now-l.swept < int64(sweepEvery) {
		return
	}
	l.swept = now
	for _, c := range l.conns {
		if c == nil || c.conn.handedOff { // running commands: no deadline applies
			continue
		}
		if c.conn.blocked {
			if at := c.writeDeadline(c.conn.blockedSince); at != 0 && now >= at {
				c.expire(expireOutput)
				l.close(c)
			}
			continue
		}
		if at, why := c.readDeadline(); at != 0 && now >= at {
			c.expire(why)
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
		// A handed-off connection finishes its commands first, as a
		// connection's own goroutine does.
		if c != nil && !c.conn.handedOff && (cut || !c.conn.blocked) {
			l.close(c)
		}
	}
	return l.open == 0 && !accepting
}

// close ends c's connection.
func (l *eventLoop) close(c *Conn) {
	fd := c.conn.fd
	if l.conns[fd] != c {
		return
	}
	l.conns[fd] = nil
	l.open--
	if c.conn.blocked {
		l.blocked--
	}
	l.srv.closed(c) // first: see serve
	unix.Close(fd)  // also removes it from the epoll set
}
